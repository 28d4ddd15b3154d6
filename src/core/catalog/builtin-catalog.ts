/**
 * The built-in model catalog (docs/catalog.md): the popular models of every provider that has an adapter
 * (src/core/chat/providers/index.ts), with list prices in USD.
 *
 * WHERE THE FIGURES COME FROM. Every endpoint names its `source`: the provider's public price page and the
 * date the figures were read from it (`as_of`). They were written from those pages as published up to
 * 2025-10-01 (the author's last reading; this file was not re-checked against the live pages, which move).
 * Data policy flags are from each provider's API terms as of the same date and are deliberately conservative:
 * `retains_prompts: true` and `zdr: false` unless the terms say otherwise for every API customer, so a request
 * with `data_collection: "deny"` or `zdr: true` is never sent somewhere it should not go on a guess.
 * Operators correct or extend any of it without a release with the operator catalog file
 * (PORTICO_CATALOG_FILE, merged over this one). `scripts/import-genai-prices.ts` reprices these endpoints from
 * the `@pydantic/genai-prices` data set and writes a refreshed file for review; it is never read at request time.
 *
 * Prices are written here per million tokens (as the price pages state them) and stored per token as exact
 * decimal strings by `perM`, without floating point.
 */
import { rated } from "./ratings.js";
import type { CatalogFile, CatalogModel, DataPolicy, Endpoint, Pricing, PriceTier, Quantization } from "./types.js";

/** `"2.5"` USD per million tokens → `"0.0000025"` USD per token, exactly (a decimal shift, no float). */
export function perM(usdPerMillion: string): string {
  const m = /^(\d+)(?:\.(\d+))?$/.exec(usdPerMillion);
  if (!m) throw new Error(`not a price: ${usdPerMillion}`);
  const digits = (m[1]! + (m[2] ?? "")).replace(/^0+(?=\d)/, "");
  const scale = (m[2]?.length ?? 0) + 6;
  const padded = digits.padStart(scale + 1, "0");
  const int = padded.slice(0, padded.length - scale).replace(/^0+(?=\d)/, "");
  const frac = padded.slice(padded.length - scale).replace(/0+$/, "");
  return frac ? `${int}.${frac}` : int;
}

const AS_OF = "2025-10-01";
const src = (url: string) => ({ url, as_of: AS_OF });
const SOURCES = {
  openai: src("https://platform.openai.com/docs/pricing"),
  anthropic: src("https://docs.anthropic.com/en/docs/about-claude/pricing"),
  google: src("https://ai.google.dev/gemini-api/docs/pricing"),
  groq: src("https://groq.com/pricing"),
  together: src("https://www.together.ai/pricing"),
  fireworks: src("https://fireworks.ai/pricing"),
  deepseek: src("https://api-docs.deepseek.com/quick_start/pricing"),
  mistral: src("https://mistral.ai/pricing#api-pricing"),
  xai: src("https://docs.x.ai/docs/models"),
} as const;
type Provider = keyof typeof SOURCES;
const PROVIDER_SLUG: Record<Provider, string> = {
  openai: "openai",
  anthropic: "anthropic",
  google: "google-ai-studio",
  groq: "groq",
  together: "together",
  fireworks: "fireworks",
  deepseek: "deepseek",
  mistral: "mistral",
  xai: "xai",
};

/**
 * Data policies from each provider's API terms (as of AS_OF). None trains on paid API traffic by default except
 * where noted; all keep prompts for abuse monitoring for some time, so none is zero-data-retention by default.
 */
const POLICY: Record<Provider, DataPolicy> = {
  openai: { training: false, retains_prompts: true, retention_days: 30 },
  anthropic: { training: false, retains_prompts: true, retention_days: 30 },
  google: { training: false, retains_prompts: true, retention_days: 55 }, // paid tier; the free tier may train
  groq: { training: false, retains_prompts: true, retention_days: null },
  together: { training: false, retains_prompts: true, retention_days: null },
  fireworks: { training: false, retains_prompts: true, retention_days: null },
  deepseek: { training: true, retains_prompts: true, retention_days: null }, // its privacy policy allows improving services with inputs
  mistral: { training: false, retains_prompts: true, retention_days: 30 },
  xai: { training: false, retains_prompts: true, retention_days: 30 },
};

