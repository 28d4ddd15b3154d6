/**
 * Binds provider keys to their credential rows. {@link sealCredentialKey} encrypts a key for one row;
 * {@link decryptCredentialKey} is the one function that turns a stored credential back into its key.
 * It is called only where a credential is put to use (provider calls, re-encryption under a new
 * master key, the operator's verify command); no public operation decrypts.
 */
import { SealOpenError, type Keyring } from "./keyring.js";

/** The row fields the ciphertext is bound to (with the format version the keyring adds). */
export interface CredentialBinding {
  id: string;
  workspaceId: string;
  provider: string;
}

export interface SealedCredentialRow extends CredentialBinding {
  keyId: string | null;
  ciphertext: Uint8Array | null;
  deletedAt?: Date | null;
}

/** Why a stored credential cannot yield its key. */
export type UnusableReason = "deleted" | "no_key_material" | "unknown_key" | "malformed" | "authentication_failed";

const REASON_TEXT: Record<UnusableReason, string> = {
  deleted: "the credential was deleted and its key material wiped",
  no_key_material: "the credential has no stored key material",
  unknown_key: "its master key is not in the keyring",
  malformed: "its stored key material is malformed",
  authentication_failed: "its stored key material failed authentication (tampered, moved or sealed under another key)",
};

/** A credential whose key cannot be recovered. Explicit, so a caller never mistakes it for an empty key. */
export class CredentialUnusableError extends Error {
  override name = "CredentialUnusableError";
  constructor(
    readonly credentialId: string,
    readonly reason: UnusableReason,
  ) {
    super(`BYOK credential ${credentialId} is unusable: ${REASON_TEXT[reason]}`);
  }
}

/** Length-prefixed, so no two different bindings produce the same bytes. */
export function credentialAad(c: CredentialBinding): Buffer {
  const parts = ["portico.byok.credential", c.id, c.workspaceId, c.provider].map((p) => Buffer.from(p, "utf8"));
  const out: Buffer[] = [];
  for (const p of parts) {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(p.length);
    out.push(len, p);
  }
  return Buffer.concat(out);
}

export function sealCredentialKey(keyring: Keyring, binding: CredentialBinding, key: string): { keyId: string; ciphertext: Buffer } {
  const plain = Buffer.from(key, "utf8");
  try {
    const { keyId, blob } = keyring.seal(plain, credentialAad(binding));
    return { keyId, ciphertext: blob };
  } finally {
    plain.fill(0);
  }
}

/** The one decrypt function. Throws {@link CredentialUnusableError}; never returns an empty key. */
export function decryptCredentialKey(keyring: Keyring, row: SealedCredentialRow): string {
  if (row.deletedAt) throw new CredentialUnusableError(row.id, "deleted");
  if (!row.ciphertext || row.ciphertext.byteLength === 0 || !row.keyId) {
    throw new CredentialUnusableError(row.id, "no_key_material");
  }
  let plain: Buffer;
  try {
    plain = keyring.open(row.keyId, row.ciphertext, credentialAad(row));
  } catch (err) {
    if (err instanceof SealOpenError) throw new CredentialUnusableError(row.id, err.failure);
    throw err;
  }
  try {
    if (plain.length === 0) throw new CredentialUnusableError(row.id, "no_key_material");
    return plain.toString("utf8");
  } finally {
    plain.fill(0);
  }
}
