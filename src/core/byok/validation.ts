/**
 * Pure validation rules for BYOK credentials (no I/O). Every failure names the field. Messages never
 * repeat a submitted value: a key pasted into the wrong field must not come back in an error.
 * Ownership checks (workspace, API key hashes) need the database and live in the service.
 */
import { invalidArgument } from "../errors.js";
import { isByokProvider } from "./providers.js";

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
 * Whether `id` can name a stored row (credential or workspace): empty strings and strings with a NUL
 * character cannot, and must not reach the database (PostgreSQL rejects NUL in a query parameter).
 */
export function isLookupId(id: string): boolean {
  return id !== "" && !id.includes(NUL);
}

export function validateKey(key: string | undefined, field = "key"): string {
  if (key === undefined || key.length === 0) throw invalidArgument(field, `${field} is required and must be a non-empty string`);
  if (key.trim().length === 0) throw invalidArgument(field, `${field} must not be blank`);
  if (Buffer.byteLength(key, "utf8") > MAX_KEY_BYTES) {
    throw invalidArgument(field, `${field} must be at most ${MAX_KEY_BYTES} bytes`);
  }
  return key;
}

export function validateProvider(provider: string | undefined, field = "provider"): string {
  if (provider === undefined || provider === "") throw invalidArgument(field, `${field} is required`);
  if (!isByokProvider(provider)) {
    throw invalidArgument(field, `${field} must be one of the supported provider slugs (lowercase, e.g. "openai")`);
  }
  return provider;
}

export function validateName(name: string | null | undefined): string | null {
  if (name === undefined || name === null) return null;
  if (Array.from(name).length > MAX_NAME_CHARS) throw invalidArgument("name", `name must be at most ${MAX_NAME_CHARS} characters`);
  if (name.includes(NUL)) throw invalidArgument("name", "name must not contain the NUL character (U+0000)");
  return name;
}

/** Shape of allowed_api_key_hashes (ownership is checked separately): null, or 1..100 × 64 lowercase hex. */
export function validateKeyHashes(hashes: string[] | null): string[] | null {
  const field = "allowed_api_key_hashes";
  if (hashes === null) return null;
  if (hashes.length === 0) throw invalidArgument(field, `${field} must contain at least one hash, or be null for no restriction`);
  if (hashes.length > MAX_LIST_ITEMS) throw invalidArgument(field, `${field} must contain at most ${MAX_LIST_ITEMS} hashes`);
  hashes.forEach((h, i) => {
    if (!KEY_HASH.test(h)) throw invalidArgument(field, `${field}[${i}] must be 64 lowercase hexadecimal characters`);
  });
  return hashes;
}

/** allowed_models / allowed_user_ids: null, or at most 100 non-empty strings of at most 256 characters. */
export function validateStringList(field: "allowed_models" | "allowed_user_ids", values: string[] | null): string[] | null {
  if (values === null) return null;
  if (values.length > MAX_LIST_ITEMS) throw invalidArgument(field, `${field} must contain at most ${MAX_LIST_ITEMS} entries`);
  values.forEach((v, i) => {
    if (v.length === 0 || v.length > MAX_LIST_ENTRY_CHARS) {
      throw invalidArgument(field, `${field}[${i}] must be a string of 1 to ${MAX_LIST_ENTRY_CHARS} characters`);
    }
    if (v.includes(NUL)) throw invalidArgument(field, `${field}[${i}] must not contain the NUL character (U+0000)`);
  });
  return values;
}

export interface CredentialFlags {
  isRequired: boolean;
  isFallback: boolean;
  isByokOnly: boolean;
}

/**
 * The description's flag rules: a fallback credential can be neither byok-only nor required
 * (is_required is valid only on non-fallback credentials).
 */
export function validateFlags(flags: CredentialFlags): void {
  if (flags.isFallback && flags.isByokOnly) {
    throw invalidArgument("is_byok_only", "is_fallback cannot be combined with is_byok_only");
  }
  if (flags.isFallback && flags.isRequired) {
    throw invalidArgument("is_required", "is_required is only valid on non-fallback credentials; it cannot be combined with is_fallback");
  }
}
