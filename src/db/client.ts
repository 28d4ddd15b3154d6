/**
 * Opens the Portico database: SQLite (default, a file in the data dir) or PostgreSQL (when the
 * database URL is postgres:// or postgresql://), migrated at open time by src/db/migrate.ts.
 *
 * Two Prisma clients are generated (src/generated/sqlite, src/generated/postgres). Their types are
 * not assignable to each other (stack notes §3 "Types"), so the SQLite client type is the canonical
 * {@link Db}: its API is a subset of the PostgreSQL one, and code that compiles against it runs on
 * both. The PostgreSQL client is cast with `as unknown as Db`. Keep provider-specific features out of
 * shared code: Json `path` filters (different syntax) and `mode: "insensitive"` (PG only).
 */
import { existsSync } from "node:fs";
import { ensureDir } from "../lib/dirs.js";
import { ensurePostgresDatabase } from "./ensure-database.js";
import { dirname, resolve } from "node:path";
import type { PrismaClient } from "../generated/sqlite/client.js";
import { runMigrations, sqlitePathFromUrl } from "./migrate.js";
import { createTransactionGate, gateSqliteAdapter } from "./sqlite-transaction-gate.js";
import { sqliteDateTime } from "./sql-values.js";
import { compileOnLiftoff } from "../lib/wasm-liftoff.js";

/** The canonical client type (the SQLite client's; the PG client is cast to it). */
export type Db = PrismaClient;
export type DbProvider = "sqlite" | "postgresql";

export interface DatabaseHandle {
  db: Db;
  provider: DbProvider;
  /** The resolved URL. May contain a password for PostgreSQL: log {@link redactDatabaseUrl}(url). */
  url: string;
  /** Disconnects the client (idempotent). */
  close(): Promise<void>;
  /**
   * Runs one raw SQL statement with positional parameters (`?` on SQLite, `$n` on PostgreSQL) straight on the
   * driver adapter the client uses (the same connection or pool; on SQLite the same transaction gate and
   * write lock), without the Prisma client: `$executeRawUnsafe` compiles every call in the query compiler
   * (no plan cache in 6.19), ~40 µs of CPU per row of a 22-column multi-row INSERT against ~10 µs for SQLite
   * itself (bench/README.md, issue 24). Resolves with the number of rows changed. For hot raw writes only;
   * parameters go to the driver as given (booleans and dates already in the column's stored form).
   */
  executeRaw(sql: string, args: readonly unknown[]): Promise<number>;
  /**
   * Runs one raw read with positional parameters (`?` on SQLite, `$n` on PostgreSQL) past the Prisma client, whose
   * raw queries are compiled by its query compiler on every call (≈ 0.35 ms of CPU for a one-row aggregate read,
   * three times SQLite's own work: bench/README.md, GetCaller). Resolves with the rows, each an array of the
   * columns' values in order. SQLite: on the client's connection, after the same transaction gate as the driver
   * adapter's reads (so never inside another caller's transaction), statements from the client's cache, past the
   * adapter but with its value mappings (TEXT as strings, 64-bit integers as decimal strings, numeric DATETIME as ISO
   * text; a statement that reads nothing goes through the adapter). PostgreSQL: as the named
   * prepared statement `name` on the client's pool (parsed and planned once per pooled connection; `name` must always
   * stand for the same SQL text), values as pg parses them: select times and BIGINTs as text to read them exactly.
   * Errors are the drivers'. For hot reads only.
   */
  queryRaw(name: string, sql: string, args: readonly unknown[]): Promise<unknown[][]>;
  /**
   * SQLite only (undefined on PostgreSQL): runs `run` on the client's better-sqlite3 connection as one transaction,
   * BEGIN IMMEDIATE … COMMIT (rolled back if `run` throws), in turn with the client's transactions and raw writes
   * (the same transaction gate and write lock as {@link executeRaw}: no Prisma transaction is open meanwhile, and
   * SQLite's write lock is awaited on timers while another process holds it, failing with SQLITE_BUSY past the busy
   * timeout). `run` is synchronous, so nothing else runs on the connection until it returns. Statements come from
   * the client's prepared-statement cache and take parameters as stored (no Prisma argument mapping: booleans as
   * 0/1, times as text, BIGINTs as BigInt). For hot writes only (the generation records): errors are the driver's
   * (`code` SQLITE_…), not Prisma's.
   */
  writeSqlite?: <T>(run: (connection: SqliteConnection) => T) => Promise<T>;
  /**
   * PostgreSQL only (undefined on SQLite): runs one statement on the client's pool as a named prepared statement,
   * parsed and planned once per pooled connection under `name` and then only bound and executed (an unnamed one is
   * parsed again each time: for a 50-row INSERT about half its CPU here and in the server). `name` must always
   * stand for the same SQL text. Past the driver adapter: parameters go to pg as given; errors are pg's (`code`
   * SQLSTATE), not Prisma's. Resolves with the number of rows changed. For hot writes only (the generation records).
   */
  executePrepared?: (name: string, sql: string, args: readonly unknown[]) => Promise<number>;
}

