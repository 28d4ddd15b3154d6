/**
 * The database side of the keyring: check values of every key (so a wrong master key is refused at
 * start-up instead of silently making credentials unusable) and which keys still seal credentials.
 */
import { timingSafeEqual } from "node:crypto";
import type { Db } from "../../db/client.js";
import { isUniqueViolation } from "../../db/client.js";
import { KeyringError, type Keyring } from "./keyring.js";

export interface VerifyKeyringOptions {
  production: boolean;
  onWarning?: (message: string) => void;
}

function sameHex(a: string, b: string): boolean {
  const ba = Buffer.from(a, "hex");
  const bb = Buffer.from(b, "hex");
  return ba.length === bb.length && ba.length > 0 && timingSafeEqual(ba, bb);
}

/** Records the check value of each key not seen before and verifies the others. */
export async function recordAndVerifyCheckValues(db: Db, keyring: Keyring): Promise<void> {
  for (const id of keyring.keyIds()) {
    const expected = keyring.checkValue(id);
    let row = await db.keyringKey.findUnique({ where: { id } });
    if (!row) {
      try {
        row = await db.keyringKey.create({ data: { id, checkValue: expected } });
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
        row = await db.keyringKey.findUnique({ where: { id } });
      }
    }
    if (!row || !sameHex(row.checkValue, expected)) {
      throw new KeyringError(
        `master key "${id}" does not match the check value stored in the database: wrong master key (refusing to start)`,
      );
    }
  }
}

/** Number of live (not wiped) credentials, BYOK and shared provider keys, sealed under each key id. */
export async function credentialsPerKey(db: Db): Promise<Map<string, number>> {
  const groups = await db.byokCredential.groupBy({
    by: ["keyId"],
    where: { ciphertext: { not: null }, keyId: { not: null } },
    _count: { _all: true },
  });
  const usage = new Map(groups.map((g) => [g.keyId!, g._count._all]));
  // The operator's shared provider keys are sealed with the same keyring.
  const shared = await db.providerKey.groupBy({ by: ["keyId"], _count: { _all: true } });
  for (const g of shared) usage.set(g.keyId, (usage.get(g.keyId) ?? 0) + g._count._all);
  // Logged request and response bodies (docs/operations.md, "Content logging") keep their key until they expire.
  const content = await db.generationContent.groupBy({ by: ["keyId"], _count: { _all: true } });
  for (const g of content) usage.set(g.keyId, (usage.get(g.keyId) ?? 0) + g._count._all);
  return usage;
}

/**
 * Start-up check: every key matches its stored check value, and every key that still seals a
 * credential is in the keyring (production refuses to start otherwise; development warns).
 */
export async function verifyKeyring(db: Db, keyring: Keyring, opts: VerifyKeyringOptions): Promise<void> {
  await recordAndVerifyCheckValues(db, keyring);
  const missing = [...(await credentialsPerKey(db)).keys()].filter((id) => !keyring.has(id));
  if (missing.length > 0) {
    const message = `credentials are sealed under master keys missing from the keyring: ${missing.join(", ")}; those credentials are unusable`;
    if (opts.production) throw new KeyringError(message);
    opts.onWarning?.(message);
  }
}
