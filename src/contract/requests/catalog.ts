/**
 * The model catalog's entries (docs/catalog.md), defined once: the operator's catalog file
 * (PORTICO_CATALOG_FILE) is read with them, and the management API's bodies (PUT /catalog/models/{slug},
 * PATCH /catalog/models/{slug}/endpoints/{provider}; gRPC CatalogService) are these definitions, so a file
 * entry and an API body follow the same rules. Rules that need the rest of the catalog (a new model's required
 * fields, one provider model id per model, the providers the deployment serves) live in src/core/catalog.
 */
import { z } from "zod";

export const QUANTIZATIONS = ["int4", "int8", "fp4", "mxfp4", "nvfp4", "fp6", "fp8", "mxfp8", "fp16", "bf16", "fp32", "unknown"] as const;

const PRICE_RULE = 'must be a decimal string of USD per token, such as "0.000003" (at most 15 decimals)';
const price = z.string({ error: () => PRICE_RULE }).regex(/^\d{1,9}(\.\d{1,15})?$/, { error: () => PRICE_RULE });
const priceSet = {
  prompt: price,
  completion: price,
  input_cache_read: price.optional(),
  input_cache_write: price.optional(),
  internal_reasoning: price.optional(),
};
const Pricing = z.strictObject({
  ...priceSet,
  request: price.optional(),
  image: price.optional(),
  web_search: price.optional(),
  tiers: z
    .array(
      z.strictObject({
        above_prompt_tokens: z.int().min(1),
        prompt: price.optional(),
        completion: price.optional(),
        input_cache_read: price.optional(),
        input_cache_write: price.optional(),
        internal_reasoning: price.optional(),
      }),
    )
    .optional(),
});
const slugPattern = /^[a-z0-9][a-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._:-]*$/;
export const EndpointPatch = z.strictObject({
  provider: z.string().regex(/^[a-z0-9][a-z0-9._-]*$/, { error: () => "must be a provider slug (lowercase)" }),
  /** Removes the built-in endpoint of this provider. */
  remove: z.literal(true).optional(),
  model_id: z.string().min(1).optional(),
  aliases: z.array(z.string().min(1)).optional(),
  pricing: Pricing.optional(),
  context_length: z.int().min(1).optional(),
  max_completion_tokens: z.int().min(1).nullable().optional(),
  quantization: z.enum(QUANTIZATIONS).optional(),
  data_policy: z.strictObject({ training: z.boolean(), retains_prompts: z.boolean(), retention_days: z.int().min(0).nullable().optional() }).optional(),
  zdr: z.boolean().optional(),
  distillable: z.boolean().optional(),
  supported_parameters: z.array(z.string()).optional(),
  status: z.enum(["active", "deprecated", "disabled"]).optional(),
  source: z.strictObject({ url: z.string(), as_of: z.string() }).optional(),
});
export const ModelPatch = z.strictObject({
  slug: z.string().regex(slugPattern, { error: () => "must be a canonical slug <author>/<model>, such as acme/llama-3-70b" }),
  /** Removes the built-in model. */
  remove: z.literal(true).optional(),
  name: z.string().min(1).optional(),
  description: z.string().optional(),
  context_length: z.int().min(1).optional(),
  architecture: z
    .strictObject({ input_modalities: z.array(z.string()), output_modalities: z.array(z.string()), tokenizer: z.string().min(1).optional() })
    .optional(),
  supported_parameters: z.array(z.string()).optional(),
  endpoints: z.array(EndpointPatch).optional(),
  /** Routing ratings (docs/plugins.md, "The quality table"), 0 to 1. */
  quality: z.number().min(0).max(1).optional(),
  coding_score: z.number().min(0).max(1).optional(),
  task_scores: z
    .strictObject({ coding: z.number().min(0).max(1).optional(), long_context: z.number().min(0).max(1).optional(), chat: z.number().min(0).max(1).optional() })
    .optional(),
  ratings_source: z.string().max(512).optional(),
});
export const OperatorFile = z.strictObject({ version: z.literal(1), models: z.array(ModelPatch) });


/** PUT /catalog/models/{author}/{slug}: a whole model (the slug is the path's; `remove` is DELETE's). */
export const PutCatalogModelRequest = ModelPatch.omit({ remove: true, slug: true }).extend({ slug: z.string().optional() });

/** PATCH /catalog/models/{author}/{slug}/endpoints/{provider}: the endpoint's fields to change (the provider is the path's). */
export const UpdateCatalogEndpointRequest = EndpointPatch.omit({ remove: true, provider: true }).extend({ provider: z.string().optional() });
