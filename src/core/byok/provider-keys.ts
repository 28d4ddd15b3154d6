/**
 * The operator's shared provider keys: what the BYOK flags call "shared credentials". An operator adds
 * them with `portico admin provider-key add`; every workspace may use them after its own non-fallback
 * credentials, unless an `is_required` or `is_byok_only` credential removes them
 * (src/core/chat/credentials/select.ts).
 *
 * Sealed with the same keyring as BYOK credentials, bound to their row (id and provider) under an
 * operator scope no workspace id can take, re-encrypted by `portico admin byok rotate-keys`, and never
 * returned or printed: listings show the masked label of docs/byok.md only.
 */
import type { Db } from "../../db/client.js";
import { invalidArgument, notFound } from "../errors.js";
import type { InvalidationBus } from "../../lib/invalidation.js";
import { createTtlCache } from "../../lib/ttl-cache.js";
import { decryptCredentialKey, sealCredentialKey, type CredentialBinding, type SealedCredentialRow } from "./credential-crypto.js";
import type { Keyring } from "./keyring.js";
import { byokLabel } from "./label.js";
import { validateKey, validateServedProvider, type ServesProvider } from "./validation.js";

/** The invalidation-bus topic of provider-key changes. */
export const PROVIDER_KEYS_TOPIC = "provider-keys";

/**
 * The workspace part of a provider key's binding. Workspace ids are UUIDs, so a sealed BYOK credential can
 * never be opened as a provider key, nor the other way round.
 */
const OPERATOR_SCOPE = "operator:shared";

export function providerKeyBinding(row: { id: string; provider: string }): CredentialBinding {
  return { id: row.id, workspaceId: OPERATOR_SCOPE, provider: row.provider };
}

export function providerKeySealedRow(row: { id: string; provider: string; keyId: string; ciphertext: Uint8Array }): SealedCredentialRow {
  return { ...providerKeyBinding(row), keyId: row.keyId, ciphertext: row.ciphertext };
}

export interface ProviderKeyInfo {
  id: string;
  provider: string;
  /** Masked (docs/byok.md §Label): never more than the last 4 characters of the key. */
  label: string;
  disabled: boolean;
  sortOrder: number;
  /** Load-balancing weight among the provider's shared keys of equal sort_order (docs/routing.md). */
  weight: number;
  keyId: string;
  createdAt: Date;
}

const info = (r: { id: string; provider: string; label: string; disabled: boolean; sortOrder: number; weight: number; keyId: string; createdAt: Date }): ProviderKeyInfo => ({
  id: r.id,
  provider: r.provider,
  label: r.label,
  disabled: r.disabled,
  sortOrder: r.sortOrder,
  weight: r.weight,
  keyId: r.keyId,
  createdAt: r.createdAt,
});

export interface ProviderKeyAdmin {
  add(input: { provider: string; key: string; sortOrder?: number; weight?: number }): Promise<ProviderKeyInfo>;
  list(provider?: string): Promise<ProviderKeyInfo[]>;
  setDisabled(id: string, disabled: boolean): Promise<ProviderKeyInfo>;
  remove(id: string): Promise<void>;
}

export function createProviderKeyAdmin(deps: { db: Db; keyring: Keyring; servesProvider: ServesProvider; onChanged?: () => void }): ProviderKeyAdmin {
  const { db } = deps;
  const changed = () => deps.onChanged?.();
  const present = async (id: string) => {
    const row = await db.providerKey.findUnique({ where: { id } });
    if (!row) throw notFound(`No provider key with id ${JSON.stringify(id.slice(0, 64))}`);
    return row;
  };
  return {
    async add(input) {
      const provider = validateServedProvider(input.provider.trim().toLowerCase(), deps.servesProvider);
      const key = validateKey(input.key);
      const sortOrder = input.sortOrder ?? 0;
      if (!Number.isSafeInteger(sortOrder)) throw invalidArgument("sort_order", "sort_order must be an integer");
      const weight = input.weight ?? 1;
      if (!Number.isSafeInteger(weight) || weight < 1 || weight > 1000) throw invalidArgument("weight", "weight must be an integer from 1 to 1000");
      const id = crypto.randomUUID();
      const sealed = sealCredentialKey(deps.keyring, providerKeyBinding({ id, provider }), key);
      const row = await db.providerKey.create({
        data: { id, provider, label: byokLabel(key), keyId: sealed.keyId, ciphertext: new Uint8Array(sealed.ciphertext), sortOrder, weight },
      });
      changed();
      return info(row);
    },
    async list(provider) {
      const rows = await db.providerKey.findMany({
        where: provider ? { provider: provider.toLowerCase() } : {},
        orderBy: [{ provider: "asc" }, { sortOrder: "asc" }, { createdAt: "asc" }, { id: "asc" }],
      });
      return rows.map(info);
    },
    async setDisabled(id, disabled) {
      await present(id);
      const row = await db.providerKey.update({ where: { id }, data: { disabled, updatedAt: new Date() } });
      changed();
      return info(row);
    },
    async remove(id) {
      await present(id);
      // A hard delete: the sealed key leaves the database with its row.
      await db.providerKey.deleteMany({ where: { id } });
      changed();
    },
  };
}