const CHAT = ["max_tokens", "temperature", "top_p", "stop", "frequency_penalty", "presence_penalty", "seed", "logit_bias", "logprobs", "top_logprobs", "response_format", "structured_outputs", "tools", "tool_choice"];
const OPENAI_REASONING = ["max_tokens", "reasoning", "include_reasoning", "seed", "response_format", "structured_outputs", "tools", "tool_choice"];
const ANTHROPIC = ["max_tokens", "temperature", "top_p", "top_k", "stop", "tools", "tool_choice"];
const ANTHROPIC_THINKING = [...ANTHROPIC, "reasoning", "include_reasoning"];
const GEMINI = ["max_tokens", "temperature", "top_p", "stop", "seed", "frequency_penalty", "presence_penalty", "response_format", "structured_outputs", "tools", "tool_choice", "reasoning", "include_reasoning"];
const OPEN = ["max_tokens", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "stop", "frequency_penalty", "presence_penalty", "seed", "response_format", "tools", "tool_choice"];
const OPEN_REASONING = [...OPEN, "reasoning", "include_reasoning"];

const TEXT = { input_modalities: ["text"], output_modalities: ["text"] };
const VISION = { input_modalities: ["text", "image"], output_modalities: ["text"] };
const VISION_FILE = { input_modalities: ["text", "image", "file"], output_modalities: ["text"] };
/** Embedding models (`POST /api/v1/embeddings`): text in, vectors out; priced per input token, nothing per output. */
const EMBEDDINGS = { input_modalities: ["text"], output_modalities: ["embeddings"] };

interface Price {
  in: string;
  out: string;
  read?: string;
  write?: string;
  tiers?: Array<{ above: number; in?: string; out?: string; read?: string }>;
  /** USD per search of the provider's native web search (the catalog's `web_search`, per search, not per million). */
  search?: string;
}

function pricing(p: Price): Pricing {
  const out: Pricing = { prompt: perM(p.in), completion: perM(p.out) };
  if (p.read !== undefined) out.input_cache_read = perM(p.read);
  if (p.write !== undefined) out.input_cache_write = perM(p.write);
  if (p.search !== undefined) out.web_search = p.search;
  if (p.tiers) {
    out.tiers = p.tiers.map((t) => {
      const tier: PriceTier = { above_prompt_tokens: t.above };
      if (t.in !== undefined) tier.prompt = perM(t.in);
      if (t.out !== undefined) tier.completion = perM(t.out);
      if (t.read !== undefined) tier.input_cache_read = perM(t.read);
      return tier;
    });
  }
  return out;
}

function ep(
  provider: Provider,
  model_id: string,
  price: Price,
  context_length: number,
  max_completion_tokens: number | null,
  more: { aliases?: string[]; quantization?: Quantization } = {},
): Endpoint {
  return {
    provider: PROVIDER_SLUG[provider],
    model_id,
    ...(more.aliases ? { aliases: more.aliases } : {}),
    pricing: pricing(price),
    context_length,
    max_completion_tokens,
    quantization: more.quantization ?? "unknown",
    data_policy: POLICY[provider],
    zdr: false,
    status: "active",
    source: SOURCES[provider],
  };
}

function model(slug: string, name: string, architecture: CatalogModel["architecture"], supported_parameters: string[], endpoints: Endpoint[]): CatalogModel {
  // The routing ratings (quality, coding_score) of ratings.ts: Portico's own tiers, not benchmark figures.
  return rated({ slug, name, context_length: Math.max(...endpoints.map((e) => e.context_length)), architecture, supported_parameters, endpoints });
}

// Anthropic bills 5-minute cache writes at 1.25× and cache reads at 0.1× the input price, and each search of its web
// search tool at $10 per 1,000 searches (docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool,
// "Usage and pricing": `usage.server_tool_use.web_search_requests`).
const ANTHROPIC_WEB_SEARCH = "0.01";
const claude = (input: string, output: string, read: string, write: string): Price => ({ in: input, out: output, read, write, search: ANTHROPIC_WEB_SEARCH });
// Gemini's Grounding with Google Search: $35 per 1,000 grounded prompts on the paid tier for Gemini 2.5 and 2.0
// (ai.google.dev/gemini-api/docs/pricing; the daily free grounded prompts are an account allowance the catalog
// cannot see, so every grounded prompt is priced).
const GEMINI_GROUNDING = "0.035";

