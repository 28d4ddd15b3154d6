/**
 * Where a credential is put to use: the provider-call path asks for the key of one credential and
 * gets it only for the duration of a callback. This is the only runtime caller of the decrypt
 * function besides re-encryption and the operator's verify command.
 */
import type { Db } from "../../db/client.js";
import { decryptCredentialKey } from "./credential-crypto.js";
import type { Keyring } from "./keyring.js";

export interface CredentialKeyAccess {
  /**
   * Runs `use` with the raw key of the organization's credential. Throws CredentialUnusableError
   * (explicit, never an empty key) when the key material is missing, tampered or sealed under an
   * unknown master key; returns null when the organization has no such credential.
   */
  withProviderKey<T>(organizationId: string, credentialId: string, use: (key: string) => Promise<T>): Promise<T | null>;
}

export function createCredentialKeyAccess(deps: { db: Db; keyring: Keyring }): CredentialKeyAccess {
  return {
    async withProviderKey(organizationId, credentialId, use) {
      const row = await deps.db.byokCredential.findFirst({ where: { id: credentialId, organizationId } });
      if (!row) return null;
      return use(decryptCredentialKey(deps.keyring, row));
    },
  };
}