/** The better-sqlite3 connection as {@link DatabaseHandle.writeSqlite} lends it. */
export interface SqliteConnection {
  /** A prepared statement for `sql`, from the client's statement cache. */
  prepare(sql: string): SqliteRunStatement;
}

export interface SqliteRunStatement {
  /**
   * Runs the statement with these positional parameters. Pass them as arguments (`run(...params)`): better-sqlite3
   * also takes one array, but reads its elements one by one through V8's object API, ≈ 1.2 µs more per generation
   * record's 42 values (bench/README.md, "Generation records: binding, dates and the record's shape"). Strings,
   * numbers, BigInts, null and Buffers only: a plain object among the arguments would be read as named parameters.
   */
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
  /** The statement with its rows read as arrays (`true`) or objects; `all` returns the rows it yields (e.g. RETURNING). */
  raw(toggle: boolean): { all(...params: unknown[]): unknown[][] };
}

/** The connected driver adapter's raw statement entry point (both Prisma 6.19 adapters have it). */
interface RawExecutor {
  executeRaw(query: { sql: string; args: unknown[]; argTypes: Array<{ scalarType: string; arity: string }> }): Promise<number>;
  queryRaw(query: { sql: string; args: unknown[]; argTypes: Array<{ scalarType: string; arity: string }> }): Promise<{ rows: unknown[][] }>;
}

export interface OpenDatabaseOptions {
  /** postgres://… / postgresql://… → PostgreSQL; file:… → that SQLite file; unset/empty → `${dataDir}/portico.db`. */
  databaseUrl?: string | undefined;
  /** Where the default SQLite file lives; created with mode 0700 if missing. */
  dataDir: string;
  /** Apply pending migrations before returning. Default true. */
  migrate?: boolean;
  /** PostgreSQL connection pool size. Default 10. */
  poolSize?: number;
  /** SQLite busy timeout in ms. Default 5000. */
  busyTimeoutMs?: number;
}

export interface ResolveDatabaseUrlOptions {
  databaseUrl?: string | undefined;
  dataDir: string;
}

const PG_URL = /^postgres(ql)?:\/\//i;

/**
 * Picks the provider from the URL so one setting (DATABASE_URL or a CLI flag) selects the backend.
 * Creates the SQLite file's directory (mode 0700) as a side effect.
 */
export function resolveDatabaseUrl(opts: ResolveDatabaseUrlOptions): { provider: DbProvider; url: string } {
  const raw = opts.databaseUrl?.trim() ?? "";
  if (PG_URL.test(raw)) return { provider: "postgresql", url: raw };
  let path: string;
  if (raw === "") {
    path = resolve(opts.dataDir, "portico.db");
  } else if (raw.startsWith("file:")) {
    path = resolve(sqlitePathFromUrl(raw));
  } else {
    // A typo must not silently fall back to a local SQLite file.
    throw new Error(
      `unsupported database URL scheme "${raw.split(":")[0] ?? ""}:"; use postgresql://…, file:… or leave it unset for SQLite in the data dir`,
    );
  }
  ensurePrivateDir(dirname(path));
  return { provider: "sqlite", url: `file:${path}` };
}

