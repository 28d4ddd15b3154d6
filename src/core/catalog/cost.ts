/**
 * A generation's cost from an endpoint's prices and the canonical usage (docs/catalog.md, "Cost rules"). Pure.
 *
 * The canonical usage (src/core/chat/model.ts) counts every prompt token in `prompt_tokens`, the cache-read
 * (`prompt_tokens_details.cached_tokens`) and cache-write (`prompt_tokens_details.cache_write_tokens`) ones
 * included, as OpenAI and Gemini report them and as the Anthropic adapter maps Anthropic's separate counts.
 * So each prompt token is billed exactly once, at one price:
 *
 *   uncached = prompt_tokens − cached − cache_write        at `prompt`
 *   cached                                                 at `input_cache_read`  (absent: `prompt`)
 *   cache_write                                            at `input_cache_write` (absent: `prompt`)
 *   completion_tokens (reasoning included)                 at `completion`; reasoning tokens at
 *                                                          `internal_reasoning` when the endpoint prices them apart
 *   + `request` once, + `image` per input image
 *   + `web_search` per search of the provider's native search (`server_tool_use.web_search_requests`)
 *
 * When the prompt exceeds a tier's `above_prompt_tokens`, that tier's prices replace the base ones for the whole
 * request (long-context pricing). Counts a provider reports inconsistently (cached + written > prompt) are
 * clamped so that no token is billed twice. Arithmetic is in integer femto-dollars (1e-15 USD); the dollar
 * figures are converted once, at the end.
 */
import type { Usage } from "../chat/model.js";
import type { Pricing, PriceSet } from "./types.js";

const SCALE = 15;
const FEMTO_PER_USD = 10n ** BigInt(SCALE);

/** A decimal USD string → integer femto-dollars. */
export function femto(usd: string): bigint {
  const m = /^(\d+)(?:\.(\d{1,15}))?$/.exec(usd);
  if (!m) throw new Error(`not a price: ${usd}`);
  return BigInt(m[1]!) * FEMTO_PER_USD + BigInt((m[2] ?? "").padEnd(SCALE, "0"));
}

/** Integer femto-dollars → USD as a number (the wire's form). */
export function usd(femtos: bigint): number {
  return Number(femtos) / 1e15;
}

/** The token counts the cost is made of, each counted once. */
export interface BilledTokens {
  uncachedPrompt: number;
  cacheRead: number;
  cacheWrite: number;
  completion: number;
  /** Of `completion`: billed at `internal_reasoning` when the endpoint has that price. */
  reasoning: number;
  images: number;
  /** The provider's native web searches (`server_tool_use.web_search_requests`), billed at `web_search`. */
  searches: number;
}

/** Each part of the cost, in femto-dollars. */
export interface CostParts {
  prompt: bigint;
  cacheRead: bigint;
  cacheWrite: bigint;
  completion: bigint;
  request: bigint;
  image: bigint;
  /** The provider's search fees: searches × `web_search`. */
  webSearch: bigint;
  total: bigint;
}

const count = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0);

/**
 * The tokens of `usage`, split so that none is counted twice. `images` is the number of input images
 * (priced per image where the endpoint says so).
 */
export function billedTokens(usage: Usage, images = 0): BilledTokens {
  const prompt = count(usage.prompt_tokens);
  const details = usage.prompt_tokens_details;
  // DeepSeek's API reports cache hits as `prompt_cache_hit_tokens` (its own field) beside the OpenAI ones.
  const deepseekHits = (usage as unknown as Record<string, unknown>).prompt_cache_hit_tokens;
  const cacheRead = Math.min(prompt, count(details?.cached_tokens ?? deepseekHits));
  const cacheWrite = Math.min(prompt - cacheRead, count(details?.cache_write_tokens));
  const completion = count(usage.completion_tokens);
  const reasoning = Math.min(completion, count(usage.completion_tokens_details?.reasoning_tokens));
  const searches = count(usage.server_tool_use?.web_search_requests);
  return { uncachedPrompt: prompt - cacheRead - cacheWrite, cacheRead, cacheWrite, completion, reasoning, images: count(images), searches };
}

/** The prices that apply to a prompt of `promptTokens`: the highest tier it exceeds over the base prices. */
export function pricesFor(pricing: Pricing, promptTokens: number): Required<Pick<PriceSet, "prompt" | "completion">> & PriceSet {
  let best: (typeof pricing.tiers & object)[number] | undefined;
  for (const t of pricing.tiers ?? []) if (promptTokens > t.above_prompt_tokens && (!best || t.above_prompt_tokens > best.above_prompt_tokens)) best = t;
  if (!best) return pricing;
  const { above_prompt_tokens: _a, ...tier } = best;
  return { ...pricing, ...Object.fromEntries(Object.entries(tier).filter(([, v]) => v !== undefined)) } as PriceSet;
}

/** The cost of one generation served at `pricing` with `usage`. */
export function costOf(pricing: Pricing, usage: Usage, images = 0): CostParts {
  const t = billedTokens(usage, images);
  const p = pricesFor(pricing, t.uncachedPrompt + t.cacheRead + t.cacheWrite);
  const promptPrice = femto(p.prompt);
  const completionPrice = femto(p.completion);
  const reasoningPrice = p.internal_reasoning !== undefined ? femto(p.internal_reasoning) : completionPrice;
  const parts = {
    prompt: BigInt(t.uncachedPrompt) * promptPrice,
    cacheRead: BigInt(t.cacheRead) * (p.input_cache_read !== undefined ? femto(p.input_cache_read) : promptPrice),
    cacheWrite: BigInt(t.cacheWrite) * (p.input_cache_write !== undefined ? femto(p.input_cache_write) : promptPrice),
    completion: BigInt(t.completion - t.reasoning) * completionPrice + BigInt(t.reasoning) * reasoningPrice,
    request: pricing.request !== undefined ? femto(pricing.request) : 0n,
    image: BigInt(t.images) * (pricing.image !== undefined ? femto(pricing.image) : 0n),
    webSearch: BigInt(t.searches) * (pricing.web_search !== undefined ? femto(pricing.web_search) : 0n),
  };
  return { ...parts, total: parts.prompt + parts.cacheRead + parts.cacheWrite + parts.completion + parts.request + parts.image + parts.webSearch };
}
