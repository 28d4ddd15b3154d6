/**
 * CatalogService over Connect: proto ⇄ domain only. `ListModelEndpoints` answers any API key; the other
 * methods need a management key (catalog-management.ts checks and audits the changes).
 */
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { CatalogEntry, CatalogService, EndpointSchema } from "../../gen/portico/catalog/v1/catalog_service_pb.js";
import { callerOf } from "../auth.js";
import { notFound } from "../errors.js";
import { managerOf } from "../management/manager.js";
import { checkPage, createOrdering, pageFields, pageOf } from "../paging.js";
import type { Init } from "../proto-init.js";
import type { CatalogModel, Endpoint } from "./catalog.js";
import type { CatalogEntryView, CatalogManagement } from "./catalog-management.js";
import type { LiveCatalog } from "./live-catalog.js";
import { modalityOf, priceRank } from "./models-list.js";
import { checkSlug } from "./overrides.js";
import type { EndpointStats } from "../chat/routing/endpoint-stats.js";

/** The catalog list's order (docs/api.md#pagination): by canonical slug, unique. */
const CATALOG_ORDER = createOrdering("catalog_models", [{ field: "slug", dir: "asc", kind: "string" }]);

function entryOf(v: CatalogEntryView): Init<CatalogEntry> {
  return { model: JSON.parse(JSON.stringify(v.model)) as JsonObject, overridden: v.overridden };
}

function endpointOf(model: CatalogModel, e: Endpoint, providerName: string, stats?: EndpointStats): MessageInitShape<typeof EndpointSchema> {
  const p = e.pricing;
  const live = stats?.figures(model.slug, e.provider);
  return {
    name: `${providerName} | ${model.slug}`,
    modelId: model.slug,
    modelName: model.name,
    providerName,
    tag: e.quantization === "unknown" ? e.provider : `${e.provider}/${e.quantization}`,
    pricing: {
      prompt: p.prompt,
      completion: p.completion,
      request: p.request ?? "0",
      image: p.image ?? "0",
      ...(p.input_cache_read !== undefined ? { inputCacheRead: p.input_cache_read } : {}),
      ...(p.input_cache_write !== undefined ? { inputCacheWrite: p.input_cache_write } : {}),
      ...(p.internal_reasoning !== undefined ? { internalReasoning: p.internal_reasoning } : {}),
      ...(p.web_search !== undefined ? { webSearch: p.web_search } : {}),
    },
    contextLength: BigInt(e.context_length),
    ...(e.max_completion_tokens !== null ? { maxCompletionTokens: BigInt(e.max_completion_tokens) } : {}),
    quantization: e.quantization,
    status: e.status === "deprecated" ? -1 : 0,
    catalogStatus: e.status,
    supportedParameters: e.supported_parameters ?? model.supported_parameters,
    dataPolicy: {
      training: e.data_policy.training,
      retainsPrompts: e.data_policy.retains_prompts,
      ...(e.data_policy.retention_days != null ? { retentionDays: e.data_policy.retention_days } : {}),
    },
    zdr: e.zdr,
    ...(e.distillable !== undefined ? { distillable: e.distillable } : {}),
    provider: e.provider,
    providerModelId: e.model_id,
    sourceUrl: e.source.url,
    sourceAsOf: e.source.as_of,
    ...(live && stats ? { live: { latencyMs: { p50: live.latency.p50 * 1000, p75: live.latency.p75 * 1000, p90: live.latency.p90 * 1000, p99: live.latency.p99 * 1000 }, throughput: live.throughput, samples: live.samples, windowSeconds: Math.round(stats.windowMs / 1000) } } : {}),
  };
}

export function createCatalogHandler(deps: {
  catalog: LiveCatalog;
  management: CatalogManagement;
  /** A provider slug's display name. */
  providerName: (slug: string) => string;
  /** The live figures routing records (the chat handler's instance); none: no figures listed. */
  endpointStats?: EndpointStats;
}): ServiceImpl<typeof CatalogService> {
  const { catalog, management } = deps;
  const builtAt = BigInt(Math.floor(Date.now() / 1000));
  const found = (slug: string): CatalogEntryView => {
    const v = management.get(checkSlug(slug));
    if (!v) throw notFound(`No model ${slug} in the catalog`);
    return v;
  };
  return {
    async listModelEndpoints(req, ctx: HandlerContext) {
      callerOf(ctx);
      const model = catalog.model(checkSlug(req.slug));
      if (!model) throw notFound(`No model ${req.slug} in the catalog`);
      const endpoints = catalog.endpointsOf(model.slug).sort((a, b) => (priceRank(a) < priceRank(b) ? -1 : priceRank(a) > priceRank(b) ? 1 : 0));
      const a = model.architecture;
      return {
        id: model.slug,
        name: model.name,
        created: builtAt,
        description: model.description ?? "",
        architecture: {
          modality: modalityOf(model),
          inputModalities: a.input_modalities,
          outputModalities: a.output_modalities,
          ...(a.tokenizer !== undefined ? { tokenizer: a.tokenizer } : {}),
        },
        endpoints: endpoints.map((e) => endpointOf(model, e, deps.providerName(e.provider), deps.endpointStats)),
      };
    },
    async listCatalogModels(req, ctx) {
      managerOf(ctx);
      const page = checkPage(req, CATALOG_ORDER);
      const all = management.list();
      // Sorted by slug (unique): the cursor's slug is where the page starts after.
      const after = page.after?.[0] as string | undefined;
      const rest = after === undefined ? all : all.filter((v) => v.model.slug > after);
      const rows = rest.slice(page.offset, page.offset + page.limit + 1).map((v) => ({ slug: v.model.slug, view: v }));
      const res = pageOf(rows, CATALOG_ORDER, page);
      return { models: res.items.map((r) => entryOf(r.view)), totalCount: all.length, ...pageFields(res) };
    },
    async getCatalogModel(req, ctx) {
      managerOf(ctx);
      return { model: entryOf(found(req.slug)) };
    },
    async putCatalogModel(req, ctx) {
      const { actor } = managerOf(ctx);
      return { model: entryOf(await management.putModel(actor, req.slug, req.model ?? {})) };
    },
    async updateCatalogEndpoint(req, ctx) {
      const { actor } = managerOf(ctx);
      return { model: entryOf(await management.changeEndpoint(actor, req.slug, req.provider, req.changes ?? {})) };
    },
    async deleteCatalogEndpoint(req, ctx) {
      const { actor } = managerOf(ctx);
      return { model: entryOf(await management.removeEndpoint(actor, req.slug, req.provider)) };
    },
    async deleteCatalogModel(req, ctx) {
      const { actor } = managerOf(ctx);
      await management.removeModel(actor, req.slug);
      return {};
    },
  };
}
