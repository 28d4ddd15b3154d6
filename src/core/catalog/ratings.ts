/**
 * The built-in routing ratings (docs/plugins.md, "The quality table"): `quality` and `coding_score` of the
 * built-in catalog's chat models, read by auto-router, auto-beta-router and pareto-router.
 *
 * THESE ARE PORTICO'S OWN COARSE RATINGS, NOT BENCHMARK RESULTS. No benchmark figures were available to this
 * project when the table was written, and a made-up figure with two decimals would claim a precision nobody
 * measured. So each model gets a tier by a stated rule, and each tier one round score:
 *
 * - `quality` tier, by the model's position in its maker's line-up as the maker presents it (as of 2025-10-01,
 *   the catalog's price date):
 *     A = the maker's current flagship (Opus, Sonnet 4.5, GPT-5, o3, Gemini 2.5 Pro, Grok 4)      → 0.9
 *     B = a large model below or before the flagship (GPT-4.1, GPT-4o, Sonnet 4, DeepSeek V3/R1) → 0.7
 *     C = the maker's mid-size / "mini" / "flash" / "medium" model                              → 0.5
 *     D = the maker's smallest / "nano" / "lite" / 8B-class model                                → 0.3
 * - `coding_score` tier (the pareto-router's tiers: >= 0.66 high, >= 0.33 medium, < 0.33 low):
 *     high (0.8)   = tier A models, and models the maker presents for coding or reasoning (Codestral, o4-mini,
 *                    GPT-4.1, Kimi K2, DeepSeek R1 / reasoner, Sonnet 4 and 3.7)
 *     medium (0.5) = the other tier B and C models
 *     low (0.2)    = tier D models
 *
 * Operators who have measured figures (their own evaluations, or a public leaderboard of a stated date) put
 * them in the catalog file (PORTICO_CATALOG_FILE) or an override: `quality`, `coding_score`, `task_scores`
 * and `ratings_source` per model (docs/catalog.md). Embedding models are not rated (routers skip them).
 */
import type { CatalogModel } from "./types.js";

export const RATINGS_SOURCE = "Portico's own tier rating by the maker's line-up position as of 2025-10-01 (src/core/catalog/ratings.ts); not a benchmark";

const QUALITY = { A: 0.9, B: 0.7, C: 0.5, D: 0.3 } as const;
const CODING = { high: 0.8, medium: 0.5, low: 0.2 } as const;
type Tier = keyof typeof QUALITY;
type Coding = keyof typeof CODING;

/** slug → [quality tier, coding tier]. */
const TIERS: Record<string, [Tier, Coding]> = {
  "openai/gpt-5": ["A", "high"],
  "openai/o3": ["A", "high"],
  "openai/gpt-4.1": ["B", "high"],
  "openai/gpt-4o": ["B", "medium"],
  "openai/o4-mini": ["C", "high"],
  "openai/gpt-5-mini": ["C", "medium"],
  "openai/gpt-4.1-mini": ["C", "medium"],
  "openai/gpt-4o-mini": ["C", "medium"],
  "openai/gpt-5-nano": ["D", "low"],
  "openai/gpt-4.1-nano": ["D", "low"],
  "openai/gpt-oss-120b": ["C", "medium"],
  "openai/gpt-oss-20b": ["D", "low"],
  "anthropic/claude-opus-4.1": ["A", "high"],
  "anthropic/claude-opus-4": ["A", "high"],
  "anthropic/claude-sonnet-4.5": ["A", "high"],
  "anthropic/claude-sonnet-4": ["B", "high"],
  "anthropic/claude-3.7-sonnet": ["B", "high"],
  "anthropic/claude-haiku-4.5": ["C", "medium"],
  "anthropic/claude-3.5-haiku": ["D", "low"],
  "google/gemini-2.5-pro": ["A", "high"],
  "google/gemini-2.5-flash": ["C", "medium"],
  "google/gemini-2.5-flash-lite": ["D", "low"],
  "google/gemini-2.0-flash": ["D", "low"],
  "meta-llama/llama-3.3-70b-instruct": ["C", "medium"],
  "meta-llama/llama-3.1-8b-instruct": ["D", "low"],
  "meta-llama/llama-4-maverick": ["C", "medium"],
  "meta-llama/llama-4-scout": ["D", "low"],
  "moonshotai/kimi-k2": ["B", "high"],
  "qwen/qwen3-32b": ["C", "medium"],
  "deepseek/deepseek-v3": ["B", "medium"],
  "deepseek/deepseek-r1": ["B", "high"],
  "deepseek/deepseek-chat": ["B", "medium"],
  "deepseek/deepseek-reasoner": ["B", "high"],
  "mistralai/mistral-large": ["B", "medium"],
  "mistralai/mistral-medium-3": ["C", "medium"],
  "mistralai/mistral-small-3.2": ["D", "low"],
  "mistralai/codestral": ["C", "high"],
  "x-ai/grok-4": ["A", "high"],
  "x-ai/grok-3": ["B", "medium"],
  "x-ai/grok-3-mini": ["C", "medium"],
};

/** `model` with its built-in ratings, when the table rates it. */
export function rated(model: CatalogModel): CatalogModel {
  const tiers = TIERS[model.slug];
  if (!tiers) return model;
  return { ...model, quality: QUALITY[tiers[0]], coding_score: CODING[tiers[1]], ratings_source: RATINGS_SOURCE };
}
