/**
 * `GET /api/v1/models` (ChatService.ListModels) from the catalog (docs/catalog.md, "The model list"): the ids
 * the caller may route to, each catalogued one described in the real-world service's shape (name,
 * context_length, architecture, pricing per token, supported_parameters, top_provider).
 *
 * Routing reads `<provider>/<model>` (docs/chat.md), so a catalog model is listed once per endpoint the caller
 * could reach, under the id that reaches it (`groq/llama-3.3-70b-versatile`), with the catalog's
 * `canonical_slug` (`meta-llama/llama-3.3-70b-instruct`). An endpoint is reachable when the caller's
 * credentials allow its provider's every model (`<provider>/*`) or name that id. Disabled endpoints are not
 * listed. Ids the catalog lacks (a credential's allowed model, `<provider>/*`) are listed as before, bare.
 */
import type { Model, ModelPricing } from "../../gen/portico/chat/v1/chat_service_pb.js";
import type { Catalog, CatalogModel, Endpoint } from "./catalog.js";

type Entry = Pick<Model, "id" | "ownedBy" | "created"> & Partial<Omit<Model, "$typeName" | "$unknown">>;

function pricingOf(e: Endpoint): Omit<ModelPricing, "$typeName" | "$unknown"> {
  const p = e.pricing;
  return {
    prompt: p.prompt,
    completion: p.completion,
    request: p.request ?? "0",
    image: p.image ?? "0",
    ...(p.input_cache_read !== undefined ? { inputCacheRead: p.input_cache_read } : {}),
    ...(p.input_cache_write !== undefined ? { inputCacheWrite: p.input_cache_write } : {}),
    ...(p.internal_reasoning !== undefined ? { internalReasoning: p.internal_reasoning } : {}),
  };
}

function describe(model: CatalogModel, e: Endpoint): Partial<Entry> {
  const a = model.architecture;
  return {
    canonicalSlug: model.slug,
    name: model.name,
    contextLength: BigInt(e.context_length),
    architecture: { modality: `${a.input_modalities.join("+")}->${a.output_modalities.join("+")}`, inputModalities: a.input_modalities, outputModalities: a.output_modalities } as Model["architecture"],
    pricing: pricingOf(e) as Model["pricing"],
    supportedParameters: e.supported_parameters ?? model.supported_parameters,
    topProvider: {
      contextLength: BigInt(e.context_length),
      ...(e.max_completion_tokens !== null ? { maxCompletionTokens: BigInt(e.max_completion_tokens) } : {}),
      isModerated: false,
    } as Model["topProvider"],
  };
}

/**
 * `ids`: the ids the caller may route to (`<provider>/*` or `<provider>/<model>`) with their owner and creation
 * time; returns them with every reachable catalog endpoint added or described.
 */
export function withCatalog(ids: ReadonlyMap<string, { ownedBy: string; created: bigint }>, catalog: Catalog): Entry[] {
  const out = new Map<string, Entry>([...ids].map(([id, m]) => [id, { id, ...m }]));
  for (const model of catalog.models()) {
    for (const e of model.endpoints) {
      if (e.status === "disabled") continue;
      const id = `${e.provider}/${e.model_id}`;
      const grant = ids.get(id) ?? ids.get(`${e.provider}/*`);
      if (!grant) continue;
      out.set(id, { ...grant, ...out.get(id), id, ...describe(model, e) });
    }
  }
  return [...out.values()];
}
