/**
 * Re-encryption of BYOK credentials under the keyring's primary key, and retirement of keys that no
 * longer seal anything. Row by row with compare-and-swap on (key id, ciphertext), so it is
 * idempotent, resumable after a crash at any point, and safe while servers keep serving: a row
 * changed concurrently is simply picked up again on the next pass.
 */
import type { Db } from "../../db/client.js";
import { CredentialUnusableError, decryptCredentialKey, sealCredentialKey } from "./credential-crypto.js";
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

/** Re-encrypts every live credential not sealed under the primary key. */
export async function reencryptCredentials(db: Db, keyring: Keyring, opts: RotateOptions = {}): Promise<RotationResult> {
  const batchSize = Math.max(1, opts.batchSize ?? 100);
  const primaryId = keyring.primaryId;
  const progress: RotationProgress = { reencrypted: 0, raced: 0, unusable: [], remaining: 0 };
  const unusable = new Set<string>();
  const stale = { keyId: { not: primaryId }, ciphertext: { not: null } } as const;
  let aborted = false;

  // Passes until one finds nothing left to do except unusable rows.
  for (;;) {
    let cursor: string | undefined;
    let changedThisPass = 0;
    let racedThisPass = 0;
    for (;;) {
      const rows = await db.byokCredential.findMany({
        where: { ...stale, keyId: { not: primaryId }, NOT: { keyId: null }, ...(cursor ? { id: { gt: cursor } } : {}) },
        orderBy: { id: "asc" },
        take: batchSize,
        select: { id: true, workspaceId: true, provider: true, keyId: true, ciphertext: true, deletedAt: true },
      });
      if (rows.length === 0) break;
      for (const row of rows) {
        if (opts.signal?.aborted) {
          aborted = true;
          break;
        }
        cursor = row.id;
        if (unusable.has(row.id)) continue;
        let key: string;
        try {
          key = decryptCredentialKey(keyring, row);
        } catch (err) {
          if (!(err instanceof CredentialUnusableError)) throw err;
          unusable.add(row.id);
          continue;
        }
        const sealed = sealCredentialKey(keyring, row, key);
        const res = await db.byokCredential.updateMany({
          where: { id: row.id, keyId: row.keyId, ciphertext: { equals: Buffer.from(row.ciphertext!) }, deletedAt: null },
          data: { keyId: sealed.keyId, ciphertext: new Uint8Array(sealed.ciphertext) },
        });
        if (res.count === 1) {
          progress.reencrypted += 1;
          changedThisPass += 1;
        } else {
          progress.raced += 1;
          racedThisPass += 1;
        }
      }
      if (aborted) break;
      progress.remaining = await db.byokCredential.count({ where: { ...stale, NOT: { keyId: null } } });
      progress.unusable = [...unusable];
      opts.onProgress?.({ ...progress, unusable: [...unusable] });
      if (opts.pauseMs) await sleep(opts.pauseMs);
    }
    if (aborted) break;
    if (changedThisPass === 0 && racedThisPass === 0) break;
  }
  if (!aborted) {
    const shared = await reencryptProviderKeys(db, keyring, unusable, opts.signal);
    progress.reencrypted += shared.reencrypted;
    progress.raced += shared.raced;
    aborted = shared.aborted;
  }
  progress.remaining =
    (await db.byokCredential.count({ where: { ...stale, NOT: { keyId: null } } })) +
    (await db.providerKey.count({ where: { keyId: { not: primaryId } } }));
  progress.unusable = [...unusable];
  return { ...progress, primaryId, aborted };
}

/**
 * The operator's shared provider keys (a handful of rows): the same compare-and-swap re-encryption.
 * Unusable ones are added to `unusable` and left as they are.
 */
async function reencryptProviderKeys(
  db: Db,
  keyring: Keyring,
  unusable: Set<string>,
  signal?: AbortSignal,
): Promise<{ reencrypted: number; raced: number; aborted: boolean }> {
  const out = { reencrypted: 0, raced: 0, aborted: false };
  for (let pass = 0; pass < 3; pass++) {
    const rows = await db.providerKey.findMany({ where: { keyId: { not: keyring.primaryId } }, orderBy: { id: "asc" } });
    let raced = 0;
    for (const row of rows) {
      if (signal?.aborted) return { ...out, aborted: true };
      if (unusable.has(row.id)) continue;
      let key: string;
      try {
        key = decryptCredentialKey(keyring, providerKeySealedRow(row));
      } catch (err) {
        if (!(err instanceof CredentialUnusableError)) throw err;
        unusable.add(row.id);
        continue;
      }
      const sealed = sealCredentialKey(keyring, providerKeySealedRow(row), key);
      const res = await db.providerKey.updateMany({
        where: { id: row.id, keyId: row.keyId, ciphertext: { equals: Buffer.from(row.ciphertext) } },
        data: { keyId: sealed.keyId, ciphertext: new Uint8Array(sealed.ciphertext) },
      });
      if (res.count === 1) out.reencrypted += 1;
      else {
        out.raced += 1;
        raced += 1;
      }
    }
    if (raced === 0) break;
  }
  return out;
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
