/**
 * Re-encryption of BYOK credentials and the operator's shared provider keys under the keyring's primary
 * key (one loop over both tables, see SealedTable), and retirement of keys that no longer seal anything. Row by row with compare-and-swap on (key id, ciphertext), so it is
 * idempotent, resumable after a crash at any point, and safe while servers keep serving: a row
 * changed concurrently is simply picked up again on the next pass.
 */
import type { Db } from "../../db/client.js";
import { CredentialUnusableError, decryptCredentialKey, sealCredentialKey, type SealedCredentialRow } from "./credential-crypto.js";
import { writeKeyringFile, type Keyring } from "./keyring.js";
import { credentialsPerKey, recordAndVerifyCheckValues } from "./keyring-store.js";
import { providerKeySealedRow } from "./provider-keys.js";

export interface RotationProgress {
  reencrypted: number;
  /** Rows changed concurrently between read and write (retried on the next pass). */
  raced: number;
  /** Credentials whose key material cannot be opened (left on their key, reported by id). */
  unusable: string[];
  /** Rows still sealed under a non-primary key. */
  remaining: number;
}

export interface RotateOptions {
  batchSize?: number;
  /** Stops between rows when aborted (the next run resumes). */
  signal?: AbortSignal;
  /** Pause between batches, to throttle load on a busy database (ms). */
  pauseMs?: number;
  onProgress?: (p: RotationProgress) => void;
}

