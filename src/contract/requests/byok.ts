/**
 * BYOK credential request bodies (POST /api/v1/byok, PATCH /api/v1/byok/{id}), defined once: the
 * gateway validates bodies with them, the core checks the same fields (for gRPC callers too) with the
 * same field definitions, and the OpenAPI body schemas are derived from them. Every failure names the
 * field; no message repeats a submitted value (a key pasted into the wrong field must not come back).
 * Rules that need the database (workspace, hash ownership) or the merged state of an update
 * (is_fallback with is_byok_only / is_required) live in the core.
 */
import { array, boolean, integer, nullable, object, string } from "./kit.js";

/** Longest accepted provider key, in UTF-8 bytes. */
export const MAX_KEY_BYTES = 32 * 1024;
export const MAX_NAME_CHARS = 255;
export const MAX_LIST_ITEMS = 100;
/** Longest accepted entry of allowed_models / allowed_user_ids. */
export const MAX_LIST_ENTRY_CHARS = 256;
export const KEY_HASH = /^[a-f0-9]{64}$/;

/** PostgreSQL text and jsonb cannot hold U+0000, so stored strings never contain it (on every backend). */
const NUL = "\u0000";

/**
 * A provider key travels in an HTTP header (`Authorization`, `x-api-key`, `x-goog-api-key`), which cannot
 * carry characters outside ASCII or line breaks: such a key would be stored and then fail every request.
 * Real provider keys are visible ASCII without spaces, so that is the rule.
 */
export const HEADER_SAFE_KEY = /^[\x21-\x7e]+$/;
const KEY_CHARACTERS =
  "must contain only visible ASCII characters, without spaces or line breaks (a provider key is sent in an HTTP header); " +
  "check for a character pasted from a document, such as an ellipsis (U+2026) or a typographic quote";

/** A rule on a string-typed field whose message never shows the value. */
function rule(check: (v: string) => boolean, problem: string) {
  return string().refine(check, { error: () => problem, abort: true });
}

const key = string()
  .refine((k) => k.length > 0, { error: () => "is required and must be a non-empty string", abort: true })
  .refine((k) => k.trim().length > 0, { error: () => "must not be blank", abort: true })
  .refine((k) => !/\p{Cs}/u.test(k), { error: () => "must be a well-formed Unicode string", abort: true })
  .refine((k) => Buffer.byteLength(k, "utf8") <= MAX_KEY_BYTES, { error: () => `must be at most ${MAX_KEY_BYTES} bytes`, abort: true })
  .refine((k) => HEADER_SAFE_KEY.test(k), { error: () => KEY_CHARACTERS, abort: true });

/**
 * The shape of a provider slug. Which slugs a deployment serves depends on its configuration (built-in
 * adapters plus PORTICO_OPENAI_COMPATIBLE_PROVIDERS), so the core checks membership (GET /api/v1/providers).
 */
export const PROVIDER_SLUG = /^[a-z0-9][a-z0-9._/-]{0,63}$/;

const provider = string()
  .refine((p) => p !== "", { error: () => "is required", abort: true })
  .refine((p) => PROVIDER_SLUG.test(p), { error: () => 'must be a lowercase provider slug (e.g. "openai"; GET /api/v1/providers lists them)', abort: true });

const name = nullable(
  string()
    .refine((n) => Array.from(n).length <= MAX_NAME_CHARS, { error: () => `must be at most ${MAX_NAME_CHARS} characters`, abort: true })
    .refine((n) => !n.includes(NUL), { error: () => "must not contain the NUL character (U+0000)", abort: true }),
);

/** A list whose entries' problems are reported on the list (`allowed_models`) naming the entry (`[3]`). */
function list(opts: { min?: number; minText?: string; maxText: string; entry: (v: string) => string | undefined }) {
  return nullable(
    array(string()).superRefine((values, ctx) => {
      if (opts.min !== undefined && values.length < opts.min) return void ctx.addIssue({ code: "custom", input: values, message: opts.minText! });
      if (values.length > MAX_LIST_ITEMS) return void ctx.addIssue({ code: "custom", input: values, message: opts.maxText });
      for (let i = 0; i < values.length; i++) {
        const problem = opts.entry(values[i]!);
        if (problem) return void ctx.addIssue({ code: "custom", input: values, message: `[${i}] ${problem}` });
      }
    }),
  );
}

const allowedApiKeyHashes = list({
  min: 1,
  minText: "must contain at least one hash, or be null for no restriction",
  maxText: `must contain at most ${MAX_LIST_ITEMS} hashes`,
  entry: (h) => (KEY_HASH.test(h) ? undefined : "must be 64 lowercase hexadecimal characters"),
});

const stringList = () =>
  list({
    maxText: `must contain at most ${MAX_LIST_ITEMS} entries`,
    entry: (v) =>
      v.length === 0 || v.length > MAX_LIST_ENTRY_CHARS
        ? `must be a string of 1 to ${MAX_LIST_ENTRY_CHARS} characters`
        : v.includes(NUL)
          ? "must not contain the NUL character (U+0000)"
          : undefined,
  });

/** Each body field, with its rules. The core checks proto fields with these same definitions. */
export const ByokFields = {
  key: key.meta({ description: "Raw provider key, 1 character to 32 KiB. Write-only: encrypted at rest and never returned." }),
  provider: provider.meta({ description: "Lowercase provider slug, one of those GET /api/v1/providers lists (the providers this deployment can serve)." }),
  workspace_id: rule((w) => !w.includes(NUL), "must not contain the NUL character (U+0000)").meta({
    description: "Workspace (UUID); omitted = the default workspace.",
  }),
  name: name.meta({ description: "Display name, at most 255 characters." }),
  allowed_api_key_hashes: allowedApiKeyHashes.meta({
    description: "1 to 100 hashes (64 lowercase hex) of this account's API keys allowed to use the credential; null = no restriction.",
  }),
  allowed_models: stringList().meta({ description: "At most 100 model slugs the credential applies to; null = no restriction." }),
  allowed_user_ids: stringList().meta({ description: "At most 100 user identifiers allowed to use the credential; null = no restriction." }),
  disabled: boolean().meta({ description: "Default false." }),
  is_required: boolean().meta({
    description: "Remove shared endpoints on this provider for every model; only on non-fallback credentials. Default false.",
  }),
  is_fallback: boolean().meta({
    description: "Used only after non-fallback keys of the provider; cannot be combined with is_byok_only. Default false.",
  }),
  is_byok_only: boolean().meta({ description: "The models the credential applies to run only on your keys. Default false." }),
  declared_zdr: nullable(boolean()).meta({ description: "Self-declared zero data retention; null inherits the platform policy." }),
  weight: integer({ min: 1, max: 1000 }).meta({
    description: "Load-balancing weight among the provider's credentials of equal sort_order, 1 to 1000 (docs/routing.md, \"Load balancing\"). Default 1.",
  }),
};

const { key: _key, provider: _provider, workspace_id: _workspace, ...settings } = ByokFields;

/** Settings create and update share, in update-mask order. */
export const BYOK_SETTINGS = Object.keys(settings) as Array<keyof typeof settings>;

export const CreateByokKeyRequest = object(
  { key: ByokFields.key, provider: ByokFields.provider, workspace_id: ByokFields.workspace_id, ...settings },
  { required: ["key", "provider"] },
);

export const UpdateByokKeyRequest = object({
  key: ByokFields.key.meta({ description: "New raw key: rotates the key material and regenerates the label." }),
  ...settings,
}).meta({ description: "Omitted fields stay unchanged; null clears a nullable field." });
