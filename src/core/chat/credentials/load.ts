/**
 * The credentials of a workspace for one provider, read from the database and decrypted in memory for at
 * most `ttlMs` (1 s), so a request does not read or decrypt on every call and a change (a credential
 * disabled, edited or deleted through any process) takes effect within that bound.
 */
import type { Db } from "../../../db/client.js";
import { decryptCredentialKey } from "../../byok/credential-crypto.js";
import type { Keyring } from "../../byok/keyring.js";
import type { CredentialRecord } from "./select.js";
import type { InvalidationBus } from "../../../lib/invalidation.js";
import { createTtlPairCache } from "../../../lib/ttl-cache.js";

export interface LoadedCredential extends CredentialRecord {
  /** The decrypted provider key (never logged, never returned). Null when it cannot be opened. */
  apiKey: string | null;
}

/** The invalidation-bus topic of BYOK changes; any key clears the cache. */
export const BYOK_TOPIC = "byok";

export interface CredentialStore {
  forProvider(workspaceId: string, provider: string): Promise<LoadedCredential[]>;
  /** Every credential of the workspace, without keys (for listing what can be routed). */
  listAll(workspaceId: string): Promise<CredentialRecord[]>;
}

const list = (v: unknown): string[] | null => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : null);

type CredentialRow = Awaited<ReturnType<Db["byokCredential"]["findMany"]>>[number];

/** A stored credential's routing fields (never its key). */
function recordOf(row: CredentialRow): CredentialRecord {
  return {
    id: row.id,
    provider: row.provider,
    disabled: row.disabled,
    allowedModels: list(row.allowedModels),
    allowedApiKeyHashes: list(row.allowedApiKeyHashes),
    allowedUserIds: list(row.allowedUserIds),
    isRequired: row.isRequired,
    isFallback: row.isFallback,
    isByokOnly: row.isByokOnly,
    sortOrder: row.sortOrder,
    createdAt: row.createdAt,
    declaredZdr: row.declaredZdr,
    weight: row.weight,
  };
}

export function createCredentialStore(deps: {
  db: Db;
  keyring: Keyring;
  ttlMs?: number;
  /** Drops every cached credential when any process publishes a BYOK change. */
  bus?: InvalidationBus;
  onUnusable?: (id: string, err: unknown) => void;
}): CredentialStore {
  const cache = createTtlPairCache<LoadedCredential[]>({ ttlMs: deps.ttlMs ?? 1000 });
  deps.bus?.subscribe(BYOK_TOPIC, () => cache.clear());
  const read = async (workspaceId: string, provider: string): Promise<LoadedCredential[]> => {
    const rows = await deps.db.byokCredential.findMany({ where: { workspaceId, provider, deletedAt: null } });
    return rows.map((row) => {
      let apiKey: string | null = null;
      try {
        apiKey = decryptCredentialKey(deps.keyring, row);
      } catch (err) {
        deps.onUnusable?.(row.id, err);
      }
      return { ...recordOf(row), apiKey };
    });
  };
  return {
    async listAll(workspaceId) {
      const rows = await deps.db.byokCredential.findMany({ where: { workspaceId, deletedAt: null } });
      return rows.map(recordOf);
    },
    forProvider: (workspaceId, provider) => cache.get(workspaceId, provider, read),
  };
}
