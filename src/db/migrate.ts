/**
 * Programmatic migration runner (stack notes §3, option (b)).
 *
 * Prisma 6 has no supported programmatic migrate API, so at start-up we apply
 * `prisma/<provider>/migrations/<name>/migration.sql` ourselves, in name order, each in its own
 * transaction, and record them in `_prisma_migrations` exactly as `prisma migrate deploy` does
 * (same table DDL, uuid id, sha256-hex checksum of the file, timestamps, applied_steps_count 1).
 * `prisma migrate status|deploy --config prisma.<db>.config.ts` therefore agree with this runner.
 *
 * Uses the drivers (better-sqlite3 / pg) directly, not Prisma.
 *
 * Concurrency (two processes starting at once):
 * - PostgreSQL: a session-level advisory lock, the same key `prisma migrate` uses (72707369), so the
 *   runner also serialises with the Prisma CLI. The applied set is read after taking the lock.
 * - SQLite: every migration runs in `BEGIN IMMEDIATE` (takes the write lock up front, waits up to
 *   the busy timeout), and the applied set is re-read inside that transaction.
 *
 * Safety: a migration whose file changed after it was applied (checksum mismatch) is refused with
 * {@link MigrationChecksumError}; a migration that Prisma's CLI recorded as started but never
 * finished is refused with {@link MigrationFailedError}. Migrations applied to the database but
 * missing on disk (e.g. an older build started against a newer database) are reported in
 * `unknown`, not refused, like `prisma migrate deploy`.
 */
import { createHash, randomUUID } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { DbProvider } from "./client.js";
import { sqliteDateTime } from "./sql-values.js";

/** One migration folder on disk. */
export interface MigrationFile {
  /** Folder name, e.g. `20261122030249_init`; also `_prisma_migrations.migration_name`. */
  name: string;
  /** Contents of `migration.sql`. */
  sql: string;
  /** sha256 hex of the raw bytes of `migration.sql` (what Prisma stores). */
  checksum: string;
}

export interface RunMigrationsOptions {
  provider: DbProvider;
  /** `file:/abs/path.db` (or a plain path) for SQLite, `postgres(ql)://…` for PostgreSQL. */
  url: string;
  /** Defaults to {@link migrationsDirFor}(provider). */
  migrationsDir?: string;
  /** SQLite only: how long to wait for another process's write lock. Default 60000 ms. */
  busyTimeoutMs?: number;
}

export interface RunMigrationsResult {
  /** Migrations applied by this call, in order. */
  applied: string[];
  /** Migrations that were already applied (checksums verified). */
  alreadyApplied: string[];
  /** Applied in the database but not present on disk. */
  unknown: string[];
}

/** A migration file changed after it was applied. Never auto-fixed: start-up must stop. */
export class MigrationChecksumError extends Error {
  override readonly name = "MigrationChecksumError";
  constructor(
    readonly migration: string,
    readonly expected: string,
    readonly actual: string,
  ) {
    super(
      `Migration "${migration}" was modified after it was applied to the database ` +
        `(checksum in _prisma_migrations ${expected}, file ${actual}). Restore the original ` +
        `migration.sql; put schema changes in a new migration. (During development, before ` +
        `anything shipped: recreate the database.)`,
    );
  }
}

/** `_prisma_migrations` holds an unfinished, not rolled back row (a failed `prisma migrate deploy`). */
export class MigrationFailedError extends Error {
  override readonly name = "MigrationFailedError";
  constructor(readonly migration: string) {
    super(
      `Migration "${migration}" is recorded as started but not finished in _prisma_migrations ` +
        `(a failed run of the Prisma CLI). Fix the database by hand, then mark it with ` +
        `\`prisma migrate resolve --applied|--rolled-back ${migration} --config prisma.<db>.config.ts\`.`,
    );
  }
}

/** Prisma's own advisory lock key (schema-engine postgres connector). */
const PG_ADVISORY_LOCK_KEY = 72707369;