export const BUILTIN_CATALOG: CatalogFile = {
  version: 1,
  models: [
    // ---- OpenAI (cached input at the listed "cached input" price; no cache-write charge) ----
    model("openai/gpt-4o", "OpenAI: GPT-4o", VISION_FILE, CHAT, [ep("openai", "gpt-4o", { in: "2.50", out: "10.00", read: "1.25" }, 128_000, 16_384, { aliases: ["gpt-4o-2024-08-06", "gpt-4o-2024-11-20"] })]),
    model("openai/gpt-4o-mini", "OpenAI: GPT-4o mini", VISION_FILE, CHAT, [ep("openai", "gpt-4o-mini", { in: "0.15", out: "0.60", read: "0.075" }, 128_000, 16_384, { aliases: ["gpt-4o-mini-2024-07-18"] })]),
    model("openai/gpt-4.1", "OpenAI: GPT-4.1", VISION_FILE, CHAT, [ep("openai", "gpt-4.1", { in: "2.00", out: "8.00", read: "0.50" }, 1_047_576, 32_768, { aliases: ["gpt-4.1-2025-04-14"] })]),
    model("openai/gpt-4.1-mini", "OpenAI: GPT-4.1 mini", VISION_FILE, CHAT, [ep("openai", "gpt-4.1-mini", { in: "0.40", out: "1.60", read: "0.10" }, 1_047_576, 32_768, { aliases: ["gpt-4.1-mini-2025-04-14"] })]),
    model("openai/gpt-4.1-nano", "OpenAI: GPT-4.1 nano", VISION_FILE, CHAT, [ep("openai", "gpt-4.1-nano", { in: "0.10", out: "0.40", read: "0.025" }, 1_047_576, 32_768, { aliases: ["gpt-4.1-nano-2025-04-14"] })]),
    model("openai/o3", "OpenAI: o3", VISION_FILE, OPENAI_REASONING, [ep("openai", "o3", { in: "2.00", out: "8.00", read: "0.50" }, 200_000, 100_000, { aliases: ["o3-2025-04-16"] })]),
    model("openai/o4-mini", "OpenAI: o4-mini", VISION_FILE, OPENAI_REASONING, [ep("openai", "o4-mini", { in: "1.10", out: "4.40", read: "0.275" }, 200_000, 100_000, { aliases: ["o4-mini-2025-04-16"] })]),
    model("openai/gpt-5", "OpenAI: GPT-5", VISION_FILE, OPENAI_REASONING, [ep("openai", "gpt-5", { in: "1.25", out: "10.00", read: "0.125" }, 400_000, 128_000, { aliases: ["gpt-5-2025-08-07"] })]),
    model("openai/gpt-5-mini", "OpenAI: GPT-5 mini", VISION_FILE, OPENAI_REASONING, [ep("openai", "gpt-5-mini", { in: "0.25", out: "2.00", read: "0.025" }, 400_000, 128_000, { aliases: ["gpt-5-mini-2025-08-07"] })]),
    model("openai/gpt-5-nano", "OpenAI: GPT-5 nano", VISION_FILE, OPENAI_REASONING, [ep("openai", "gpt-5-nano", { in: "0.05", out: "0.40", read: "0.005" }, 400_000, 128_000, { aliases: ["gpt-5-nano-2025-08-07"] })]),
    model("openai/gpt-oss-120b", "OpenAI: gpt-oss-120b", TEXT, OPEN_REASONING, [
      ep("groq", "openai/gpt-oss-120b", { in: "0.15", out: "0.75" }, 131_072, 65_536),
      ep("together", "openai/gpt-oss-120b", { in: "0.15", out: "0.60" }, 131_072, null),
      ep("fireworks", "accounts/fireworks/models/gpt-oss-120b", { in: "0.15", out: "0.60" }, 131_072, null),
    ]),
    model("openai/gpt-oss-20b", "OpenAI: gpt-oss-20b", TEXT, OPEN_REASONING, [
      ep("groq", "openai/gpt-oss-20b", { in: "0.10", out: "0.50" }, 131_072, 65_536),
      ep("together", "openai/gpt-oss-20b", { in: "0.05", out: "0.20" }, 131_072, null),
      ep("fireworks", "accounts/fireworks/models/gpt-oss-20b", { in: "0.07", out: "0.30" }, 131_072, null),
    ]),

    // ---- Anthropic (cache write = 5-minute ephemeral cache price) ----
    model("anthropic/claude-opus-4.1", "Anthropic: Claude Opus 4.1", VISION_FILE, ANTHROPIC_THINKING, [ep("anthropic", "claude-opus-4-1-20250805", claude("15", "75", "1.50", "18.75"), 200_000, 32_000, { aliases: ["claude-opus-4-1"] })]),
    model("anthropic/claude-opus-4", "Anthropic: Claude Opus 4", VISION_FILE, ANTHROPIC_THINKING, [ep("anthropic", "claude-opus-4-20250514", claude("15", "75", "1.50", "18.75"), 200_000, 32_000, { aliases: ["claude-opus-4-0"] })]),
    model("anthropic/claude-sonnet-4.5", "Anthropic: Claude Sonnet 4.5", VISION_FILE, ANTHROPIC_THINKING, [ep("anthropic", "claude-sonnet-4-5-20250929", claude("3", "15", "0.30", "3.75"), 200_000, 64_000, { aliases: ["claude-sonnet-4-5"] })]),
    model("anthropic/claude-sonnet-4", "Anthropic: Claude Sonnet 4", VISION_FILE, ANTHROPIC_THINKING, [ep("anthropic", "claude-sonnet-4-20250514", claude("3", "15", "0.30", "3.75"), 200_000, 64_000, { aliases: ["claude-sonnet-4-0"] })]),
    model("anthropic/claude-3.7-sonnet", "Anthropic: Claude 3.7 Sonnet", VISION_FILE, ANTHROPIC_THINKING, [ep("anthropic", "claude-3-7-sonnet-20250219", claude("3", "15", "0.30", "3.75"), 200_000, 64_000, { aliases: ["claude-3-7-sonnet-latest"] })]),
    model("anthropic/claude-haiku-4.5", "Anthropic: Claude Haiku 4.5", VISION_FILE, ANTHROPIC_THINKING, [ep("anthropic", "claude-haiku-4-5-20251001", claude("1", "5", "0.10", "1.25"), 200_000, 64_000, { aliases: ["claude-haiku-4-5"] })]),
    model("anthropic/claude-3.5-haiku", "Anthropic: Claude 3.5 Haiku", VISION, ANTHROPIC, [ep("anthropic", "claude-3-5-haiku-20241022", claude("0.80", "4", "0.08", "1"), 200_000, 8_192, { aliases: ["claude-3-5-haiku-latest"] })]),

    // ---- Google AI Studio (paid tier; prompts above 200k tokens are billed at the long-context prices) ----
    model("google/gemini-2.5-pro", "Google: Gemini 2.5 Pro", VISION_FILE, GEMINI, [
      ep("google", "gemini-2.5-pro", { in: "1.25", out: "10", read: "0.31", search: GEMINI_GROUNDING, tiers: [{ above: 200_000, in: "2.50", out: "15", read: "0.625" }] }, 1_048_576, 65_536),
    ]),
    model("google/gemini-2.5-flash", "Google: Gemini 2.5 Flash", VISION_FILE, GEMINI, [ep("google", "gemini-2.5-flash", { in: "0.30", out: "2.50", read: "0.075", search: GEMINI_GROUNDING }, 1_048_576, 65_536)]),
    model("google/gemini-2.5-flash-lite", "Google: Gemini 2.5 Flash-Lite", VISION_FILE, GEMINI, [ep("google", "gemini-2.5-flash-lite", { in: "0.10", out: "0.40", read: "0.025", search: GEMINI_GROUNDING }, 1_048_576, 65_536)]),
    model("google/gemini-2.0-flash", "Google: Gemini 2.0 Flash", VISION_FILE, GEMINI.filter((p) => p !== "reasoning" && p !== "include_reasoning"), [
      ep("google", "gemini-2.0-flash", { in: "0.10", out: "0.40", read: "0.025", search: GEMINI_GROUNDING }, 1_048_576, 8_192, { aliases: ["gemini-2.0-flash-001"] }),
    ]),

    // ---- Open-weight models, several providers each ----
    model("meta-llama/llama-3.3-70b-instruct", "Meta: Llama 3.3 70B Instruct", TEXT, OPEN, [
      ep("groq", "llama-3.3-70b-versatile", { in: "0.59", out: "0.79" }, 131_072, 32_768),
      ep("together", "meta-llama/Llama-3.3-70B-Instruct-Turbo", { in: "0.88", out: "0.88" }, 131_072, null, { quantization: "fp8" }),
      ep("fireworks", "accounts/fireworks/models/llama-v3p3-70b-instruct", { in: "0.90", out: "0.90" }, 131_072, null),
    ]),
    model("meta-llama/llama-3.1-8b-instruct", "Meta: Llama 3.1 8B Instruct", TEXT, OPEN, [
      ep("groq", "llama-3.1-8b-instant", { in: "0.05", out: "0.08" }, 131_072, 131_072),
      ep("together", "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo", { in: "0.18", out: "0.18" }, 131_072, null, { quantization: "fp8" }),
      ep("fireworks", "accounts/fireworks/models/llama-v3p1-8b-instruct", { in: "0.20", out: "0.20" }, 131_072, null),
    ]),
    model("meta-llama/llama-4-maverick", "Meta: Llama 4 Maverick", VISION, OPEN, [
      ep("groq", "meta-llama/llama-4-maverick-17b-128e-instruct", { in: "0.20", out: "0.60" }, 131_072, 8_192),
      ep("together", "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8", { in: "0.27", out: "0.85" }, 1_048_576, null, { quantization: "fp8" }),
      ep("fireworks", "accounts/fireworks/models/llama4-maverick-instruct-basic", { in: "0.22", out: "0.88" }, 1_048_576, null),
    ]),
    model("meta-llama/llama-4-scout", "Meta: Llama 4 Scout", VISION, OPEN, [
      ep("groq", "meta-llama/llama-4-scout-17b-16e-instruct", { in: "0.11", out: "0.34" }, 131_072, 8_192),
      ep("together", "meta-llama/Llama-4-Scout-17B-16E-Instruct", { in: "0.18", out: "0.59" }, 1_048_576, null),
    ]),
    model("moonshotai/kimi-k2", "MoonshotAI: Kimi K2", TEXT, OPEN, [
      ep("groq", "moonshotai/kimi-k2-instruct", { in: "1.00", out: "3.00" }, 131_072, 16_384),
      ep("together", "moonshotai/Kimi-K2-Instruct", { in: "1.00", out: "3.00" }, 131_072, null),
      ep("fireworks", "accounts/fireworks/models/kimi-k2-instruct", { in: "0.60", out: "2.50" }, 131_072, null),
    ]),
    model("qwen/qwen3-32b", "Qwen: Qwen3 32B", TEXT, OPEN_REASONING, [ep("groq", "qwen/qwen3-32b", { in: "0.29", out: "0.59" }, 131_072, 40_960)]),
    model("deepseek/deepseek-v3", "DeepSeek: DeepSeek V3 (open weights)", TEXT, OPEN, [
      ep("together", "deepseek-ai/DeepSeek-V3", { in: "1.25", out: "1.25" }, 131_072, null),
      ep("fireworks", "accounts/fireworks/models/deepseek-v3", { in: "0.90", out: "0.90" }, 131_072, null),
    ]),
    model("deepseek/deepseek-r1", "DeepSeek: R1 (open weights)", TEXT, OPEN_REASONING, [
      ep("together", "deepseek-ai/DeepSeek-R1", { in: "3.00", out: "7.00" }, 163_840, null),
      ep("fireworks", "accounts/fireworks/models/deepseek-r1", { in: "3.00", out: "8.00" }, 163_840, null),
    ]),

    // ---- DeepSeek's own API: its `deepseek-chat` / `deepseek-reasoner` aliases (V3.2-Exp since 2025-09-29);
    //      cache hits at the cache-hit price, cache misses (writes included) at the input price ----
    model("deepseek/deepseek-chat", "DeepSeek: deepseek-chat (DeepSeek API)", TEXT, ["max_tokens", "temperature", "top_p", "stop", "frequency_penalty", "presence_penalty", "response_format", "tools", "tool_choice", "logprobs", "top_logprobs"], [
      ep("deepseek", "deepseek-chat", { in: "0.28", out: "0.42", read: "0.028" }, 131_072, 8_192),
    ]),
    model("deepseek/deepseek-reasoner", "DeepSeek: deepseek-reasoner (DeepSeek API)", TEXT, ["max_tokens", "response_format", "tools", "tool_choice", "reasoning", "include_reasoning"], [
      ep("deepseek", "deepseek-reasoner", { in: "0.28", out: "0.42", read: "0.028" }, 131_072, 65_536),
    ]),

    // ---- Mistral (La Plateforme) ----
    model("mistralai/mistral-large", "Mistral: Mistral Large", TEXT, CHAT.filter((p) => !p.startsWith("log")), [ep("mistral", "mistral-large-latest", { in: "2", out: "6" }, 131_072, null, { aliases: ["mistral-large-2411"] })]),
    model("mistralai/mistral-medium-3", "Mistral: Mistral Medium 3", VISION, CHAT.filter((p) => !p.startsWith("log")), [ep("mistral", "mistral-medium-latest", { in: "0.40", out: "2" }, 131_072, null, { aliases: ["mistral-medium-2505"] })]),
    model("mistralai/mistral-small-3.2", "Mistral: Mistral Small 3.2", VISION, CHAT.filter((p) => !p.startsWith("log")), [ep("mistral", "mistral-small-latest", { in: "0.10", out: "0.30" }, 131_072, null, { aliases: ["mistral-small-2506"] })]),
    model("mistralai/codestral", "Mistral: Codestral", TEXT, CHAT.filter((p) => !p.startsWith("log")), [ep("mistral", "codestral-latest", { in: "0.30", out: "0.90" }, 256_000, null, { aliases: ["codestral-2508"] })]),

    // ---- xAI (cached input at the listed cached price; grok-4 bills prompts above 128k at the higher rate) ----
    model("x-ai/grok-4", "xAI: Grok 4", VISION, OPENAI_REASONING.filter((p) => p !== "reasoning"), [
      ep("xai", "grok-4-0709", { in: "3", out: "15", read: "0.75", tiers: [{ above: 128_000, in: "6", out: "30", read: "1.50" }] }, 256_000, null, { aliases: ["grok-4", "grok-4-latest"] }),
    ]),
    model("x-ai/grok-3", "xAI: Grok 3", TEXT, CHAT, [ep("xai", "grok-3", { in: "3", out: "15", read: "0.75" }, 131_072, null, { aliases: ["grok-3-latest"] })]),
    model("x-ai/grok-3-mini", "xAI: Grok 3 Mini", TEXT, [...CHAT, "reasoning", "include_reasoning"], [ep("xai", "grok-3-mini", { in: "0.30", out: "0.50", read: "0.075" }, 131_072, null, { aliases: ["grok-3-mini-latest"] })]),

    // ---- Embedding models (docs/dialects.md, "Embeddings"): list prices per million input tokens, no output price ----
    // OpenAI: https://platform.openai.com/docs/pricing ("Embeddings": text-embedding-3-small $0.02, -3-large $0.13,
    // ada-002 $0.10); inputs up to 8,191 tokens; `dimensions` on the text-embedding-3 models only.
    model("openai/text-embedding-3-small", "OpenAI: Text Embedding 3 Small", EMBEDDINGS, ["dimensions"], [ep("openai", "text-embedding-3-small", { in: "0.02", out: "0" }, 8_191, null)]),
    model("openai/text-embedding-3-large", "OpenAI: Text Embedding 3 Large", EMBEDDINGS, ["dimensions"], [ep("openai", "text-embedding-3-large", { in: "0.13", out: "0" }, 8_191, null)]),
    model("openai/text-embedding-ada-002", "OpenAI: Text Embedding Ada 002", EMBEDDINGS, [], [ep("openai", "text-embedding-ada-002", { in: "0.10", out: "0" }, 8_191, null)]),
    // Google: https://ai.google.dev/gemini-api/docs/pricing ("Gemini Embedding", paid tier: $0.15 per million input
    // tokens); inputs up to 2,048 tokens; `outputDimensionality` (our `dimensions`) 128 to 3,072.
    model("google/gemini-embedding-001", "Google: Gemini Embedding 001", EMBEDDINGS, ["dimensions"], [ep("google", "gemini-embedding-001", { in: "0.15", out: "0" }, 2_048, null)]),
    // Mistral: https://mistral.ai/pricing#api-pricing ("Mistral Embed": $0.10 per million tokens); 8k context.
    model("mistralai/mistral-embed", "Mistral: Mistral Embed", EMBEDDINGS, [], [ep("mistral", "mistral-embed", { in: "0.10", out: "0" }, 8_192, null)]),
  ],
};
