import { appendFileSync, cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openDatabase, type DbProvider } from "../../../src/db/client.js";
import {
  loadMigrations,
  migrationsDirFor,
  MigrationChecksumError,
  MigrationFailedError,
  runMigrations,
} from "../../../src/db/migrate.js";
import { createTestPgDatabase, freshPostgres, freshSqlite, setupOnce } from "../../helpers/db.js";
import { runNode, runPrisma, schemaDirFor } from "../../helpers/prisma-cli.js";

interface MigrationRow {
  id: string;
  checksum: string;
  finished_at: unknown;
  migration_name: string;
  logs: string | null;
  rolled_back_at: unknown;
  started_at: unknown;
  applied_steps_count: number | bigint;
}

/** An empty (never migrated) database of the given provider, plus its disposal. */
interface EmptyDb {
  url: string;
  rows(): Promise<MigrationRow[]>;
  exec(sql: string): Promise<void>;
  dispose(): Promise<void>;
}

async function emptyDb(provider: DbProvider): Promise<EmptyDb> {
  if (provider === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "portico-migrate-"));
    const path = join(dir, "test.db");
    const withDb = <T>(fn: (db: Database.Database) => T): T => {
      const db = new Database(path);
      try {
        return fn(db);
      } finally {
        db.close();
      }
    };
    return {
      url: `file:${path}`,
      rows: async () =>
        withDb((db) => db.prepare(`SELECT * FROM "_prisma_migrations" ORDER BY migration_name`).all() as MigrationRow[]),
      exec: async (sql) => withDb((db) => void db.exec(sql)),
      dispose: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const tmp = await createTestPgDatabase();
  const withDb = async <T>(fn: (c: pg.Client) => Promise<T>): Promise<T> => {
    const c = new pg.Client({ connectionString: tmp.url });
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end();
    }
  };
  return {
    url: tmp.url,
    rows: () =>
      withDb(async (c) => (await c.query<MigrationRow>(`SELECT * FROM "_prisma_migrations" ORDER BY migration_name`)).rows),
    exec: (sql) => withDb(async (c) => void (await c.query(sql))),
    dispose: tmp.drop,
  };
}

const providers: DbProvider[] = ["sqlite", "postgresql"];
const childScript = fileURLToPath(new URL("../../helpers/migrate-child.ts", import.meta.url));

