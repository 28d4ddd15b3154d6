/**
 * Pure preset rules: the slug rule, the declarative allow-list of request fields a preset keeps,
 * system prompt derivation, version-number and page parsing. No I/O.
 */
import { RuleViolation, fail, isPlainObject } from "../../contract/requests/kit.js";
import { createOrdering } from "../paging.js";

/**
 * Slug rule: "URL-safe" read as RFC 3986's unreserved characters (A-Z, a-z, 0-9, "-", ".", "_", "~"),
 * 1 to 100 of them, so a slug never needs escaping in a path. "." and ".." are refused: clients and
 * proxies collapse them as dot-segments. Slugs are case-sensitive, like URL paths: "Bot" and "bot"
 * are two presets.
 */
export const SLUG_PATTERN = /^[A-Za-z0-9._~-]{1,100}$/;
export const SLUG_MAX_LENGTH = 100;

export function checkSlug(slug: string): string {
  if (!SLUG_PATTERN.test(slug) || slug === "." || slug === "..") {
    throw new RuleViolation(
      "slug",
      `slug must be 1 to ${SLUG_MAX_LENGTH} URL-unreserved characters (A-Z, a-z, 0-9, '-', '.', '_', '~'), and not '.' or '..'`,
    );
  }
  return slug;
}

/**
 * The request fields a preset stores: those that configure inference (model choice, routing,
 * sampling, output shape, tools and plugins). Everything else — messages, stream, stream_options,
 * prompt, session_id, user, trace, metadata, debug, prediction, prompt_cache_key,
 * prompt_cache_options, route, unknown fields and server-owned names such as id or version — is
 * dropped. Source: API fact sheet §1.5.
 */
export const PRESET_CONFIG_FIELDS: ReadonlySet<string> = new Set([
  "model",
  "models",
  "provider",
  "temperature",
  "top_p",
  "top_k",
  "top_a",
  "min_p",
  "frequency_penalty",
  "presence_penalty",
  "repetition_penalty",
  "max_tokens",
  "max_completion_tokens",
  "seed",
  "stop",
  "reasoning",
  "reasoning_effort",
  "response_format",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "plugins",
  "logit_bias",
  "logprobs",
  "top_logprobs",
  "service_tier",
  "modalities",
  "image_config",
  "cache_control",
  "cache",
  "stop_server_tools_when",
]);

/** The allow-listed fields present in `body`, keys and values exactly as sent, in the order sent. */
export function pickPresetConfig(body: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  for (const key of Object.keys(body)) {
    const value = body[key];
    if (value !== undefined && PRESET_CONFIG_FIELDS.has(key)) config[key] = value;
  }
  return config;
}

/**
 * The preset's system prompt: the content of the first `system` message; when there is none, the
 * content of the first `developer` message (the newer name of the same instruction role); null when
 * there is neither. Array content joins the `text` of its text parts with "\n".
 */
export function deriveSystemPrompt(messages: unknown): string | null {
  if (!Array.isArray(messages)) return null;
  const first = (role: string) => messages.find((m) => isPlainObject(m) && m.role === role) as
    | Record<string, unknown>
    | undefined;
  const msg = first("system") ?? first("developer");
  if (!msg) return null;
  const content = msg.content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .filter((p): p is Record<string, unknown> => isPlainObject(p) && p.type === "text" && typeof p.text === "string")
      .map((p) => p.text as string)
      .join("\n");
  }
  return null;
}

const NUL = "\u0000";

/**
 * What a preset stores must be storable on every backend: PostgreSQL text and jsonb cannot hold the
 * NUL character (U+0000), so it is refused (400 naming the field) on SQLite too. Only stored values
 * are checked; ignored request fields may carry anything.
 */
export function checkStorable(config: Readonly<Record<string, unknown>>, systemPrompt: string | null): void {
  for (const key of Object.keys(config)) rejectNul(config[key], key);
  if (systemPrompt?.includes(NUL)) fail("messages", "system message content must not contain the NUL character (U+0000)");
}

function rejectNul(value: unknown, path: string): void {
  if (typeof value === "string") {
    if (value.includes(NUL)) fail(path, "must not contain the NUL character (U+0000)");
  } else if (Array.isArray(value)) {
    value.forEach((item, i) => rejectNul(item, `${path}[${i}]`));
  } else if (isPlainObject(value)) {
    for (const key of Object.keys(value)) {
      if (key.includes(NUL)) fail(path, "keys must not contain the NUL character (U+0000)");
      rejectNul(value[key], `${path}.${key}`);
    }
  }
}

const MAX_INT32 = 2_147_483_647;

/**
 * Parses a version path parameter. Non-integers (including negative numbers, signs and spaces) are
 * a RuleViolation (400); integers beyond the int32 range can name no version and return null (404).
 */
export function parseVersionNumber(raw: string): number | null {
  if (!/^\d{1,20}$/.test(raw)) throw new RuleViolation("version", "version must be a non-negative integer, for example \"1\"");
  const n = Number(raw);
  return n > MAX_INT32 ? null : n;
}

/** Most recently updated first (a preset's new version or settings change moves it to the front). */
export const PRESETS_ORDER = createOrdering("presets", [
  { field: "updatedAt", dir: "desc", kind: "date" },
  { field: "createdAt", dir: "desc", kind: "date" },
  { field: "id", dir: "asc", kind: "string" },
]);

/** Oldest version first. */
export const PRESET_VERSIONS_ORDER = createOrdering("preset-versions", [{ field: "version", dir: "asc", kind: "number" }]);
