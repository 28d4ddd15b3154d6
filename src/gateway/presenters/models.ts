/** ListModels entries (proto) → the public `GET /api/v1/models` objects. Pure. */
import type { Model } from "../../gen/portico/chat/v1/chat_service_pb.js";

/**
 * One ListModels entry as the public JSON object: the real-world service's `/models` fields, and OpenAI's
 * `object` and `owned_by`. An entry the catalog does not describe (a preset, `<provider>/*`, a model the
 * catalog lacks) has the same fields, with `canonical_slug` its id, `context_length` null and prices "-1"
 * (the price depends on the model the request reaches, as the real-world service writes it for its routers).
 */
export function presentModel(m: Model): Record<string, unknown> {
  const p = m.pricing;
  const a = m.architecture;
  return {
    id: m.id,
    object: "model",
    created: Number(m.created),
    owned_by: m.ownedBy,
    canonical_slug: m.canonicalSlug ?? m.id,
    name: m.name ?? m.id,
    ...(m.description !== undefined ? { description: m.description } : {}),
    context_length: m.contextLength === undefined ? null : Number(m.contextLength),
    architecture: a
      ? { modality: a.modality, input_modalities: a.inputModalities, output_modalities: a.outputModalities, ...(a.tokenizer !== undefined ? { tokenizer: a.tokenizer } : {}) }
      : { modality: "text->text", input_modalities: ["text"], output_modalities: ["text"] },
    pricing: p
      ? {
          prompt: p.prompt,
          completion: p.completion,
          request: p.request,
          image: p.image,
          ...(p.inputCacheRead !== undefined ? { input_cache_read: p.inputCacheRead } : {}),
          ...(p.inputCacheWrite !== undefined ? { input_cache_write: p.inputCacheWrite } : {}),
          ...(p.internalReasoning !== undefined ? { internal_reasoning: p.internalReasoning } : {}),
          ...(p.webSearch !== undefined ? { web_search: p.webSearch } : {}),
        }
      : { prompt: "-1", completion: "-1" },
    supported_parameters: m.supportedParameters,
    top_provider: m.topProvider
      ? {
          context_length: Number(m.topProvider.contextLength),
          max_completion_tokens: m.topProvider.maxCompletionTokens === undefined ? null : Number(m.topProvider.maxCompletionTokens),
          is_moderated: m.topProvider.isModerated,
        }
      : { context_length: null, max_completion_tokens: null, is_moderated: false },
    per_request_limits: null,
    default_parameters: null,
    supported_voices: null,
    links: { details: m.canonicalSlug !== undefined ? `/api/v1/models/${m.canonicalSlug}/endpoints` : "" },
  };
}