export interface RotationResult extends RotationProgress {
  primaryId: string;
  aborted: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * One table of sealed keys as the rotation loop sees it: rows not under the primary key, page by page
 * in id order; a compare-and-swap write of a row's new seal; what is left to do.
 */
interface SealedTable<R extends { id: string; keyId: string | null; ciphertext: Uint8Array | null }> {
  stale(after: string | undefined, take: number): Promise<R[]>;
  /** The row as the credential crypto binds it (its AAD names the row). */
  binding(row: R): SealedCredentialRow;
  /** Writes the new seal if the row still holds the one read; false when it changed meanwhile. */
  swap(row: R, sealed: { keyId: string; ciphertext: Buffer }): Promise<boolean>;
  remaining(): Promise<number>;
}

function credentialsTable(db: Db, primaryId: string): SealedTable<{ id: string; workspaceId: string; provider: string; keyId: string | null; ciphertext: Uint8Array | null; deletedAt: Date | null }> {
  const stale = { keyId: { not: primaryId }, ciphertext: { not: null }, NOT: { keyId: null } } as const;
  return {
    stale: (after, take) =>
      db.byokCredential.findMany({
        where: { ...stale, ...(after ? { id: { gt: after } } : {}) },
        orderBy: { id: "asc" },
        take,
        select: { id: true, workspaceId: true, provider: true, keyId: true, ciphertext: true, deletedAt: true },
      }),
    binding: (row) => row,
    swap: async (row, sealed) =>
      (
        await db.byokCredential.updateMany({
          where: { id: row.id, keyId: row.keyId, ciphertext: { equals: Buffer.from(row.ciphertext!) }, deletedAt: null },
          data: { keyId: sealed.keyId, ciphertext: new Uint8Array(sealed.ciphertext) },
        })
      ).count === 1,
    remaining: () => db.byokCredential.count({ where: stale }),
  };
}

/** The operator's shared provider keys (a handful of rows). */
function providerKeysTable(db: Db, primaryId: string): SealedTable<{ id: string; provider: string; keyId: string; ciphertext: Uint8Array }> {
  return {
    stale: (after, take) =>
      db.providerKey.findMany({
        where: { keyId: { not: primaryId }, ...(after ? { id: { gt: after } } : {}) },
        orderBy: { id: "asc" },
        take,
        select: { id: true, provider: true, keyId: true, ciphertext: true },
      }),
    binding: providerKeySealedRow,
    swap: async (row, sealed) =>
      (
        await db.providerKey.updateMany({
          where: { id: row.id, keyId: row.keyId, ciphertext: { equals: Buffer.from(row.ciphertext) } },
          data: { keyId: sealed.keyId, ciphertext: new Uint8Array(sealed.ciphertext) },
        })
      ).count === 1,
    remaining: () => db.providerKey.count({ where: { keyId: { not: primaryId } } }),
  };
}

/** Re-encrypts every live BYOK credential, then every shared provider key, not sealed under the primary key. */
export async function reencryptCredentials(db: Db, keyring: Keyring, opts: RotateOptions = {}): Promise<RotationResult> {
  const batchSize = Math.max(1, opts.batchSize ?? 100);
  const primaryId = keyring.primaryId;
  const progress: RotationProgress = { reencrypted: 0, raced: 0, unusable: [], remaining: 0 };
  const unusable = new Set<string>();
  const tables = [credentialsTable(db, primaryId), providerKeysTable(db, primaryId)] as SealedTable<{ id: string; keyId: string | null; ciphertext: Uint8Array | null }>[];
  const remaining = async () => (await Promise.all(tables.map((t) => t.remaining()))).reduce((a, b) => a + b, 0);
  let aborted = false;

  tables: for (const table of tables) {
    // Passes until one finds nothing left to do except unusable rows.
    for (;;) {
      let cursor: string | undefined;
      let touched = 0;
      for (;;) {
        const rows = await table.stale(cursor, batchSize);
        if (rows.length === 0) break;
        for (const row of rows) {
          if (opts.signal?.aborted) {
            aborted = true;
            break tables;
          }
          cursor = row.id;
          if (unusable.has(row.id)) continue;
          let key: string;
          try {
            key = decryptCredentialKey(keyring, table.binding(row));
          } catch (err) {
            if (!(err instanceof CredentialUnusableError)) throw err;
            unusable.add(row.id);
            continue;
          }
          touched += 1;
          if (await table.swap(row, sealCredentialKey(keyring, table.binding(row), key))) progress.reencrypted += 1;
          else progress.raced += 1;
        }
        progress.remaining = await remaining();
        progress.unusable = [...unusable];
        opts.onProgress?.({ ...progress, unusable: [...unusable] });
        if (opts.pauseMs) await sleep(opts.pauseMs);
      }
      if (touched === 0) break;
    }
  }
  progress.remaining = await remaining();
  progress.unusable = [...unusable];
  return { ...progress, primaryId, aborted };
}

export interface RetireResult {
  retired: string[];
  /** Non-primary keys kept because credentials still use them. */
  kept: Array<{ keyId: string; credentials: number }>;
}

/**
 * Retires every non-primary key no live credential is sealed under: marks it retired in the database
 * and, for a file-managed keyring, removes its material from the key file.
 */
export async function retireUnusedKeys(db: Db, keyring: Keyring): Promise<RetireResult> {
  const primaryId = keyring.primaryId;
  const usage = await credentialsPerKey(db);
  const retired: string[] = [];
  const kept: RetireResult["kept"] = [];
  const candidates = new Set([
    ...keyring.keyIds(),
    ...(await db.keyringKey.findMany({ where: { retiredAt: null }, select: { id: true } })).map((k) => k.id),
  ]);
  for (const id of candidates) {
    if (id === primaryId) continue;
    const n = usage.get(id) ?? 0;
    if (n > 0) kept.push({ keyId: id, credentials: n });
    else retired.push(id);
  }
  if (retired.length > 0) {
    await db.keyringKey.updateMany({ where: { id: { in: retired }, retiredAt: null }, data: { retiredAt: new Date() } });
    if (keyring.source.kind === "file") {
      const state = keyring.exportState();
      for (const id of retired) state.keys.delete(id);
      writeKeyringFile(keyring.source.path, state);
      keyring.refresh(true);
    }
  }
  return { retired, kept };
}

/**
 * Makes `newKeyId` the primary of a file-managed keyring, generating its material if it is new.
 * Idempotent: when it is already the primary nothing changes (a resumed rotation).
 */
export async function promoteKey(
  db: Db,
  keyring: Keyring,
  newKeyId: string,
  generate: () => Buffer,
): Promise<{ changed: boolean }> {
  if (keyring.source.kind !== "file") {
    throw new Error(
      "--new-key-id needs a file-managed keyring (PORTICO_MASTER_KEY_FILE or the default data-dir key file); " +
        "with PORTICO_MASTER_KEY, deploy a keyring JSON whose primary is the new key and run rotate-keys without --new-key-id",
    );
  }
  let changed = false;
  if (keyring.primaryId !== newKeyId) {
    const state = keyring.exportState();
    if (!state.keys.has(newKeyId)) state.keys.set(newKeyId, generate());
    state.primaryId = newKeyId;
    writeKeyringFile(keyring.source.path, state);
    keyring.refresh(true);
    if (keyring.primaryId !== newKeyId) throw new Error("the key file could not be reloaded after writing the new primary");
    changed = true;
  }
  await recordAndVerifyCheckValues(db, keyring);
  return { changed };
}