function ensurePrivateDir(dir: string): void {
  if (existsSync(dir)) return;
  ensureDir(dir, { mode: 0o700, setting: "PORTICO_DATA_DIR" });
}

/** Opens (and by default migrates) the database selected by `databaseUrl`. */
export async function openDatabase(opts: OpenDatabaseOptions): Promise<DatabaseHandle> {
  const { provider, url } = resolveDatabaseUrl(opts);
  if (provider === "postgresql" && (opts.migrate ?? true)) await ensurePostgresDatabase(url);
  if (opts.migrate ?? true) await runMigrations({ provider, url });

  const connected: Connected = {};
  // The client compiles Prisma's query-compiler wasm while it is made and connected: on Liftoff only (wasm-liftoff.ts).
  const db = await compileOnLiftoff(async () => {
    const client =
      provider === "postgresql"
        ? await createPgClient(url, opts.poolSize ?? 10, connected)
        : await createSqliteClient(url, opts.busyTimeoutMs ?? 5000, connected);
    try {
      await client.$connect();
    } catch (err) {
      await client.$disconnect().catch(() => undefined);
      throw err;
    }
    return client;
  });
  let closed: Promise<void> | undefined;
  const handle: DatabaseHandle = {
    db,
    provider,
    url,
    close: () => (closed ??= db.$disconnect()),
    executeRaw: async (sql, args) => {
      // The client connects lazily again after a disconnect; the adapter it then opens replaces this one.
      if (!connected.adapter) await db.$connect();
      return connected.adapter!.executeRaw({ sql, args: [...args], argTypes: args.map(() => UNKNOWN_ARG) });
    },
    queryRaw: async (name, sql, args) => {
      if (!connected.queryRaw) await db.$connect();
      return connected.queryRaw!(name, sql, args);
    },
  };
  if (provider === "sqlite") {
    handle.writeSqlite = async (run) => {
      if (!connected.writeSqlite) await db.$connect();
      return connected.writeSqlite!(run);
    };
  }
  if (provider === "postgresql") {
    handle.executePrepared = async (name, sql, args) => {
      if (!connected.executePrepared) await db.$connect();
      return connected.executePrepared!(name, sql, args);
    };
  }
  return handle;
}

/** What the client's driver adapter exposes once it has connected (replaced when it connects again). */
interface Connected {
  adapter?: RawExecutor;
  writeSqlite?: <T>(run: (connection: SqliteConnection) => T) => Promise<T>;
  executePrepared?: (name: string, sql: string, args: readonly unknown[]) => Promise<number>;
  queryRaw?: (name: string, sql: string, args: readonly unknown[]) => Promise<unknown[][]>;
}

const UNKNOWN_ARG = { scalarType: "unknown", arity: "scalar" };

/** The better-sqlite3 statement methods the Prisma adapter uses (`prepare(sql).bind(args)` then these). */
interface SqliteStatement {
  reader: boolean;
  bind(args: unknown[]): SqliteStatement;
  run(...args: unknown[]): unknown;
  columns(): unknown[];
  raw(on?: boolean): SqliteStatement;
  all(...args: unknown[]): unknown[];
}

const STATEMENT_CACHE_SIZE = 256;

