/**
 * `portico admin byok …`: master keyring operations.
 *
 * - `rotate-keys [--new-key-id <id>]` re-encrypts every credential under the primary key (after
 *   making <id> the primary of a file-managed keyring, generating it if new), then retires keys that
 *   no longer seal anything. Idempotent and resumable: run it again after an interruption.
 * - `keyring-status` shows key ids, the primary and how many credentials each key seals.
 * - `verify` opens every credential and reports the unusable ones (by id; never a key).
 * Key material is never printed.
 */
import { randomBytes } from "node:crypto";
import type { Command } from "commander";
import type { Config } from "../config.js";
import { CredentialUnusableError, decryptCredentialKey, type SealedCredentialRow } from "../core/byok/credential-crypto.js";
import { loadKeyring, MASTER_KEY_BYTES, type Keyring } from "../core/byok/keyring.js";
import { providerKeySealedRow } from "../core/byok/provider-keys.js";
import { credentialsPerKey, recordAndVerifyCheckValues } from "../core/byok/keyring-store.js";
import { promoteKey, reencryptCredentials, retireUnusedKeys } from "../core/byok/rotation.js";
import type { AdminCommandRegistrar } from "./admin.js";
import { CliError, printJson, withDatabase } from "./shared.js";

export function keyringFor(cfg: Config): Keyring {
  return loadKeyring({
    masterKey: cfg.byok.masterKey,
    masterKeyFile: cfg.byok.masterKeyFile,
    dataDir: cfg.dataDir,
    production: cfg.production,
    refreshIntervalMs: 0,
    onWarning: (m) => process.stderr.write(`warning: ${m}\n`),
  });
}

const positiveInt = (name: string) => (raw: string) => {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new CliError(`${name} must be a non-negative integer`);
  return n;
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const registerByokAdminCommands: AdminCommandRegistrar = (admin: Command, config: () => Config) => {
  const byok = admin.command("byok").description("BYOK master keyring: rotation, status, verification");

  byok
    .command("rotate-keys")
    .description("re-encrypt every BYOK credential under the primary master key and retire unused keys (resumable)")
    .option("--new-key-id <id>", "make this key the primary first (generated if new; file-managed keyrings only)")
    .option("--batch-size <n>", "rows per batch", positiveInt("--batch-size"), 100)
    .option("--pause-ms <n>", "pause between batches, to throttle load", positiveInt("--pause-ms"), 0)
    .option(
      "--grace-ms <n>",
      "after changing the primary, wait this long so running servers pick up the key file",
      positiveInt("--grace-ms"),
      2000,
    )
    .option("--json", "print JSON")
    .action(async (opts: { newKeyId?: string; batchSize: number; pauseMs: number; graceMs: number; json?: boolean }) => {
      const cfg = config();
      const result = await withDatabase(cfg, async (h) => {
        const keyring = keyringFor(cfg);
        await recordAndVerifyCheckValues(h.db, keyring);
        let promoted = false;
        if (opts.newKeyId) {
          promoted = (await promoteKey(h.db, keyring, opts.newKeyId, () => randomBytes(MASTER_KEY_BYTES))).changed;
          if (promoted && opts.graceMs > 0) await sleep(opts.graceMs);
        }
        if (!opts.json) process.stdout.write(`primary key: ${keyring.primaryId}${promoted ? " (new)" : ""}\n`);
        const re = await reencryptCredentials(h.db, keyring, {
          batchSize: opts.batchSize,
          pauseMs: opts.pauseMs,
          onProgress: (p) => {
            if (!opts.json) process.stdout.write(`re-encrypted ${p.reencrypted}, remaining ${p.remaining}\n`);
          },
        });
        const retire = re.unusable.length === 0 && re.remaining === 0 ? await retireUnusedKeys(h.db, keyring) : { retired: [], kept: [] };
        return { primary: re.primaryId, reencrypted: re.reencrypted, raced: re.raced, remaining: re.remaining, unusable: re.unusable, ...retire };
      });
      if (opts.json) printJson(result);
      else {
        process.stdout.write(
          `done: ${result.reencrypted} re-encrypted under ${result.primary}; retired: ${result.retired.join(", ") || "none"}\n`,
        );
        if (result.unusable.length) process.stdout.write(`unusable credentials (left as they are): ${result.unusable.join(", ")}\n`);
      }
      if (result.unusable.length > 0 || result.remaining > 0) process.exitCode = 3;
    });

  byok
    .command("keyring-status")
    .description("list master key ids, the primary, and how many credentials each seals")
    .option("--json", "print JSON")
    .action(async (opts: { json?: boolean }) => {
      const cfg = config();
      const status = await withDatabase(cfg, async (h) => {
        const keyring = keyringFor(cfg);
        const usage = await credentialsPerKey(h.db);
        const stored = await h.db.keyringKey.findMany({ orderBy: { createdAt: "asc" } });
        const ids = new Set([...keyring.keyIds(), ...stored.map((k) => k.id), ...usage.keys()]);
        return {
          source: keyring.source.kind === "file" ? keyring.source.path : "PORTICO_MASTER_KEY",
          primary: keyring.primaryId,
          keys: [...ids].map((id) => ({
            id,
            in_keyring: keyring.has(id),
            retired: (stored.find((k) => k.id === id)?.retiredAt ?? null) !== null,
            credentials: usage.get(id) ?? 0,
          })),
        };
      });
      if (opts.json) printJson(status);
      else {
        process.stdout.write(`keyring: ${status.source}\n`);
        for (const k of status.keys) {
          const flags = [k.id === status.primary ? "primary" : "", k.in_keyring ? "" : "MISSING", k.retired ? "retired" : ""].filter(Boolean);
          process.stdout.write(`${k.id}${flags.length ? ` (${flags.join(", ")})` : ""}: ${k.credentials} credentials\n`);
        }
      }
    });

  byok
    .command("verify")
    .description("open every live credential and shared provider key and report those that are unusable (exit code 3 if any)")
    .option("--json", "print JSON")
    .action(async (opts: { json?: boolean }) => {
      const cfg = config();
      const report = await withDatabase(cfg, async (h) => {
        const keyring = keyringFor(cfg);
        await recordAndVerifyCheckValues(h.db, keyring);
        const unusable: Array<{ id: string; reason: string }> = [];
        let ok = 0;
        const check = (row: SealedCredentialRow) => {
          try {
            decryptCredentialKey(keyring, row);
            ok += 1;
          } catch (err) {
            if (!(err instanceof CredentialUnusableError)) throw err;
            unusable.push({ id: row.id, reason: err.reason });
          }
        };
        let cursor: string | undefined;
        for (;;) {
          const rows = await h.db.byokCredential.findMany({
            where: { deletedAt: null, ...(cursor ? { id: { gt: cursor } } : {}) },
            orderBy: { id: "asc" },
            take: 200,
          });
          if (rows.length === 0) break;
          for (const row of rows) {
            cursor = row.id;
            check(row);
          }
        }
        for (const row of await h.db.providerKey.findMany({ orderBy: { id: "asc" } })) check(providerKeySealedRow(row));
        return { usable: ok, unusable };
      });
      if (opts.json) printJson(report);
      else {
        process.stdout.write(`${report.usable} usable, ${report.unusable.length} unusable\n`);
        for (const u of report.unusable) process.stdout.write(`unusable ${u.id}: ${u.reason}\n`);
      }
      if (report.unusable.length > 0) process.exitCode = 3;
    });
};
