/**
 * Fresh, migrated databases for tests.
 *
 * - freshSqlite(): a new SQLite file in a temp dir; close() disconnects and removes the dir.
 * - freshPostgres(): a new database `portico_test_<random>` on PORTICO_TEST_PG_URL (default
 *   postgresql://postgres@127.0.0.1:5432/postgres, trust auth); close() disconnects and drops it.
 *   If PostgreSQL is unreachable this REJECTS (the suite fails, it is never skipped): CI runs it.
 *
 * `dbProviders` is for `describe.each(dbProviders)("… (%s)", (provider, fresh) => …)`; inside, prefer
 * `const h = useDatabase(fresh)` over a bare beforeAll, so an unreachable PostgreSQL fails every test.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll } from "vitest";
import { openDatabase, redactDatabaseUrl, type DatabaseHandle, type OpenDatabaseOptions } from "../../src/db/client.js";

export const DEFAULT_TEST_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres";

/** The maintenance connection URL test databases are created from. */
export function testPgAdminUrl(): string {
  return process.env["PORTICO_TEST_PG_URL"] || DEFAULT_TEST_PG_URL;
}

type FreshOptions = Pick<OpenDatabaseOptions, "migrate" | "poolSize" | "busyTimeoutMs">;

export async function freshSqlite(opts: FreshOptions = {}): Promise<DatabaseHandle> {
  const dir = mkdtempSync(join(tmpdir(), "portico-test-"));
  try {
    const handle = await openDatabase({ dataDir: join(dir, "data"), ...opts });
    return withCleanup(handle, async () => rmSync(dir, { recursive: true, force: true }));
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** Creates an empty database and returns its URL plus a dropper (used by freshPostgres and tests). */
export async function createTestPgDatabase(): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const adminUrl = testPgAdminUrl();
  const name = `portico_test_${randomBytes(6).toString("hex")}`;
  await withAdmin(adminUrl, (c) => c.query(`CREATE DATABASE "${name}"`));
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    name,
    drop: () => withAdmin(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => undefined),
  };
}

export async function freshPostgres(opts: FreshOptions = {}): Promise<DatabaseHandle> {
  const tmp = await createTestPgDatabase();
  try {
    const handle = await openDatabase({ databaseUrl: tmp.url, dataDir: tmpdir(), poolSize: 4, ...opts });
    return withCleanup(handle, tmp.drop);
  } catch (err) {
    await tmp.drop().catch(() => undefined);
    throw err;
  }
}

export const dbProviders = [
  ["sqlite", freshSqlite],
  ["postgresql", freshPostgres],
] as const;

function withCleanup(handle: DatabaseHandle, cleanup: () => Promise<void>): DatabaseHandle {
  let closing: Promise<void> | undefined;
  return {
    ...handle,
    close: () => (closing ??= handle.close().finally(cleanup)),
  };
}

async function withAdmin<T>(adminUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 5000 });
  client.on("error", () => undefined);
  try {
    await client.connect();
  } catch (err) {
    throw new Error(
      `PostgreSQL is not reachable at ${redactDatabaseUrl(adminUrl)} (set PORTICO_TEST_PG_URL): ${(err as Error).message}`,
      { cause: err },
    );
  }
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Creates a resource once per suite (beforeAll) and disposes it (afterAll), returning an accessor.
 * If creation fails (e.g. PostgreSQL is down), every test that uses the accessor FAILS with that
 * error. (A throwing beforeAll would only mark the tests as skipped, which a CI summary that counts
 * "N passed, N failed" would not notice.)
 */
export function setupOnce<T>(create: () => Promise<T>, dispose: (value: T) => Promise<void>): () => T {
  let state: { ok: true; value: T } | { ok: false; error: unknown } | undefined;
  beforeAll(async () => {
    try {
      state = { ok: true, value: await create() };
    } catch (error) {
      state = { ok: false, error };
    }
  });
  afterAll(async () => {
    if (state?.ok) await dispose(state.value);
  });
  return () => {
    if (!state) throw new Error("setupOnce: accessed outside a test");
    if (!state.ok) throw state.error;
    return state.value;
  };
}

/** `const db = useDatabase(freshPostgres)` in a describe block; `db().db.user…` in tests. */
export function useDatabase(fresh: () => Promise<DatabaseHandle>): () => DatabaseHandle {
  return setupOnce(fresh, (h) => h.close());
}