/**
 * Two changes to how the adapter prepares statements:
 * - Transactions take SQLite's write lock when they begin (BEGIN IMMEDIATE instead of the adapter's
 *   deferred BEGIN), so a read-then-write transaction cannot fail with SQLITE_BUSY_SNAPSHOT because
 *   another process (an admin command, a second core) wrote in between. The lock is taken without
 *   blocking the event loop: the returned `beginWhenFree` (run by the transaction gate before the
 *   adapter starts a transaction) tries BEGIN IMMEDIATE with no busy timeout and, while another process
 *   holds the lock, retries on timers (1, 2, 4, 8, 8 … ms) up to the busy timeout; the adapter's own
 *   BEGIN then finds the transaction open. better-sqlite3 is synchronous, so waiting in SQLite's busy
 *   handler would stall every request of this process while a `serve` worker next door commits.
 * - Prepared statements are reused (an LRU of {@link STATEMENT_CACHE_SIZE} by SQL text) instead of being
 *   compiled for every query. The adapter binds parameters with `bind()`, which a statement allows only
 *   once, so it gets a facade whose `bind(args)` passes the arguments to each call of the shared statement.
 *   Statements are never iterated, so one is never busy when it is used again.
 */
function reuseStatements(
  adapter: unknown,
  busyTimeoutMs: number,
): SqliteWriteLock & { connection: SqliteConnection; read(sql: string, args: readonly unknown[]): unknown[][] | undefined } {
  const driver = (adapter as { client?: { prepare: (sql: string) => SqliteStatement } }).client;
  if (!driver || typeof driver.prepare !== "function") {
    throw new Error("SQLite adapter internals changed: cannot make transactions immediate");
  }
  const prepare = driver.prepare.bind(driver);
  const cache = new Map<string, SqliteStatement>();
  const statement = (sql: string): SqliteStatement => {
    let st = cache.get(sql);
    if (st) {
      cache.delete(sql);
    } else {
      st = prepare(sql);
      if (cache.size >= STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value!);
    }
    cache.set(sql, st);
    return st;
  };
  const bound = (st: SqliteStatement, args: unknown[]): SqliteStatement =>
    ({
      reader: st.reader,
      bind: () => {
        throw new TypeError("bind() can only be invoked once per statement");
      },
      run: () => st.run(args),
      columns: () => st.columns(),
      raw: () => ({ all: () => st.raw(true).all(args) }),
      all: () => st.raw(false).all(args),
    }) as unknown as SqliteStatement;
  const beginImmediate = prepare("BEGIN IMMEDIATE");
  const rollback = prepare("ROLLBACK");
  // Not prepared once: SQLite applies busy_timeout when the PRAGMA is compiled, not when it is run.
  const exec = (driver as unknown as { exec(sql: string): void }).exec.bind(driver);
  const noWait = () => exec("PRAGMA busy_timeout = 0");
  const wait = () => exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
  /** beginWhenFree opened the transaction the adapter is about to BEGIN. */
  let begun = false;
  const begin = {
    reader: false,
    run: () => {
      if (!begun) return beginImmediate.run();
      begun = false;
      return { changes: 0, lastInsertRowid: 0 };
    },
  };
  driver.prepare = (sql: string) => {
    if (sql === "BEGIN") return { ...begin, bind: () => begin } as unknown as SqliteStatement;
    const st = statement(sql);
    return { ...bound(st, []), bind: (args: unknown[]) => bound(st, args) } as SqliteStatement;
  };
  const commit = prepare("COMMIT");
  const inTransaction = () => (driver as unknown as { inTransaction: boolean }).inTransaction;
  /** BEGIN IMMEDIATE once the lock is free; false past the busy timeout (the caller then blocks as before). */
  const takeLock = async (): Promise<boolean> => {
    const deadline = Date.now() + busyTimeoutMs;
    for (let delay = 1; ; delay = Math.min(delay * 2, 8)) {
      noWait();
      try {
        beginImmediate.run();
        return true;
      } catch (err) {
        if (!String((err as { code?: unknown }).code).startsWith("SQLITE_BUSY")) throw err;
      } finally {
        wait();
      }
      if (Date.now() >= deadline) return false;
      await new Promise((r) => setTimeout(r, delay));
    }
  };
  /** Each read statement's column conversions (from its declared types, fixed once it is prepared). */
  const conversions = new WeakMap<SqliteStatement, Uint8Array>();
  return {
    connection: { prepare: statement as (sql: string) => unknown as SqliteConnection["prepare"] },
    read(sql, args) {
      const st = statement(sql);
      if (!st.reader) return undefined;
      let convert = conversions.get(st);
      if (!convert) {
        convert = columnConversions(st.columns() as Array<{ type: string | null }>);
        conversions.set(st, convert);
      }
      const rows = st.raw(true).all(args.map(sqliteArg)) as unknown[][];
      let types = convert;
      if (convert.includes(FROM_VALUES)) {
        // As the adapter types a column without a known declared type: from its first non-null value in the rows.
        types = convert.slice();
        for (let i = 0; i < types.length; i++) {
          if (types[i] !== FROM_VALUES) continue;
          const first = rows.find((r) => r[i] !== null)?.[i];
          // A BLOB there makes the adapter throw (a Buffer is no ArrayBuffer): left to it.
          if (first !== null && typeof first === "object") return undefined;
          types[i] = first === undefined || typeof first === "bigint" ? INTEGER : AS_READ;
        }
      }
      for (const row of rows) convertRow(row, types);
      return rows;
    },
    async beginWhenFree() {
      if (await takeLock()) {
        begun = true;
        return;
      }
      // Past the deadline, wait the busy timeout once more and fail here, before the adapter's BEGIN: the
      // adapter (6.19) takes its transaction mutex first and never releases it when BEGIN throws, so one
      // SQLITE_BUSY there would leave every later transaction of the process waiting for ever.
      beginImmediate.run();
      begun = true;
    },
    abandon() {
      if (!begun) return;
      begun = false;
      if (inTransaction()) rollback.run();
    },
    async write(run) {
      if (!(await takeLock())) return run();
      try {
        const result = await run();
        commit.run();
        return result;
      } finally {
        // The statement or the COMMIT failed (SQLite may already have rolled back): never leave it open.
        if (inTransaction()) rollback.run();
      }
    },
    async transact(run) {
      // Past the busy timeout, BEGIN IMMEDIATE waits it once more in SQLite's busy handler and fails with SQLITE_BUSY.
      if (!(await takeLock())) beginImmediate.run();
      try {
        const result = run();
        commit.run();
        return result;
      } finally {
        if (inTransaction()) rollback.run();
      }
    },
  };
}