/** Exactly the DDL `prisma migrate` uses, so the CLI accepts a table created by us. */
const PG_CREATE_TABLE = `CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;

const SQLITE_CREATE_TABLE = `CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    TEXT PRIMARY KEY NOT NULL,
    "checksum"              TEXT NOT NULL,
    "finished_at"           DATETIME,
    "migration_name"        TEXT NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        DATETIME,
    "started_at"            DATETIME NOT NULL DEFAULT current_timestamp,
    "applied_steps_count"   INTEGER UNSIGNED NOT NULL DEFAULT 0
)`;

interface AppliedRow {
  migration_name: string;
  checksum: string;
  finished_at: unknown;
  rolled_back_at: unknown;
}

/** `prisma/sqlite/migrations` or `prisma/postgres/migrations` of this checkout. */
export function migrationsDirFor(provider: DbProvider): string {
  const dir = provider === "postgresql" ? "postgres" : "sqlite";
  return fileURLToPath(new URL(`../../prisma/${dir}/migrations`, import.meta.url));
}

/** Reads every `<dir>/<name>/migration.sql`, sorted by folder name (Prisma's order). */
export function loadMigrations(migrationsDir: string): MigrationFile[] {
  if (!existsSync(migrationsDir)) throw new Error(`migrations directory not found: ${migrationsDir}`);
  const migrations = readdirSync(migrationsDir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && existsSync(join(migrationsDir, e.name, "migration.sql")))
    .map((e) => e.name)
    .sort()
    .map((name) => {
      const bytes = readFileSync(join(migrationsDir, name, "migration.sql"));
      return { name, sql: bytes.toString("utf8"), checksum: createHash("sha256").update(bytes).digest("hex") };
    });
  if (migrations.length === 0) throw new Error(`no migrations found in ${migrationsDir}`);
  return migrations;
}

/** Applies pending migrations; returns what it did. Idempotent and safe to run concurrently. */
export async function runMigrations(opts: RunMigrationsOptions): Promise<RunMigrationsResult> {
  const migrations = loadMigrations(opts.migrationsDir ?? migrationsDirFor(opts.provider));
  return opts.provider === "postgresql"
    ? runPostgres(opts.url, migrations)
    : runSqlite(opts.url, migrations, opts.busyTimeoutMs ?? 60_000);
}

/**
 * Decides what to do with `migrations` given the rows of `_prisma_migrations`. Throws on a changed
 * checksum or a failed row; returns the migrations that still need applying.
 */
function plan(
  migrations: MigrationFile[],
  rows: AppliedRow[],
): { pending: MigrationFile[]; alreadyApplied: string[]; unknown: string[] } {
  const live = rows.filter((r) => r.rolled_back_at === null || r.rolled_back_at === undefined);
  for (const r of live) {
    if (r.finished_at === null || r.finished_at === undefined) throw new MigrationFailedError(r.migration_name);
  }
  const applied = new Map(live.map((r) => [r.migration_name, r.checksum]));
  const pending: MigrationFile[] = [];
  const alreadyApplied: string[] = [];
  for (const m of migrations) {
    const checksum = applied.get(m.name);
    if (checksum === undefined) {
      pending.push(m);
    } else if (checksum !== m.checksum) {
      throw new MigrationChecksumError(m.name, checksum, m.checksum);
    } else {
      alreadyApplied.push(m.name);
    }
  }
  const onDisk = new Set(migrations.map((m) => m.name));
  const unknown = [...applied.keys()].filter((n) => !onDisk.has(n)).sort();
  return { pending, alreadyApplied, unknown };
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

async function runPostgres(url: string, migrations: MigrationFile[]): Promise<RunMigrationsResult> {
  const { default: pg } = await import("pg");
  const client = new pg.Client({ connectionString: url, application_name: "portico-migrate" });
  // Failures surface as rejected queries; without a listener an idle-connection error would crash.
  client.on("error", () => undefined);
  await client.connect();
  try {
    // Quiet the NOTICEs of CREATE ... IF NOT EXISTS.
    await client.query("SET client_min_messages = warning");
    await client.query("SELECT pg_advisory_lock($1)", [PG_ADVISORY_LOCK_KEY]);
    try {
      await client.query(PG_CREATE_TABLE);
      const { rows } = await client.query<AppliedRow>(
        `SELECT migration_name, checksum, finished_at, rolled_back_at FROM "_prisma_migrations"`,
      );
      const { pending, alreadyApplied, unknown } = plan(migrations, rows);
      const applied: string[] = [];
      for (const m of pending) {
        const startedAt = new Date();
        await client.query("BEGIN");
        try {
          await client.query(m.sql); // simple query protocol: multi-statement scripts are fine
          await client.query(
            `INSERT INTO "_prisma_migrations"
               (id, checksum, finished_at, migration_name, logs, rolled_back_at, started_at, applied_steps_count)
             VALUES ($1, $2, clock_timestamp(), $3, NULL, NULL, $4, 1)`,
            [randomUUID(), m.checksum, m.name, startedAt],
          );
          await client.query("COMMIT");
        } catch (err) {
          await client.query("ROLLBACK").catch(() => undefined);
          throw new Error(`migration "${m.name}" failed: ${errorMessage(err)}`, { cause: err });
        }
        applied.push(m.name);
      }
      return { applied, alreadyApplied, unknown };
    } finally {
      await client.query("SELECT pg_advisory_unlock($1)", [PG_ADVISORY_LOCK_KEY]).catch(() => undefined);
    }
  } finally {
    await client.end().catch(() => undefined);
  }
}

// ---------------------------------------------------------------------------------------------
// SQLite

export function sqlitePathFromUrl(url: string): string {
  const path = url.replace(/^file:/, "").replace(/\?.*$/, "");
  if (path === "" || path === ":memory:") throw new Error("an in-memory SQLite database cannot be migrated");
  return path;
}

/**
 * `PRAGMA journal_mode = WAL` on a file still in rollback mode needs the file to itself, and SQLite answers
 * SQLITE_BUSY at once (the busy timeout does not apply) when another process is switching it too, as happens
 * when several processes start on a new data folder together: retried until `timeoutMs`.
 */
async function enableWal(db: { pragma(sql: string): unknown }, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      db.pragma("journal_mode = WAL");
      return;
    } catch (err) {
      if ((err as { code?: unknown }).code !== "SQLITE_BUSY" || Date.now() >= until) throw err;
      await new Promise((r) => setTimeout(r, 10 + Math.random() * 20));
    }
  }
}

async function runSqlite(url: string, migrations: MigrationFile[], busyTimeoutMs: number): Promise<RunMigrationsResult> {
  const { default: Database } = await import("better-sqlite3");
  const db = new Database(sqlitePathFromUrl(url), { timeout: busyTimeoutMs });
  try {
    // Persistent in the file; the application connection sets it too.
    await enableWal(db, busyTimeoutMs);
    // Off while migrating (a no-op inside a transaction, hence here): Prisma's SQLite "redefine
    // table" migrations DROP and recreate tables, which with enforcement on would run ON DELETE
    // actions. Integrity is checked with foreign_key_check before each commit instead.
    db.pragma("foreign_keys = OFF");

    const applied: string[] = [];
    let alreadyApplied: string[] = [];
    let unknown: string[] = [];
    // One transaction per migration; state re-read under the write lock each time, so a
    // concurrent runner that got there first is seen and skipped.
    for (;;) {
      db.exec("BEGIN IMMEDIATE");
      try {
        db.exec(SQLITE_CREATE_TABLE);
        const rows = db
          .prepare(`SELECT migration_name, checksum, finished_at, rolled_back_at FROM "_prisma_migrations"`)
          .all() as AppliedRow[];
        const p = plan(migrations, rows);
        const next = p.pending[0];
        if (!next) {
          db.exec("COMMIT");
          alreadyApplied = p.alreadyApplied.filter((n) => !applied.includes(n));
          unknown = p.unknown;
          break;
        }
        const startedAt = new Date();
        try {
          db.exec(next.sql);
          const violations = db.pragma("foreign_key_check") as unknown[];
          if (violations.length > 0) {
            throw new Error(`foreign key check failed after the migration: ${JSON.stringify(violations.slice(0, 5))}`);
          }
        } catch (err) {
          throw new Error(`migration "${next.name}" failed: ${errorMessage(err)}`, { cause: err });
        }
        db.prepare(
          `INSERT INTO "_prisma_migrations"
             (id, checksum, finished_at, migration_name, logs, rolled_back_at, started_at, applied_steps_count)
           VALUES (?, ?, ?, ?, NULL, NULL, ?, 1)`,
        ).run(randomUUID(), next.checksum, sqliteDateTime(new Date()), next.name, sqliteDateTime(startedAt));
        db.exec("COMMIT");
        applied.push(next.name);
      } catch (err) {
        if (db.inTransaction) db.exec("ROLLBACK");
        throw err;
      }
    }
    return { applied, alreadyApplied, unknown };
  } finally {
    db.close();
  }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
