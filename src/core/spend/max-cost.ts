/**
 * The largest cost a chat request can have on one endpoint (docs/limits.md, "The reservation"). Pure.
 *
 *   prompt tokens   ≤ the UTF-8 bytes of the JSON request body + 8,192 per non-text content part
 *   output tokens   ≤ max_completion_tokens ?? max_tokens (capped at the endpoint's maximum output), else the
 *                     endpoint's maximum output, else its context length; × `n`
 *   cost            ≤ prompt tokens × the highest prompt-side price of the endpoint (prompt, cache read, cache
 *                     write, over the base prices and every long-context tier)
 *                   + output tokens × the highest output-side price (completion, internal reasoning)
 *                   + the per-request price + the per-image price × input images
 *                   + the provider's native web searches × the per-search price (`web_search`): an Anthropic
 *                     search runs at most `max_uses` times per provider request, and a paused turn is continued
 *                     at most ANTHROPIC_MAX_PAUSE_CONTINUATIONS times; Gemini's grounding and an OpenAI search
 *                     model's `web_search_options` bill once per answer
 *
 * Why the bytes bound the tokens: every tokenizer the adapters' providers use is byte-level BPE, or SentencePiece
 * with byte fallback, so one token covers at least one byte of text; the chat template's few tokens per message
 * are fewer than the JSON's own bytes per message (`{"role":"user","content":""}` is 28 bytes); tool definitions
 * and response formats are counted in the body's bytes. A content part that is not text (an image or audio by URL)
 * is counted at 8,192 tokens on top of its bytes: above what the providers' published image formulas reach
 * (OpenAI high detail at most ~1,500 tokens at 2048×2048 on GPT-4o, ~2,500 on GPT-4.1 mini; Anthropic ~1,600;
 * Gemini 258 per tile). Inline (base64) images are counted by their bytes, which far exceed their tokens.
 */
import type { CanonicalRequest } from "../chat/model.js";
import { ANTHROPIC_MAX_PAUSE_CONTINUATIONS } from "../chat/providers/anthropic.js";
import type { ProviderAdapter, UpstreamCall } from "../chat/providers/types.js";
import { femto } from "../catalog/cost.js";
import type { Endpoint } from "../catalog/types.js";

/** Tokens counted for each content part that is not text. */
export const NON_TEXT_PART_TOKENS = 8_192;

/** Input images (`image_url` parts) and other non-text parts of the request's messages. */
function partsOf(body: Readonly<Record<string, unknown>>): { images: number; nonText: number } {
  let images = 0;
  let nonText = 0;
  if (!Array.isArray(body.messages)) return { images, nonText };
  for (const m of body.messages as Array<{ content?: unknown }>) {
    if (!Array.isArray(m?.content)) continue;
    for (const part of m.content as Array<{ type?: unknown }>) {
      if (part?.type === "image_url") images++;
      if (part?.type !== "text") nonText++;
    }
  }
  return { images, nonText };
}

const positiveInt = (v: unknown): number | undefined => (typeof v === "number" && Number.isInteger(v) && v > 0 ? v : undefined);

/** The prompt-token bound of `request` (see above). */
export function promptTokenBound(request: CanonicalRequest): number {
  return Buffer.byteLength(JSON.stringify(request), "utf8") + partsOf(request).nonText * NON_TEXT_PART_TOKENS;
}

/** The output-token bound of `request` on `endpoint` (see above). */
export function outputTokenBound(request: CanonicalRequest, endpoint: Endpoint): number {
  const endpointMax = endpoint.max_completion_tokens ?? endpoint.context_length;
  const asked = positiveInt(request.max_completion_tokens) ?? positiveInt(request.max_tokens);
  const perChoice = asked !== undefined ? Math.min(asked, endpointMax) : endpointMax;
  return perChoice * (positiveInt(request.n) ?? 1);
}

const maxOf = (values: Array<string | undefined>): bigint => values.reduce<bigint>((m, v) => (v === undefined ? m : femto(v) > m ? femto(v) : m), 0n);

/** The endpoint's highest prompt-side price per token (prompt, cache read, cache write; base and every tier), femto-USD. */
export function promptPriceOf(endpoint: Endpoint): bigint {
  const p = endpoint.pricing;
  return maxOf([p, ...(p.tiers ?? [])].flatMap((s) => [s.prompt, s.input_cache_read, s.input_cache_write]));
}

/** The largest cost, in femto-USD, that `request` can have when `endpoint` serves it. */
export function maxCostOf(request: CanonicalRequest, endpoint: Endpoint): bigint {
  const p = endpoint.pricing;
  const sets = [p, ...(p.tiers ?? [])];
  const promptPrice = maxOf(sets.flatMap((s) => [s.prompt, s.input_cache_read, s.input_cache_write]));
  const outputPrice = maxOf(sets.flatMap((s) => [s.completion, s.internal_reasoning]));
  const { images } = partsOf(request);
  return (
    BigInt(promptTokenBound(request)) * promptPrice +
    BigInt(outputTokenBound(request, endpoint)) * outputPrice +
    (p.request !== undefined ? femto(p.request) : 0n) +
    BigInt(images) * (p.image !== undefined ? femto(p.image) : 0n)
  );
}

/**
 * The most native web searches the provider can bill for `call` (see above): 0 when none is asked for; undefined
 * when nothing bounds them (Anthropic's tool without `max_uses`).
 */
export function nativeSearchBound(call: UpstreamCall, format: ProviderAdapter["format"]): number | undefined {
  if (format === "anthropic") {
    if (!call.webSearch) return 0;
    return call.webSearch.maxUses === undefined ? undefined : call.webSearch.maxUses * (1 + ANTHROPIC_MAX_PAUSE_CONTINUATIONS);
  }
  if (format === "gemini") return call.webSearch ? 1 : 0;
  return call.webSearch || (call.body.web_search_options !== undefined && call.body.web_search_options !== null) ? 1 : 0;
}

/** The largest search fees of `searches` native searches on `endpoint` (femto-USD; 0 when it prices none). */
export function searchFeesOf(searches: number, endpoint: Endpoint): bigint {
  const price = endpoint.pricing.web_search;
  return price === undefined ? 0n : BigInt(searches) * femto(price);
}