/** A column's conversion on the direct read path: none, an integer column's, a date-time column's, from the values read. */
const AS_READ = 0;
const INTEGER = 1;
const DATE_TIME = 2;
const FROM_VALUES = 3;

/**
 * What Prisma's better-sqlite3 adapter (6.19) does to a column's values, from the column's declared type (its
 * `mapDeclType`): INT… columns are integers, DATETIME/TIMESTAMP date-times, the other types it knows pass as read,
 * and a column without a declared type, or of a type it does not know, is typed from its first non-null value in
 * the rows (a BigInt makes it an integer column; all null, too).
 */
function columnConversions(columns: ReadonlyArray<{ type: string | null }>): Uint8Array {
  const out = new Uint8Array(columns.length);
  columns.forEach((c, i) => {
    switch (c.type?.toUpperCase()) {
      case "TINYINT":
      case "SMALLINT":
      case "MEDIUMINT":
      case "INT":
      case "INTEGER":
      case "SERIAL":
      case "INT2":
      case "BIGINT":
      case "UNSIGNED BIG INT":
      case "INT8":
        out[i] = INTEGER;
        break;
      case "DATETIME":
      case "TIMESTAMP":
        out[i] = DATE_TIME;
        break;
      case "DECIMAL":
      case "FLOAT":
      case "DOUBLE":
      case "DOUBLE PRECISION":
      case "NUMERIC":
      case "REAL":
      case "TIME":
      case "DATE":
      case "TEXT":
      case "CLOB":
      case "CHARACTER":
      case "VARCHAR":
      case "VARYING CHARACTER":
      case "NCHAR":
      case "NATIVE CHARACTER":
      case "NVARCHAR":
      case "BLOB":
      case "BOOLEAN":
      case "JSONB":
        out[i] = AS_READ;
        break;
      default:
        out[i] = FROM_VALUES;
    }
  });
  return out;
}

