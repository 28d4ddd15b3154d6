/** CatalogService messages (proto) → the public JSON of `/api/v1/models/{author}/{slug}/endpoints` and `/api/v1/catalog/…`. Pure. */
import type { CatalogEntry, Endpoint, ListModelEndpointsResponse, Percentiles, Pricing } from "../../gen/portico/catalog/v1/catalog_service_pb.js";

function pricing(p: Pricing | undefined): Record<string, string> {
  if (!p) return {};
  return {
    prompt: p.prompt,
    completion: p.completion,
    request: p.request,
    image: p.image,
    ...(p.inputCacheRead !== undefined ? { input_cache_read: p.inputCacheRead } : {}),
    ...(p.inputCacheWrite !== undefined ? { input_cache_write: p.inputCacheWrite } : {}),
    ...(p.internalReasoning !== undefined ? { internal_reasoning: p.internalReasoning } : {}),
    ...(p.webSearch !== undefined ? { web_search: p.webSearch } : {}),
  };
}

function percentiles(p: Percentiles | undefined): Record<string, number> | null {
  return p ? { p50: p.p50, p75: p.p75, p90: p.p90, p99: p.p99 } : null;
}

function endpoint(e: Endpoint): Record<string, unknown> {
  const toolChoice = e.supportedParameters.includes("tool_choice");
  return {
    name: e.name,
    model_id: e.modelId,
    model_name: e.modelName,
    provider_name: e.providerName,
    tag: e.tag,
    pricing: pricing(e.pricing),
    context_length: Number(e.contextLength),
    max_completion_tokens: e.maxCompletionTokens === undefined ? null : Number(e.maxCompletionTokens),
    max_prompt_tokens: null,
    quantization: e.quantization,
    status: e.status,
    supported_parameters: e.supportedParameters,
    // A provider that prices cache reads but no cache writes caches prompts on its own (OpenAI, DeepSeek, Gemini).
    supports_implicit_caching: e.pricing?.inputCacheRead !== undefined && e.pricing.inputCacheWrite === undefined,
    supports_tool_choice: { auto: toolChoice, none: toolChoice, required: toolChoice, function: toolChoice },
    // Live figures of the serving core process over its routing window (docs/catalog.md); null without samples.
    latency_last_30m: percentiles(e.live?.latencyMs),
    throughput_last_30m: percentiles(e.live?.throughput),
    live_samples: e.live?.samples ?? 0,
    live_window_seconds: e.live?.windowSeconds ?? null,
    // Uptime: not recorded per endpoint (docs/catalog.md).
    uptime_last_5m: null,
    uptime_last_30m: null,
    uptime_last_1d: null,
    // Portico's own fields.
    provider: e.provider,
    provider_model_id: e.providerModelId,
    catalog_status: e.catalogStatus,
    data_policy: {
      training: e.dataPolicy?.training ?? true,
      retains_prompts: e.dataPolicy?.retainsPrompts ?? true,
      retention_days: e.dataPolicy?.retentionDays ?? null,
    },
    zdr: e.zdr,
    distillable: e.distillable ?? null,
    source: { url: e.sourceUrl, as_of: e.sourceAsOf },
  };
}

export function presentModelEndpoints(r: ListModelEndpointsResponse): Record<string, unknown> {
  return {
    id: r.id,
    name: r.name,
    created: Number(r.created),
    description: r.description,
    architecture: {
      modality: r.architecture?.modality ?? null,
      input_modalities: r.architecture?.inputModalities ?? [],
      output_modalities: r.architecture?.outputModalities ?? [],
      tokenizer: r.architecture?.tokenizer ?? null,
      instruct_type: null,
    },
    endpoints: r.endpoints.map(endpoint),
  };
}

/** A catalog model as served, in the catalog file's format, with `overridden`. */
export function presentCatalogEntry(e: CatalogEntry): Record<string, unknown> {
  return { ...(e.model ?? {}), overridden: e.overridden };
}

const priceProps = Object.fromEntries(["prompt", "completion", "request", "image", "input_cache_read", "input_cache_write", "internal_reasoning", "web_search"].map((k) => [k, { type: "string" }]));
const percentile = { type: ["object", "null"], properties: { p50: { type: "number" }, p75: { type: "number" }, p90: { type: "number" }, p99: { type: "number" } } };

export const modelEndpointsSchema = {
  type: "object",
  required: ["id", "name", "created", "description", "architecture", "endpoints"],
  properties: {
    id: { type: "string", description: "Canonical slug." },
    name: { type: "string" },
    created: { type: "integer", description: "Unix seconds: when the serving process built its catalog." },
    description: { type: "string" },
    architecture: {
      type: "object",
      properties: {
        modality: { type: ["string", "null"] },
        input_modalities: { type: "array", items: { type: "string" } },
        output_modalities: { type: "array", items: { type: "string" } },
        tokenizer: { type: ["string", "null"] },
        instruct_type: { type: "null" },
      },
    },
    endpoints: {
      type: "array",
      items: {
        type: "object",
        properties: {
          name: { type: "string" },
          model_id: { type: "string", description: "The model's canonical slug." },
          model_name: { type: "string" },
          provider_name: { type: "string", description: "The provider's display name." },
          tag: { type: "string", description: "Provider slug, with `/<quantization>` when known." },
          pricing: { type: "object", description: "USD per token (per request, per image) as decimal strings", properties: priceProps },
          context_length: { type: "integer" },
          max_completion_tokens: { type: ["integer", "null"] },
          max_prompt_tokens: { type: "null" },
          quantization: { type: "string" },
          status: { type: "integer", description: "0: serving; -1: deprecated." },
          supported_parameters: { type: "array", items: { type: "string" } },
          supports_implicit_caching: { type: "boolean" },
          supports_tool_choice: {
            type: "object",
            properties: { auto: { type: "boolean" }, none: { type: "boolean" }, required: { type: "boolean" }, function: { type: "boolean" } },
          },
          latency_last_30m: percentile,
          throughput_last_30m: percentile,
          live_samples: { type: "integer", description: "Generations the live figures come from (0: none, figures null)." },
          live_window_seconds: { type: ["integer", "null"], description: "The window the live figures cover, in seconds." },
          uptime_last_5m: { type: ["number", "null"] },
          uptime_last_30m: { type: ["number", "null"] },
          uptime_last_1d: { type: ["number", "null"] },
          provider: { type: "string", description: "Provider slug (what `provider.order`/`only`/`ignore` match)." },
          provider_model_id: { type: "string", description: "The model id the provider's API takes." },
          catalog_status: { type: "string", enum: ["active", "deprecated"] },
          data_policy: {
            type: "object",
            properties: { training: { type: "boolean" }, retains_prompts: { type: "boolean" }, retention_days: { type: ["integer", "null"] } },
          },
          zdr: { type: "boolean" },
          distillable: { type: ["boolean", "null"] },
          source: { type: "object", properties: { url: { type: "string" }, as_of: { type: "string" } } },
        },
      },
    },
  },
} as const;

export const catalogEntrySchema = {
  type: "object",
  additionalProperties: true,
  description: "A model in the catalog file's format (docs/catalog.md) with `overridden`: whether a management change shapes it.",
  properties: { slug: { type: "string" }, name: { type: "string" }, overridden: { type: "boolean" } },
} as const;
