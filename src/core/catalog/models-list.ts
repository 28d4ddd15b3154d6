/**
 * `GET /api/v1/models` (ChatService.ListModels) from the catalog (docs/catalog.md, "The model list"): the ids
 * the caller may route to, in the real-world service's shape (one entry per model under its canonical slug,
 * with name, context_length, architecture, pricing per token, supported_parameters and top_provider).
 *
 * A catalog model is listed when at least one of its endpoints (status not `disabled`) is reachable: the
 * caller's credentials (or the operator's shared keys) allow its provider's every model (`<provider>/*`), or
 * name its provider model id (`<provider>/<model id>`) or the model's canonical slug. Its `pricing` and
 * `top_provider` are those of the cheapest reachable endpoint (prompt + completion price), the one default
 * routing prefers. Ids the catalog lacks (`<provider>/*`, an allowed model the catalog does not know) stay
 * listed under their own id, without catalog figures.
 */
import type { Model, ModelPricing } from "../../gen/portico/chat/v1/chat_service_pb.js";
import type { Catalog, CatalogModel, Endpoint } from "./catalog.js";
import { femto } from "./cost.js";

type Entry = Pick<Model, "id" | "ownedBy" | "created"> & Partial<Omit<Model, "$typeName" | "$unknown">>;

export function pricingOf(e: Endpoint): Omit<ModelPricing, "$typeName" | "$unknown"> {
  const p = e.pricing;
  return {
    prompt: p.prompt,
    completion: p.completion,
    request: p.request ?? "0",
    image: p.image ?? "0",
    ...(p.input_cache_read !== undefined ? { inputCacheRead: p.input_cache_read } : {}),
    ...(p.input_cache_write !== undefined ? { inputCacheWrite: p.input_cache_write } : {}),
    ...(p.internal_reasoning !== undefined ? { internalReasoning: p.internal_reasoning } : {}),
    ...(p.web_search !== undefined ? { webSearch: p.web_search } : {}),
  };
}

/** `text+image->text`. */
export function modalityOf(model: CatalogModel): string {
  const a = model.architecture;
  return `${a.input_modalities.join("+")}->${a.output_modalities.join("+")}`;
}

/** Prompt + completion price, the order "cheapest first" uses. */
export function priceRank(e: Endpoint): bigint {
  return femto(e.pricing.prompt) + femto(e.pricing.completion);
}

function describe(model: CatalogModel, e: Endpoint): Partial<Entry> {
  const a = model.architecture;
  return {
    canonicalSlug: model.slug,
    name: model.name,
    ...(model.description !== undefined ? { description: model.description } : {}),
    contextLength: BigInt(model.context_length),
    architecture: {
      modality: modalityOf(model),
      inputModalities: a.input_modalities,
      outputModalities: a.output_modalities,
      ...(a.tokenizer !== undefined ? { tokenizer: a.tokenizer } : {}),
    } as Model["architecture"],
    pricing: pricingOf(e) as Model["pricing"],
    supportedParameters: model.supported_parameters,
    topProvider: {
      contextLength: BigInt(e.context_length),
      ...(e.max_completion_tokens !== null ? { maxCompletionTokens: BigInt(e.max_completion_tokens) } : {}),
      isModerated: false,
    } as Model["topProvider"],
  };
}

type Grant = { ownedBy: string; created: bigint };

/**
 * `ids`: the ids the caller may route to (`<provider>/*`, `<provider>/<model>` or a canonical slug, the
 * granting provider as `ownedBy`) with their creation time; returns one entry per reachable catalog model
 * and the ids the catalog does not describe.
 */
export function withCatalog(ids: ReadonlyMap<string, Grant>, catalog: Catalog): Entry[] {
  const bare = new Map(ids);
  const out: Entry[] = [];
  for (const model of catalog.models()) {
    let top: Endpoint | undefined;
    let created: bigint | undefined;
    for (const e of model.endpoints) {
      if (e.status === "disabled") continue;
      const direct = [e.model_id, ...(e.aliases ?? [])].map((id) => `${e.provider}/${id}`);
      const bySlug = ids.get(model.slug);
      const grants = [...direct.map((id) => ids.get(id)), ids.get(`${e.provider}/*`), bySlug?.ownedBy === e.provider ? bySlug : undefined].filter((g): g is Grant => g !== undefined);
      if (!grants.length) continue;
      // The catalog describes these ids now: they are listed under the model.
      for (const id of direct) bare.delete(id);
      if (bySlug?.ownedBy === e.provider) bare.delete(model.slug);
      for (const g of grants) if (created === undefined || g.created < created) created = g.created;
      if (!top || priceRank(e) < priceRank(top)) top = e;
    }
    if (!top) continue;
    out.push({ id: model.slug, ownedBy: model.slug.split("/")[0]!, created: created!, ...describe(model, top) });
  }
  for (const [id, g] of bare) if (!out.some((m) => m.id === id)) out.push({ id, ...g });
  return out;
}
