/**
 * API keys and host tokens: random secrets with a recognizable prefix, stored only as SHA-256 hex.
 */
import { hash, randomBytes, timingSafeEqual } from "node:crypto";

export const API_KEY_PREFIX = "pk-v1-";
export const HOST_TOKEN_PREFIX = "pht-v1-";
/** An intern run's short-lived model credential (docs/interns.md, "Model calls through Portico"). */
export const RUN_TOKEN_PREFIX = "prt-v1-";

/** 256 random bits, hex encoded, behind a prefix that secret scanners and our log scrubber recognize. */
export function generateSecret(prefix: string): string {
  return prefix + randomBytes(32).toString("hex");
}

export function generateApiKey(): string {
  return generateSecret(API_KEY_PREFIX);
}

export function generateHostToken(): string {
  return generateSecret(HOST_TOKEN_PREFIX);
}

/** The 64-hex identifier of a secret; what the database stores and what allowed_api_key_hashes lists. */
export function hashSecret(secret: string): string {
  // One-shot `crypto.hash` (Node 20.12+, engines says 20.19): no Hash object, a third of `createHash(…).update(…).digest()`
  // (1.2 → 0.4 µs at load 8); every request hashes its key. Strings are hashed as UTF-8 either way.
  return hash("sha256", secret, "hex");
}

/** Masked rendering: prefix plus three characters, "...", last four. Reveals 7 of 64 hex digits. */
export function labelForSecret(secret: string, prefix = API_KEY_PREFIX): string {
  if (!secret.startsWith(prefix) || secret.length < prefix.length + 16) return "***";
  return `${secret.slice(0, prefix.length + 3)}...${secret.slice(-4)}`;
}

/**
 * Constant-time equality of two hex digests. Two lower-case hex strings of one length (what `hashSecret` makes and
 * the database stores) are compared character by character without an early exit and without the two Buffers
 * (≈ 1 µs a request in the auth interceptor); anything else as the bytes the hex decodes to, as before.
 */
export function digestsEqual(a: string, b: string): boolean {
  if (a.length === b.length && a.length > 0 && (a.length & 1) === 0) {
    let diff = 0;
    let other = 0;
    for (let i = 0; i < a.length; i++) {
      const x = a.charCodeAt(i);
      const y = b.charCodeAt(i);
      diff |= x ^ y;
      other |= notLowerHex(x) | notLowerHex(y);
    }
    if (other === 0) return diff === 0;
  }
  const ba = Buffer.from(a, "hex");
  const bb = Buffer.from(b, "hex");
  return ba.length === bb.length && ba.length > 0 && timingSafeEqual(ba, bb);
}

/** 0 for a character code of 0-9 or a-f, else 1 (no branch on the value). */
function notLowerHex(c: number): number {
  const digit = ((c - 0x30) | (0x39 - c)) >>> 31; // 1 unless 0x30 ≤ c ≤ 0x39
  const letter = ((c - 0x61) | (0x66 - c)) >>> 31; // 1 unless 0x61 ≤ c ≤ 0x66
  return digit & letter;
}

/** Extracts the bearer token from an Authorization header value. */
export function bearerToken(header: string | null | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}
