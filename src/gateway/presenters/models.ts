/** ListModels entries (proto) → the public `GET /api/v1/models` objects. Pure. */
import type { Model } from "../../gen/portico/chat/v1/chat_service_pb.js";

/** One ListModels entry as the public JSON object (the real-world service's `/models` fields for catalogued models). */
export function presentModel(m: Model): Record<string, unknown> {
  const out: Record<string, unknown> = { id: m.id, object: "model", created: Number(m.created), owned_by: m.ownedBy };
  if (m.canonicalSlug === undefined) return out;
  const p = m.pricing;
  return {
    ...out,
    canonical_slug: m.canonicalSlug,
    name: m.name,
    context_length: Number(m.contextLength),
    architecture: { modality: m.architecture?.modality, input_modalities: m.architecture?.inputModalities, output_modalities: m.architecture?.outputModalities },
    pricing: p && {
      prompt: p.prompt,
      completion: p.completion,
      request: p.request,
      image: p.image,
      ...(p.inputCacheRead !== undefined ? { input_cache_read: p.inputCacheRead } : {}),
      ...(p.inputCacheWrite !== undefined ? { input_cache_write: p.inputCacheWrite } : {}),
      ...(p.internalReasoning !== undefined ? { internal_reasoning: p.internalReasoning } : {}),
    },
    supported_parameters: m.supportedParameters,
    top_provider: m.topProvider && {
      context_length: Number(m.topProvider.contextLength),
      max_completion_tokens: m.topProvider.maxCompletionTokens === undefined ? null : Number(m.topProvider.maxCompletionTokens),
      is_moderated: m.topProvider.isModerated,
    },
  };
}
