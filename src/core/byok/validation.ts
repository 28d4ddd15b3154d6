/**
 * Validation of BYOK credential fields in the core (gRPC callers meet it too), with the contract's
 * field definitions (src/contract/requests/byok.ts), which the gateway and the OpenAPI document use
 * as well. Every failure names the field; messages never repeat a submitted value. Ownership checks
 * (workspace, API key hashes) need the database and live in the service.
 */
import { ByokFields } from "../../contract/requests/byok.js";
import { validate } from "../../contract/requests/kit.js";
import { checkRules, invalidArgument } from "../errors.js";
import { UNSERVED_PROVIDER, type ServesProvider } from "../catalog/providers.js";

export { KEY_HASH, MAX_KEY_BYTES, MAX_LIST_ENTRY_CHARS, MAX_LIST_ITEMS, MAX_NAME_CHARS } from "../../contract/requests/byok.js";

/** PostgreSQL text and jsonb cannot hold U+0000, so stored strings never contain it (on every backend). */
const NUL = "\u0000";

/**
 * Whether `id` can name a stored row (credential or workspace): empty strings and strings with a NUL
 * character cannot, and must not reach the database (PostgreSQL rejects NUL in a query parameter).
 */
export function isLookupId(id: string): boolean {
  return id !== "" && !id.includes(NUL);
}

/** Checks one field with its definition; a violation becomes 400 bad_request naming `field`. */
function check<K extends keyof typeof ByokFields>(name: K, value: unknown, field: string = name): void {
  checkRules(() => validate(ByokFields[name], value, field));
}

export function validateKey(key: string | undefined, field = "key"): string {
  check("key", key, field);
  return key!;
}

/** The shape of a provider slug (lowercase); membership is `validateServedProvider`'s. */
export function validateProvider(provider: string | undefined, field = "provider"): string {
  check("provider", provider, field);
  return provider!;
}

// The provider list lives in the catalog module (the providers it knows); re-exported for the BYOK code.
export { UNSERVED_PROVIDER, type ServesProvider };

/**
 * A provider a credential may be stored for: one requests can be routed to. A credential for any other
 * slug could never serve a request, so it is refused rather than stored.
 */
export function validateServedProvider(provider: string | undefined, serves: ServesProvider, field = "provider"): string {
  const slug = validateProvider(provider, field);
  if (!serves(slug)) throw invalidArgument(field, UNSERVED_PROVIDER);
  return slug;
}

export function validateName(name: string | null | undefined): string | null {
  if (name === undefined || name === null) return null;
  check("name", name);
  return name;
}

/** Shape of allowed_api_key_hashes (ownership is checked separately): null, or 1..100 × 64 lowercase hex. */
export function validateKeyHashes(hashes: string[] | null): string[] | null {
  check("allowed_api_key_hashes", hashes);
  return hashes;
}

/** allowed_models / allowed_user_ids: null, or at most 100 non-empty strings of at most 256 characters. */
export function validateStringList(field: "allowed_models" | "allowed_user_ids", values: string[] | null): string[] | null {
  check(field, values);
  return values;
}

export interface CredentialFlags {
  isRequired: boolean;
  isFallback: boolean;
  isByokOnly: boolean;
}

/**
 * The description's flag rules: a fallback credential can be neither byok-only nor required
 * (is_required is valid only on non-fallback credentials). Checked on the merged state of an update.
 */
export function validateFlags(flags: CredentialFlags): void {
  if (flags.isFallback && flags.isByokOnly) {
    throw invalidArgument("is_byok_only", "is_fallback cannot be combined with is_byok_only");
  }
  if (flags.isFallback && flags.isRequired) {
    throw invalidArgument("is_required", "is_required is only valid on non-fallback credentials; it cannot be combined with is_fallback");
  }
}