/** The adapter's `mapRow`, in place: bytes as arrays of numbers, BigInts as decimal text, numeric date-times as ISO text. */
function convertRow(row: unknown[], convert: Uint8Array): void {
  for (let i = 0; i < row.length; i++) {
    const value = row[i];
    if (value === null || typeof value === "string") continue;
    if (value instanceof ArrayBuffer || value instanceof Buffer) row[i] = Array.from(new Uint8Array(value));
    else if (typeof value === "number" && convert[i] === INTEGER && !Number.isInteger(value)) row[i] = Math.trunc(value);
    else if ((typeof value === "number" || typeof value === "bigint") && convert[i] === DATE_TIME) row[i] = new Date(Number(value)).toISOString();
    else if (typeof value === "bigint") row[i] = value.toString();
  }
}

/** The adapter's `mapArg` for a parameter of unknown type: booleans as 0/1, dates as ISO 8601 text (its default format). */
function sqliteArg(arg: unknown): unknown {
  if (typeof arg === "boolean") return arg ? 1 : 0;
  if (arg instanceof Date) return sqliteDateTime(arg);
  return arg;
}

/** Takes SQLite's write lock without blocking the event loop (see reuseStatements). */
export interface SqliteWriteLock {
  /** Before a transaction starts: the adapter's BEGIN then finds the transaction open. */
  beginWhenFree(): Promise<void>;
  /** Rolls back a transaction beginWhenFree opened if the adapter then failed to start it. */
  abandon(): void;
  /** Runs one writing statement made outside a transaction as BEGIN IMMEDIATE … COMMIT, the lock taken first. */
  write<T>(run: () => Promise<T>): Promise<T>;
  /** Runs synchronous statements as one BEGIN IMMEDIATE … COMMIT, the lock taken first; rolled back if `run` throws. */
  transact<T>(run: () => T): Promise<T>;
}

async function createSqliteClient(url: string, busyTimeoutMs: number, connected: Connected): Promise<Db> {
  const [{ PrismaClient: SqliteClient }, { PrismaBetterSQLite3 }] = await Promise.all([
    import("../generated/sqlite/client.js"),
    import("@prisma/adapter-better-sqlite3"),
  ]);

  /** Applies the connection pragmas to every connection the client opens. */
  class PrismaBetterSQLite3WithPragmas extends PrismaBetterSQLite3 {
    override async connect(): ReturnType<InstanceType<typeof PrismaBetterSQLite3>["connect"]> {
      const adapter = await super.connect();
      await adapter.executeScript(
        [
          "PRAGMA journal_mode = WAL",
          `PRAGMA busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`,
          "PRAGMA foreign_keys = ON",
          "PRAGMA synchronous = NORMAL",
          // Deleted rows (e.g. wiped BYOK ciphertext) are overwritten, not left in free pages.
          "PRAGMA secure_delete = ON",
          // Statement journals and sorts in memory: a multi-row INSERT inside a transaction (the generation records'
          // flush) otherwise spills its statement journal to a file in /var/tmp, created and unlinked per flush.
          "PRAGMA temp_store = MEMORY",
        ].join(";\n"),
      );
      const lock = reuseStatements(adapter, busyTimeoutMs);
      const gate = createTransactionGate();
      const gated = gateSqliteAdapter(adapter, lock, gate);
      connected.adapter = gated as unknown as RawExecutor;
      const raw = connected.adapter;
      connected.queryRaw = async (_name, sql, args) => {
        // As the gated adapter's reads (the check and the statement in one synchronous step), on the client's
        // statement cache, past the adapter's per-call work (its debug call, the statement's columns and their types
        // read again, a promise per layer): ≈ 2× the cost of the key's spend read (bench/README.md, GET /api/v1/key).
        while (gate.busy) await gate.whenIdle();
        return lock.read(sql, args) ?? (await raw.queryRaw({ sql, args: [...args], argTypes: args.map(() => UNKNOWN_ARG) })).rows;
      };
      connected.writeSqlite = async (run) => {
        const release = await gate.acquire();
        try {
          return await lock.transact(() => run(lock.connection));
        } finally {
          release();
        }
      };
      return gated;
    }
  }

  const adapter = new PrismaBetterSQLite3WithPragmas({ url, timeout: busyTimeoutMs });
  return new SqliteClient({ adapter });
}

