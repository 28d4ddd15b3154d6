/**
 * The provider registry: which adapter speaks for a provider slug and at which base URL. Slugs follow
 * src/core/byok/providers.json; base URLs are overridable per provider (PORTICO_PROVIDER_<SLUG>_BASE_URL)
 * and operators add OpenAI-compatible providers by base URL (PORTICO_OPENAI_COMPATIBLE_PROVIDERS).
 */
import type { ProviderEndpointConfig } from "../../../config.js";
import { AnthropicAdapter } from "./anthropic.js";
import { GeminiAdapter } from "./gemini.js";
import { OpenAICompatibleAdapter } from "./openai-compatible.js";
import type { ProviderAdapter } from "./types.js";

export { UpstreamError, isRetryableStatus } from "./types.js";
export type * from "./types.js";

export const openAICompatible = new OpenAICompatibleAdapter();
/** OpenAI's own API rejects the sampling extras other compatible servers accept. */
const openAIStrict = new OpenAICompatibleAdapter({ unsupported: ["top_k", "top_a", "min_p", "repetition_penalty"] });
export const anthropic = new AnthropicAdapter();
export const gemini = new GeminiAdapter();

interface Builtin {
  adapter: ProviderAdapter;
  baseUrl: string;
}

/** Built-in providers and their public API base URLs (version path included). */
const builtins: Record<string, Builtin> = {
  openai: { adapter: openAIStrict, baseUrl: "https://api.openai.com/v1" },
  groq: { adapter: openAICompatible, baseUrl: "https://api.groq.com/openai/v1" },
  deepseek: { adapter: openAICompatible, baseUrl: "https://api.deepseek.com/v1" },
  mistral: { adapter: openAICompatible, baseUrl: "https://api.mistral.ai/v1" },
  together: { adapter: openAICompatible, baseUrl: "https://api.together.xyz/v1" },
  fireworks: { adapter: openAICompatible, baseUrl: "https://api.fireworks.ai/inference/v1" },
  xai: { adapter: openAICompatible, baseUrl: "https://api.x.ai/v1" },
  anthropic: { adapter: anthropic, baseUrl: "https://api.anthropic.com" },
  "google-ai-studio": { adapter: gemini, baseUrl: "https://generativelanguage.googleapis.com/v1beta" },
};

export interface ResolvedProvider {
  slug: string;
  adapter: ProviderAdapter;
  baseUrl: string;
}

/** The slug's form inside an environment variable name: `anthropic/2` → `ANTHROPIC_2`. */
export function slugEnvName(slug: string): string {
  return slug.toUpperCase().replace(/[^A-Z0-9]/g, "_");
}

export class ProviderRegistry {
  private readonly entries = new Map<string, ResolvedProvider>();

  constructor(config: ProviderEndpointConfig = { baseUrls: {}, extraOpenAICompatible: {} }) {
    for (const [slug, builtin] of Object.entries(builtins)) {
      this.entries.set(slug, { slug, adapter: builtin.adapter, baseUrl: config.baseUrls[slugEnvName(slug)] ?? builtin.baseUrl });
    }
    for (const [slug, baseUrl] of Object.entries(config.extraOpenAICompatible)) {
      this.entries.set(slug, { slug, adapter: openAICompatible, baseUrl: config.baseUrls[slugEnvName(slug)] ?? baseUrl });
    }
  }

  /** The adapter and base URL for `slug`, or undefined when no adapter speaks for it. */
  get(slug: string): ResolvedProvider | undefined {
    return this.entries.get(slug);
  }

  /** Every routable provider slug, sorted. */
  slugs(): string[] {
    return [...this.entries.keys()].sort();
  }
}
