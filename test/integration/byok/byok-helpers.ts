/** Helpers shared by the BYOK integration tests. */
import { randomBytes } from "node:crypto";
import { loadKeyring, type Keyring } from "../../../src/core/byok/keyring.js";
import { decryptCredentialKey } from "../../../src/core/byok/credential-crypto.js";
import type { Harness } from "../../helpers/harness.js";

export const CREDENTIAL_KEYS = [
  "id",
  "name",
  "provider",
  "label",
  "workspace_id",
  "allowed_api_key_hashes",
  "allowed_models",
  "allowed_user_ids",
  "declared_zdr",
  "disabled",
  "is_required",
  "is_fallback",
  "is_byok_only",
  "sort_order",
  "weight",
  "created_at",
].sort();

/** The keys of a credential stored without a name: `name` is "string or absent", never null. */
export const UNNAMED_CREDENTIAL_KEYS = CREDENTIAL_KEYS.filter((k) => k !== "name");

/** The keys a credential response must have, given whether it has a name. */
export function credentialKeysFor(c: { name?: unknown }): string[] {
  return "name" in c ? CREDENTIAL_KEYS : UNNAMED_CREDENTIAL_KEYS;
}

/** A random provider-looking key that is easy to search for. */
export function canaryKey(prefix = "sk-proj-"): string {
  return `${prefix}CANARY${randomBytes(24).toString("hex")}`;
}

/** The keyring the harness's core loaded (same configuration, same key file). */
export function harnessKeyring(h: Harness): Keyring {
  return loadKeyring({
    masterKey: h.config.byok.masterKey,
    masterKeyFile: h.config.byok.masterKeyFile,
    dataDir: h.config.dataDir,
    production: false,
    refreshIntervalMs: 0,
  });
}

/** Decrypts a stored credential the way the provider-call path would. */
export async function storedKey(h: Harness, keyring: Keyring, id: string): Promise<string> {
  const row = await h.database.db.byokCredential.findUniqueOrThrow({ where: { id } });
  return decryptCredentialKey(keyring, row);
}