describe.each(providers)("migration runner (%s)", (provider) => {
  const migrations = loadMigrations(migrationsDirFor(provider));
  const shared = setupOnce(() => emptyDb(provider), (d) => d.dispose());
  let db: EmptyDb;
  beforeEach(() => {
    db = shared(); // throws (fails the test) when the database could not be created
  });

  it("applies every migration and records Prisma-compatible rows", async () => {
    const result = await runMigrations({ provider, url: db.url });
    expect(result).toEqual({ applied: migrations.map((m) => m.name), alreadyApplied: [], unknown: [] });

    const rows = await db.rows();
    expect(rows.map((r) => r.migration_name)).toEqual(migrations.map((m) => m.name));
    for (const [i, row] of rows.entries()) {
      expect(row.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(row.checksum).toBe(migrations[i]?.checksum);
      expect(row.checksum).toMatch(/^[0-9a-f]{64}$/);
      expect(row.finished_at).not.toBeNull();
      expect(row.started_at).not.toBeNull();
      expect(row.logs).toBeNull();
      expect(row.rolled_back_at).toBeNull();
      expect(Number(row.applied_steps_count)).toBe(1);
    }
  });

  it("is a no-op when run again", async () => {
    const before = await db.rows();
    const result = await runMigrations({ provider, url: db.url });
    expect(result).toEqual({ applied: [], alreadyApplied: migrations.map((m) => m.name), unknown: [] });
    expect(await db.rows()).toEqual(before);
  });

  it("agrees with `prisma migrate status`", async () => {
    const r = await runPrisma(provider, ["migrate", "status"], { DATABASE_URL: db.url });
    expect(r.stdout + r.stderr).toContain("Database schema is up to date!");
    expect(r.code).toBe(0);
  });

  it("keeps the migration history in sync with the schema (`prisma migrate diff --exit-code`)", async () => {
    const shadow = provider === "postgresql" ? await createTestPgDatabase() : undefined;
    try {
      const dir = schemaDirFor(provider);
      const r = await runPrisma(
        provider,
        ["migrate", "diff", "--from-migrations", `${dir}/migrations`, "--to-schema-datamodel", `${dir}/schema.prisma`, "--exit-code"],
        { DATABASE_URL: db.url, ...(shadow ? { SHADOW_DATABASE_URL: shadow.url } : {}) },
      );
      // 0 = no difference, 2 = the migrations do not produce schema.prisma (run `npm run db:regen-init`)
      expect({ code: r.code, out: r.code === 0 ? "" : r.stdout + r.stderr }).toEqual({ code: 0, out: "" });
    } finally {
      await shadow?.drop();
    }
  });

  it("refuses a migration file that changed after it was applied", async () => {
    const dir = mkdtempSync(join(tmpdir(), "portico-migrations-"));
    try {
      cpSync(migrationsDirFor(provider), dir, { recursive: true });
      const first = migrations[0]!.name;
      appendFileSync(join(dir, first, "migration.sql"), "\n-- edited after it shipped\n");
      const attempt = runMigrations({ provider, url: db.url, migrationsDir: dir });
      await expect(attempt).rejects.toBeInstanceOf(MigrationChecksumError);
      await expect(attempt).rejects.toThrow(new RegExp(`Migration "${first}" was modified after it was applied`));
      // Nothing was recorded by the refused run.
      expect((await db.rows()).length).toBe(migrations.length);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses to open a database whose recorded checksum differs", async () => {
    const other = await emptyDb(provider);
    try {
      await runMigrations({ provider, url: other.url });
      await other.exec(`UPDATE "_prisma_migrations" SET checksum = '${"0".repeat(64)}'`);
      await expect(openDatabase({ databaseUrl: other.url, dataDir: tmpdir() })).rejects.toBeInstanceOf(
        MigrationChecksumError,
      );
    } finally {
      await other.dispose();
    }
  });

  it("refuses a migration the Prisma CLI left unfinished", async () => {
    const other = await emptyDb(provider);
    try {
      await runMigrations({ provider, url: other.url });
      await other.exec(`UPDATE "_prisma_migrations" SET finished_at = NULL`);
      await expect(runMigrations({ provider, url: other.url })).rejects.toBeInstanceOf(MigrationFailedError);
    } finally {
      await other.dispose();
    }
  });

  it("reports, without refusing, migrations applied but missing on disk", async () => {
    const other = await emptyDb(provider);
    try {
      await runMigrations({ provider, url: other.url });
      await other.exec(
        `INSERT INTO "_prisma_migrations" (id, checksum, finished_at, migration_name, started_at, applied_steps_count)
         VALUES ('00000000-0000-4000-8000-000000000000', '${"a".repeat(64)}', CURRENT_TIMESTAMP, '99999999999999_future', CURRENT_TIMESTAMP, 1)`,
      );
      const result = await runMigrations({ provider, url: other.url });
      expect(result.unknown).toEqual(["99999999999999_future"]);
      expect(result.applied).toEqual([]);
    } finally {
      await other.dispose();
    }
  });

  /**
   * The real migrations plus a deliberately slow one (~0.5 s), so concurrent runners really overlap:
   * without the advisory lock / BEGIN IMMEDIATE these tests fail (checked by removing them).
   */
  function slowMigrationsDir(): { dir: string; names: string[]; dispose(): void } {
    const dir = mkdtempSync(join(tmpdir(), "portico-slow-migrations-"));
    cpSync(migrationsDirFor(provider), dir, { recursive: true });
    const slow = "99990101000000_slow";
    mkdirSync(join(dir, slow));
    writeFileSync(
      join(dir, slow, "migration.sql"),
      provider === "postgresql"
        ? 'SELECT pg_sleep(0.5);\nCREATE TABLE "SlowProbe" ("id" INTEGER PRIMARY KEY);\n'
        : 'CREATE TABLE "SlowProbe" AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) SELECT count(*) AS n FROM c;\n',
    );
    return { dir, names: [...migrations.map((m) => m.name), slow], dispose: () => rmSync(dir, { recursive: true, force: true }) };
  }

  it("applies once when several runners start at once in one process", async () => {
    const other = await emptyDb(provider);
    const slow = slowMigrationsDir();
    try {
      const results = await Promise.all(
        [1, 2, 3, 4].map(() => runMigrations({ provider, url: other.url, migrationsDir: slow.dir })),
      );
      expect(results.flatMap((r) => r.applied).sort()).toEqual(slow.names);
      expect((await other.rows()).map((r) => r.migration_name)).toEqual(slow.names);
    } finally {
      slow.dispose();
      await other.dispose();
    }
  });

  it("applies once when several processes start at once", async () => {
    const other = await emptyDb(provider);
    const slow = slowMigrationsDir();
    try {
      // All children wait for the same instant, then race.
      const startAt = String(Date.now() + 3000);
      const runs = await Promise.all(
        [1, 2, 3].map(() => runNode(["--import", "tsx", childScript, provider, other.url, startAt, slow.dir])),
      );
      for (const r of runs) expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: "" });
      const results = runs.map((r) => JSON.parse(r.stdout.trim()) as { applied: string[] });
      expect(results.flatMap((r) => r.applied).sort()).toEqual(slow.names);
      expect((await other.rows()).map((r) => r.migration_name)).toEqual(slow.names);
    } finally {
      slow.dispose();
      await other.dispose();
    }
  });
});

describe("migration files", () => {
  it.each(providers)("%s has a migration_lock.toml and only timestamped folders", (provider) => {
    const dir = migrationsDirFor(provider);
    const entries = readdirSync(dir, { withFileTypes: true });
    expect(entries.some((e) => e.isFile() && e.name === "migration_lock.toml")).toBe(true);
    for (const e of entries.filter((x) => x.isDirectory())) expect(e.name).toMatch(/^\d{14}_[a-z0-9_]+$/);
  });
});

// Keep the fresh* helpers exercised here too: they must migrate and be closable twice.
describe.each([
  ["sqlite", freshSqlite],
  ["postgresql", freshPostgres],
] as const)("fresh database helper (%s)", (provider, fresh) => {
  let closeAfter: (() => Promise<void>) | undefined;
  afterEach(async () => closeAfter?.());
  it("returns a migrated database", async () => {
    const h = await fresh();
    closeAfter = h.close;
    expect(h.provider).toBe(provider);
    const result = await runMigrations({ provider, url: h.url });
    expect(result.applied).toEqual([]);
    await h.close();
    await h.close();
  });
});