/** One usable shared credential, its key decrypted (in memory only; never logged). */
export interface SharedCredential {
  id: string;
  provider: string;
  apiKey: string;
  /** Its sort_order and load-balancing weight (docs/routing.md, "Load balancing"). */
  sortOrder: number;
  weight: number;
}

export interface SharedCredentialStore {
  /** The enabled provider keys of `provider`, in their order (sort_order, then age, then id). */
  forProvider(provider: string): Promise<SharedCredential[]>;
  /** Providers with at least one enabled key and when the first was added (for listing what can be routed). */
  providers(): Promise<Array<{ provider: string; createdAt: Date }>>;
}

/**
 * Reads and decrypts provider keys at most once per `ttlMs` (1 s) per provider; a change published on the
 * bus (any process, the admin CLI included when Redis is configured) drops the cache at once.
 */
export function createSharedCredentialStore(deps: {
  db: Db;
  keyring: Keyring;
  ttlMs?: number;
  bus?: InvalidationBus;
  onUnusable?: (id: string, err: unknown) => void;
}): SharedCredentialStore {
  const cache = createTtlCache<SharedCredential[]>({ ttlMs: deps.ttlMs ?? 1000 });
  deps.bus?.subscribe(PROVIDER_KEYS_TOPIC, () => cache.clear());
  const read = async (provider: string): Promise<SharedCredential[]> => {
    const rows = await deps.db.providerKey.findMany({
      where: { provider, disabled: false },
      orderBy: [{ sortOrder: "asc" }, { createdAt: "asc" }, { id: "asc" }],
    });
    const out: SharedCredential[] = [];
    for (const row of rows) {
      try {
        out.push({ id: row.id, provider: row.provider, sortOrder: row.sortOrder, weight: row.weight, apiKey: decryptCredentialKey(deps.keyring, providerKeySealedRow(row)) });
      } catch (err) {
        deps.onUnusable?.(row.id, err);
      }
    }
    return out;
  };
  return {
    forProvider: (provider) => cache.get(provider, () => read(provider)),
    async providers() {
      const rows = await deps.db.providerKey.findMany({ where: { disabled: false }, select: { provider: true, createdAt: true }, orderBy: { createdAt: "asc" } });
      const first = new Map<string, Date>();
      for (const r of rows) if (!first.has(r.provider)) first.set(r.provider, r.createdAt);
      return [...first].map(([provider, createdAt]) => ({ provider, createdAt }));
    },
  };
}

/** The id a keyless provider's attempts carry where a credential id would be (generation records). */
export const KEYLESS_CREDENTIAL_ID = "keyless";

/**
 * The shared credentials plus, for each keyless provider (PORTICO_KEYLESS_PROVIDERS), one without a key
 * after the provider's shared keys: the operator declared that its server needs none. It counts as a
 * shared credential, so the BYOK flags govern it like one (`is_required` and `is_byok_only` remove it).
 */
export function withKeylessProviders(store: SharedCredentialStore, keyless: readonly string[], since = new Date()): SharedCredentialStore {
  if (keyless.length === 0) return store;
  return {
    async forProvider(provider) {
      const keys = await store.forProvider(provider);
      return keyless.includes(provider) ? [...keys, { id: KEYLESS_CREDENTIAL_ID, provider, apiKey: "", sortOrder: Number.MAX_SAFE_INTEGER, weight: 1 }] : keys;
    },
    async providers() {
      const listed = await store.providers();
      const missing = keyless.filter((p) => !listed.some((l) => l.provider === p)).map((provider) => ({ provider, createdAt: since }));
      return [...listed, ...missing];
    },
  };
}
