/**
 * The model catalog's types (docs/catalog.md): a model is a canonical slug (`anthropic/claude-sonnet-4`,
 * `meta-llama/llama-3.3-70b-instruct`) served by one or more endpoints, each a provider slug (a provider of
 * src/core/chat/providers/index.ts), that provider's own model id and its prices and terms.
 *
 * Prices are per token, in USD, as decimal strings (the real-world service's `/models` wire form, so an entry
 * copied from it reads as written): `"0.000003"` is $3 per million tokens. Strings, because money is never
 * computed in floating point here (cost.ts works in integer femto-dollars).
 */

/** Per-token (or per-request / per-image) prices in USD, as decimal strings. */
export interface PriceSet {
  /** Uncached prompt (input) tokens. */
  prompt: string;
  /** Completion (output) tokens, reasoning tokens included unless `internal_reasoning` prices them apart. */
  completion: string;
  /** Prompt tokens read from the provider's prompt cache; absent: billed as `prompt`. */
  input_cache_read?: string;
  /** Prompt tokens written to the provider's prompt cache; absent: billed as `prompt`. */
  input_cache_write?: string;
  /** Reasoning tokens when the provider prices them apart from completion tokens; absent: as `completion`. */
  internal_reasoning?: string;
}

/** Prices that replace the base ones once a request's prompt exceeds `above_prompt_tokens` (long-context tiers). */
export interface PriceTier extends Partial<PriceSet> {
  above_prompt_tokens: number;
}

export interface Pricing extends PriceSet {
  /** Per request, whatever its tokens. */
  request?: string;
  /** Per input image. */
  image?: string;
  /**
   * Per web search the provider's native search ran (the real-world service's `pricing.web_search`): the canonical
   * usage's `server_tool_use.web_search_requests` (Anthropic's count of searches; one for a Gemini answer grounded
   * with Google Search, one for an OpenAI search-model call). Not changed by tiers.
   */
  web_search?: string;
  /** Long-context tiers, by threshold; the highest threshold below the prompt's tokens applies to the whole request. */
  tiers?: PriceTier[];
}

import { QUANTIZATIONS } from "../../contract/requests/catalog.js";

export type Quantization = (typeof QUANTIZATIONS)[number];
export { QUANTIZATIONS };

export type EndpointStatus = "active" | "deprecated" | "disabled";

/** What the provider may do with prompts and completions sent through its API (its published terms). */
export interface DataPolicy {
  /** The provider may train on the data. */
  training: boolean;
  /** The provider keeps prompts/completions (abuse monitoring, logs) for some time. */
  retains_prompts: boolean;
  /** How long, when the terms say. */
  retention_days?: number | null;
}

/** Where a figure comes from and as of when (ISO date). */
export interface Source {
  url: string;
  as_of: string;
}

export interface Endpoint {
  /** Provider slug: the provider that serves this endpoint. */
  provider: string;
  /** The model id the provider's own API takes. */
  model_id: string;
  /** Other ids the provider's API accepts for the same model (dated snapshots, `-latest` aliases). */
  aliases?: string[];
  pricing: Pricing;
  context_length: number;
  /** Most completion tokens per request; null when the provider states none beyond the context. */
  max_completion_tokens: number | null;
  quantization: Quantization;
  data_policy: DataPolicy;
  /** Zero data retention: the provider keeps nothing (true only where its terms say so for every API customer). */
  zdr: boolean;
  /** Whether the provider's terms allow training other models on its outputs (distillation). */
  distillable?: boolean;
  /** The parameters this endpoint honours; absent: the model's. */
  supported_parameters?: string[];
  status: EndpointStatus;
  /** Where the prices and terms come from. */
  source: Source;
}

export interface Architecture {
  input_modalities: string[];
  output_modalities: string[];
  /** The tokenizer family (`GPT`, `Claude`, `Llama3`, …), when known. */
  tokenizer?: string;
}

export interface CatalogModel {
  /** Canonical slug `<author>/<model>`. */
  slug: string;
  name: string;
  /** A short description, when the catalog has one. */
  description?: string;
  /** Largest context of its endpoints, as the model's makers state it. */
  context_length: number;
  architecture: Architecture;
  supported_parameters: string[];
  endpoints: Endpoint[];
  /**
   * General quality, 0 to 1, for the routing plugins (auto-router, docs/plugins.md). The built-in values are
   * Portico's own coarse rating by the maker's line-up position (ratings.ts), not a benchmark; operators
   * replace them in the catalog file or with an override. Absent: the model is not rated (routers skip it).
   */
  quality?: number;
  /** Coding quality, 0 to 1 (pareto-router's tiers: >= 0.66 high, >= 0.33 medium, else low); as `quality`. */
  coding_score?: number;
  /**
   * Per classified task (auto-beta-router: `coding`, `long_context`, `chat`), 0 to 1: the share of the task's
   * spend the operator wants this model to get. Absent for a task: derived (docs/plugins.md).
   */
  task_scores?: Partial<Record<RouterTask, number>>;
  /** Where `quality`, `coding_score` and `task_scores` come from (text: a rule or a leaderboard and its date). */
  ratings_source?: string;
}

/** The task classes of auto-beta-router (docs/plugins.md). */
export const ROUTER_TASKS = ["coding", "long_context", "chat"] as const;
export type RouterTask = (typeof ROUTER_TASKS)[number];

/** The catalog file format (built-in and operator file alike). */
export interface CatalogFile {
  version: 1;
  models: CatalogModel[];
}
