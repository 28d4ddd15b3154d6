/**
 * The provider registry: which adapter speaks for a provider slug and at which base URL. Slugs follow
 * the BYOK provider slugs; base URLs are overridable per provider (PORTICO_PROVIDER_<SLUG>_BASE_URL)
 * and operators add OpenAI-compatible providers by base URL (PORTICO_OPENAI_COMPATIBLE_PROVIDERS), some of
 * them served without a credential (PORTICO_KEYLESS_PROVIDERS). These are the providers BYOK credentials and
 * shared provider keys may name, and what GET /api/v1/providers lists.
 */
import type { ProviderEndpointConfig } from "../../../config.js";
import type { UpstreamLimits } from "./types.js";
import { AnthropicAdapter } from "./anthropic.js";
import { GeminiAdapter } from "./gemini.js";
import { OpenAICompatibleAdapter } from "./openai-compatible.js";
import type { ProviderAdapter } from "./types.js";

export { UpstreamError, isRetryableStatus, classifyFailure, FALLBACK_REASONS, type FailureReason } from "./types.js";
export type * from "./types.js";

export const openAICompatible = new OpenAICompatibleAdapter();
/** OpenAI's own API rejects the sampling extras other compatible servers accept. */
const openAIStrict = new OpenAICompatibleAdapter({ unsupported: ["top_k", "top_a", "min_p", "repetition_penalty"] });
export const anthropic = new AnthropicAdapter();
export const gemini = new GeminiAdapter();

interface Builtin {
  name: string;
  adapter: ProviderAdapter;
  baseUrl: string;
}

/** Built-in providers, their display names and public API base URLs (version path included). */
const builtins: Record<string, Builtin> = {
  openai: { name: "OpenAI", adapter: openAIStrict, baseUrl: "https://api.openai.com/v1" },
  groq: { name: "Groq", adapter: openAICompatible, baseUrl: "https://api.groq.com/openai/v1" },
  deepseek: { name: "DeepSeek", adapter: openAICompatible, baseUrl: "https://api.deepseek.com/v1" },
  mistral: { name: "Mistral", adapter: openAICompatible, baseUrl: "https://api.mistral.ai/v1" },
  together: { name: "Together AI", adapter: openAICompatible, baseUrl: "https://api.together.xyz/v1" },
  fireworks: { name: "Fireworks AI", adapter: openAICompatible, baseUrl: "https://api.fireworks.ai/inference/v1" },
  xai: { name: "xAI", adapter: openAICompatible, baseUrl: "https://api.x.ai/v1" },
  anthropic: { name: "Anthropic", adapter: anthropic, baseUrl: "https://api.anthropic.com" },
  "google-ai-studio": { name: "Google AI Studio", adapter: gemini, baseUrl: "https://generativelanguage.googleapis.com/v1beta" },
};

export interface ResolvedProvider {
  slug: string;
  /** Display name: the provider's own name for built-ins, the slug for operator-added providers. */
  name: string;
  adapter: ProviderAdapter;
  baseUrl: string;
  /** Added by the operator (PORTICO_OPENAI_COMPATIBLE_PROVIDERS) rather than built in. */
  operatorAdded: boolean;
  /** Served without a credential (PORTICO_KEYLESS_PROVIDERS): no key, no Authorization header. */
  keyless: boolean;
  /** The operator's time limits for this provider (PORTICO_PROVIDER_<SLUG>_*_TIMEOUT_MS); absent: the defaults. */
  limits?: UpstreamLimits;
}

/** The slug's form inside an environment variable name: `anthropic/2` → `ANTHROPIC_2`. */
export function slugEnvName(slug: string): string {
  return slug.toUpperCase().replace(/[^A-Z0-9]/g, "_");
}

export class ProviderRegistry {
  private readonly entries = new Map<string, ResolvedProvider>();

  constructor(config: ProviderEndpointConfig = { baseUrls: {}, extraOpenAICompatible: {}, keyless: [] }) {
    // A provider's own limits over the operator's defaults for every provider ("*").
    const limitsOf = (slug: string): UpstreamLimits | undefined => {
      const all = config.limits?.["*"];
      const own = config.limits?.[slugEnvName(slug)];
      return all || own ? { ...all, ...own } : undefined;
    };
    for (const [slug, builtin] of Object.entries(builtins)) {
      const baseUrl = config.baseUrls[slugEnvName(slug)] ?? builtin.baseUrl;
      const limits = limitsOf(slug);
      this.entries.set(slug, { slug, name: builtin.name, adapter: builtin.adapter, baseUrl, operatorAdded: false, keyless: false, ...(limits ? { limits } : {}) });
    }
    for (const [slug, baseUrl] of Object.entries(config.extraOpenAICompatible)) {
      this.entries.set(slug, {
        slug,
        name: builtins[slug]?.name ?? slug,
        adapter: openAICompatible,
        baseUrl: config.baseUrls[slugEnvName(slug)] ?? baseUrl,
        operatorAdded: true,
        keyless: config.keyless.includes(slug),
        ...(limitsOf(slug) ? { limits: limitsOf(slug)! } : {}),
      });
    }
  }

  /** The adapter and base URL for `slug`, or undefined when no adapter speaks for it. */
  get(slug: string): ResolvedProvider | undefined {
    return this.entries.get(slug);
  }

  /** Whether requests for `slug` are routed without a credential. */
  isKeyless(slug: string): boolean {
    return this.entries.get(slug)?.keyless === true;
  }

  /** Every routable provider slug, sorted. */
  slugs(): string[] {
    return [...this.entries.keys()].sort();
  }

  /** Every routable provider, sorted by slug. */
  list(): ResolvedProvider[] {
    return this.slugs().map((slug) => this.entries.get(slug)!);
  }
}