async function createPgClient(url: string, poolSize: number, connected: Connected): Promise<Db> {
  const [{ PrismaClient: PgClient }, { PrismaPg }] = await Promise.all([
    import("../generated/postgres/client.js"),
    import("@prisma/adapter-pg"),
  ]);
  /** Keeps the pool-backed adapter the client connects, for {@link DatabaseHandle.executeRaw}. */
  class PrismaPgKept extends PrismaPg {
    override async connect(): ReturnType<InstanceType<typeof PrismaPg>["connect"]> {
      const adapter = await super.connect();
      connected.adapter = adapter as unknown as RawExecutor;
      const pool = (
        adapter as unknown as {
          client: { query(q: { name: string; text: string; values: unknown[]; rowMode?: "array" }): Promise<{ rowCount: number | null; rows: unknown[] }> };
        }
      ).client;
      connected.executePrepared = async (name, sql, args) => (await pool.query({ name, text: sql, values: args as unknown[] })).rowCount ?? 0;
      connected.queryRaw = async (name, sql, args) => (await pool.query({ name, text: sql, values: args as unknown[], rowMode: "array" })).rows as unknown[][];
      return adapter;
    }
  }
  const adapter = new PrismaPgKept({ connectionString: url, max: poolSize });
  return new PgClient({ adapter }) as unknown as Db;
}

/**
 * True for a unique-constraint violation on either provider, so callers can map "already exists"
 * without knowing the backend: P2002 from model queries, and P2010 whose driver adapter error is a
 * UniqueConstraintViolation from `$executeRaw`/`$queryRaw`. Duck-typed: both generated clients share
 * one runtime, but an error may also cross module instances (e.g. vitest).
 */
export function isUniqueViolation(err: unknown): boolean {
  const code = prismaErrorCode(err);
  if (code === "P2002") return true;
  return code === "P2010" && driverAdapterCause(err)?.kind === "UniqueConstraintViolation";
}

interface DriverAdapterCause {
  kind?: unknown;
  constraint?: { fields?: unknown };
}

function driverAdapterCause(err: unknown): DriverAdapterCause | undefined {
  const meta = (err as { meta?: Record<string, unknown> } | null)?.meta;
  return (meta?.["driverAdapterError"] as { cause?: DriverAdapterCause } | undefined)?.cause;
}

/**
 * The columns of the violated unique constraint, e.g. `["workspaceId", "slug"]`. With driver adapters
 * `err.meta.target` is absent; the fields are in `meta.driverAdapterError.cause.constraint.fields`.
 */
export function uniqueViolationFields(err: unknown): string[] | undefined {
  if (!isUniqueViolation(err)) return undefined;
  const target = (err as { meta?: Record<string, unknown> }).meta?.["target"];
  if (Array.isArray(target)) return target.map(String);
  const fields = driverAdapterCause(err)?.constraint?.fields;
  // adapter-pg 6.19 keeps PostgreSQL's identifier quoting ("\"organizationId\"", slug); strip it.
  return Array.isArray(fields) ? fields.map((f) => String(f).replace(/^"(.*)"$/, "$1")) : undefined;
}

function prismaErrorCode(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const e = err as { name?: unknown; code?: unknown };
  return e.name === "PrismaClientKnownRequestError" && typeof e.code === "string" ? e.code : undefined;
}

/** The URL with any password replaced by `***`, for logs. */
export function redactDatabaseUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@?#]*):[^@/?#]*@/i, "$1:***@");
}
