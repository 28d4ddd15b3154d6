/**
 * Generations: one row per chat-completions request, written off the request path. `record()` queues the
 * row and returns at once; a flush writes queued rows (multi-row INSERTs, see `write`) every `flushMs` or
 * as soon as `batch` rows wait.
 *
 * Rows are kept until they are written: when a write fails (the database is restarting, a connection was
 * terminated), the rows that were not written go back to the head of the queue and the store retries with
 * backoff (`retryMinMs` doubling up to `retryMaxMs`) until the database answers again. An INSERT is
 * idempotent (ON CONFLICT DO NOTHING on the row id), so a statement whose commit was acknowledged by the
 * database but not seen here is re-sent harmlessly. While the database is reachable but a batch still
 * fails (a row the database refuses), the batch is written row by row after a few tries and the rows the
 * database refuses are dropped.
 *
 * The queue is bounded (`maxQueued`): past it, new rows are dropped (a database that stays down must not
 * grow the process without bound). Every dropped row is counted (`dropped()`, and the Prometheus counter
 * `portico_generation_records_dropped_total` by reason) and logged (at most once a second, with the count
 * so far). `close()` writes what is left, trying for at most `closeTimeoutMs`.
 */
import type { Logger } from "pino";
import { Counter, Gauge, type Registry } from "prom-client";
import type { DatabaseHandle, Db, DbProvider, SqliteConnection } from "../../db/client.js";
import { isoDateTime, sqliteDateTime } from "../../db/sql-values.js";
import { SQLITE_WINDOW_UPSERT, deltaParams, windowDeltas, withWindowUpserts } from "../spend/key-spend-windows.js";
import type { GenerationRecord, GenerationRecorder } from "./seams.js";

export interface GenerationStore extends GenerationRecorder {
  /** Writes what is queued now (tests, shutdown). */
  flush(): Promise<void>;
  close(): Promise<void>;
  dropped(): number;
}

const COLUMNS = [
  "id", "organizationId", "workspaceId", "keyHash", "requestedModel", "model", "provider", "credentialId",
  "credentialSource", "presetSlug", "presetVersion", "streamed", "promptTokens", "completionTokens", "totalTokens",
  "latencyMs", "timeToFirstTokenMs", "status", "finishReason", "errorCode", "attempts", "createdAt",
  "cachedTokens", "cacheWriteTokens", "reasoningTokens", "costFemtoUsd", "upstreamCostFemtoUsd", "catalogModel",
  "user", "sessionId", "traceId", "trace", "metadata", "contextTerms",
  "plugins",
  "cacheHit",
  "serverTools",
  "attemptsLog",
  "dialect",
  "internId", "internRunId", "internSessionId",
] as const;
/** BIGINT columns: PostgreSQL casts their parameters (sent as decimal text), SQLite binds them as BigInt. */
const BIGINT_COLUMNS: ReadonlySet<string> = new Set(["costFemtoUsd", "upstreamCostFemtoUsd"]);
const ROWS_PER_STATEMENT = 50;
/**
 * SQLite: rows written in one transaction (statements of ROWS_PER_STATEMENT): one COMMIT, and one WAL frame for each
 * page the rows share, per flush of up to `batch` rows (~13 µs of CPU per row: a 200-row flush holds the event loop
 * ~3 ms).
 */
const ROWS_PER_TRANSACTION = 200;

/**
 * The statement sizes a part of `n` rows is written in: ROWS_PER_STATEMENT while that many are left, then the
 * remainder by powers of two (37 → 32, 4, 1). Each size is a statement of its own, prepared once and kept
 * (SQLite: in the client's statement cache, ≈ 150 KB of native memory for 50 rows of these columns; PostgreSQL: a
 * named statement per pooled connection), so at most 7 sizes instead of one per row count up to 50 (≈ 7 MB of
 * malloc in a `serve` process under load; bench/README.md, "Resident memory under load").
 */
export function statementSizes(n: number): number[] {
  const sizes: number[] = [];
  let left = n;
  while (left >= ROWS_PER_STATEMENT) {
    sizes.push(ROWS_PER_STATEMENT);
    left -= ROWS_PER_STATEMENT;
  }
  for (let size = 32; size >= 1; size >>= 1) {
    if (left >= size) {
      sizes.push(size);
      left -= size;
    }
  }
  return sizes;
}

/** `INSERT … VALUES (…), …` for n rows, in the provider's placeholder syntax, with the spend counters' part; cached per n. */
function insertStatement(provider: DbProvider): (rows: number) => string {
  const cache = new Map<number, string>();
  const columns = COLUMNS.map((c) => `"${c}"`).join(", ");
  return (n) => {
    let sql = cache.get(n);
    if (!sql) {
      const tuples: string[] = [];
      for (let r = 0; r < n; r++) {
        const base = r * COLUMNS.length;
        const ph = COLUMNS.map((c, i) =>
          provider === "postgresql" ? `$${base + i + 1}${c === "createdAt" ? "::timestamp(3)" : BIGINT_COLUMNS.has(c) ? "::bigint" : ""}` : "?",
        );
        tuples.push(`(${ph.join(", ")})`);
      }
      const insert = `INSERT INTO "Generation" (${columns}) VALUES ${tuples.join(", ")} ON CONFLICT ("id") DO NOTHING`;
      // The key's spend counters with the rows (key-spend-windows.ts): on PostgreSQL in the same statement, on
      // SQLite by upserts after it in the same transaction, for the rows it inserted (insertedSqlite).
      sql = provider === "postgresql" ? withWindowUpserts(insert) : insert;
      cache.set(n, sql);
    }
    return sql;
  };
}

/** SQLite: the ids of the rows with rowids in (from, to]. */
const IDS_BY_ROWID = `SELECT "id" FROM "Generation" WHERE rowid > ? AND rowid <= ?`;

/**
 * SQLite: adds to `out` the rows of `part` that its INSERT … ON CONFLICT DO NOTHING inserted (`changes` of them,
 * the last with rowid `last`); the others were there already and count no spend again. Almost always all of them.
 * Otherwise the inserted ones are those with the statement's rowids: SQLite gives a new row the table's largest
 * rowid + 1 (the table has no AUTOINCREMENT and the transaction writes alone), so a statement's new rows hold the
 * `changes` rowids up to `last`. (Not RETURNING: it costs every flush ≈ 1–2 µs per row.)
 */
function insertedSqlite(part: readonly GenerationRecord[], info: { changes: number; lastInsertRowid: number | bigint }, connection: SqliteConnection, out: GenerationRecord[]): void {
  if (info.changes === part.length) {
    out.push(...part);
    return;
  }
  if (info.changes === 0) return;
  const last = BigInt(info.lastInsertRowid);
  const ids = new Set(connection.prepare(IDS_BY_ROWID).raw(true).all(last - BigInt(info.changes), last).map((r) => r[0] as string));
  for (const r of part) if (ids.delete(r.id)) out.push(r);
}

/** Adds to `out` the rows of `part` whose ids `returned` (an INSERT … RETURNING "id" through the Prisma client). */
function insertedOf(part: readonly GenerationRecord[], returned: ReadonlyArray<{ id: string }>, out: GenerationRecord[]): void {
  const ids = new Set(returned.map((r) => r.id));
  for (const r of part) if (ids.delete(r.id)) out.push(r);
}

/**
 * Puts rows' parameters into `out` (COLUMNS.length per row, in COLUMNS' order) as Prisma stores them: on SQLite
 * booleans as 0/1, times as ISO text with +00:00, BIGINTs as BigInt; on PostgreSQL BIGINTs as decimal text cast in
 * the statement. Written into one flat array (no array per row) since this runs once per column of every request.
 */
function putValues(out: unknown[], rows: readonly GenerationRecord[], sqlite: boolean): unknown[] {
  let i = 0;
  for (const r of rows) {
    out[i++] = r.id;
    out[i++] = r.organizationId;
    out[i++] = r.workspaceId;
    out[i++] = r.keyHash;
    out[i++] = r.requestedModel;
    out[i++] = r.model;
    out[i++] = r.provider;
    out[i++] = r.credentialId;
    out[i++] = r.credentialSource;
    out[i++] = r.presetSlug;
    out[i++] = r.presetVersion;
    out[i++] = sqlite ? (r.streamed ? 1 : 0) : r.streamed;
    out[i++] = r.promptTokens;
    out[i++] = r.completionTokens;
    out[i++] = r.totalTokens;
    out[i++] = Math.round(r.latencyMs);
    out[i++] = r.timeToFirstTokenMs === null ? null : Math.round(r.timeToFirstTokenMs);
    out[i++] = r.status;
    out[i++] = r.finishReason;
    out[i++] = r.errorCode;
    out[i++] = r.attempts;
    out[i++] = sqlite ? sqliteDateTime(r.createdAt) : isoDateTime(r.createdAt);
    out[i++] = r.cachedTokens;
    out[i++] = r.cacheWriteTokens;
    out[i++] = r.reasoningTokens;
    out[i++] = r.costFemtoUsd === null ? null : sqlite ? r.costFemtoUsd : r.costFemtoUsd.toString();
    out[i++] = r.upstreamCostFemtoUsd === null ? null : sqlite ? r.upstreamCostFemtoUsd : r.upstreamCostFemtoUsd.toString();
    out[i++] = r.catalogModel ?? null;
    out[i++] = r.user ?? null;
    out[i++] = r.sessionId ?? null;
    out[i++] = r.traceId ?? null;
    out[i++] = r.trace ?? null;
    out[i++] = r.metadata ?? null;
    out[i++] = r.contextTerms ?? null;
    out[i++] = r.plugins ?? null;
    out[i++] = sqlite ? (r.cacheHit ? 1 : 0) : r.cacheHit === true;
    out[i++] = r.serverTools ?? null;
    out[i++] = r.attemptsLog ?? null;
    out[i++] = r.dialect ?? null;
    out[i++] = r.internId ?? null;
    out[i++] = r.internRunId ?? null;
    out[i++] = r.internSessionId ?? null;
  }
  return out;
}

export interface GenerationStoreOptions {
  db: Db;
  provider?: DbProvider;
  logger: Logger;
  flushMs?: number;
  batch?: number;
  /** Most rows held in memory (queued or being written); past it new rows are dropped and counted. */
  maxQueued?: number;
  /** First wait after a failed write, doubled per failure up to retryMaxMs. */
  retryMinMs?: number;
  retryMaxMs?: number;
  /** Longest time close() keeps trying to write what is left. */
  closeTimeoutMs?: number;
  /** Registry for the dropped-rows counter and the queue gauge. */
  registry?: Registry;
  /**
   * PostgreSQL: runs a raw statement past the Prisma client (DatabaseHandle.executeRaw); default
   * `db.$executeRawUnsafe`. SQLite without `writeSqlite` writes in a Prisma transaction instead (the rows an INSERT
   * inserted come back by RETURNING, for the spend counters).
   */
  execute?: (sql: string, args: readonly unknown[]) => Promise<number>;
  /** SQLite: writes on the better-sqlite3 connection itself (DatabaseHandle.writeSqlite) in place of `execute`. */
  writeSqlite?: DatabaseHandle["writeSqlite"];
  /** PostgreSQL: named prepared statements on the pool (DatabaseHandle.executePrepared) in place of `execute`. */
  executePrepared?: DatabaseHandle["executePrepared"];
}

/** Failed tries, while the database answers, after which a batch is written row by row. */
const TRIES_BEFORE_SPLIT = 3;

/**
 * Whether the database refused the row itself (an integrity or data error: SQLSTATE classes 22 and 23,
 * SQLite constraint and datatype errors), as opposed to not being able to write anything now (locked,
 * restarting, connection lost), after which the row is kept.
 */
function isRowError(err: unknown): boolean {
  const e = err as { message?: unknown; code?: unknown; meta?: unknown; cause?: unknown };
  // Prisma client errors carry the driver's error in `meta`, the driver adapter's own errors in `cause`; the
  // drivers' own errors (writeSqlite, executePrepared) their SQLSTATE or SQLITE_… code in `code`.
  const text = `${String(e?.message ?? "")} ${String(e?.code ?? "")} ${JSON.stringify(e?.meta ?? {})} ${JSON.stringify(e?.cause ?? {})}`;
  return /\b2[23][0-9A-Z]{3}\b|constraint|violates|datatype mismatch|invalid input|out of range|too long/i.test(text);
}

export function createGenerationStore(deps: GenerationStoreOptions): GenerationStore {
  const flushMs = deps.flushMs ?? 50;
  const batch = deps.batch ?? 200;
  const maxQueued = deps.maxQueued ?? 10_000;
  const retryMinMs = deps.retryMinMs ?? 100;
  const retryMaxMs = deps.retryMaxMs ?? 5_000;
  const closeTimeoutMs = deps.closeTimeoutMs ?? 5_000;
  const provider = deps.provider ?? "sqlite";
  const execute = deps.execute ?? ((sql: string, args: readonly unknown[]) => deps.db.$executeRawUnsafe(sql, ...args));
  const droppedCounter = deps.registry
    ? new Counter({
        name: "portico_generation_records_dropped_total",
        help: "Generation records lost: queue_full (the in-memory bound was hit while the database could not keep up), refused (the database rejected the row) or shutdown (still unwritten when the process stopped).",
        labelNames: ["reason"] as const,
        registers: [deps.registry],
      })
    : undefined;
  const pendingGauge = deps.registry
    ? new Gauge({
        name: "portico_generation_records_pending",
        help: "Generation records held in memory, not yet written to the database.",
        registers: [deps.registry],
        collect() {
          this.set(queue.length + inFlight);
        },
      })
    : undefined;
  void pendingGauge;

  let queue: GenerationRecord[] = [];
  let inFlight = 0;
  let dropped = 0;
  let lastDropLog = -Infinity;
  let timer: NodeJS.Timeout | undefined;
  let writing: Promise<void> | undefined;
  /** Consecutive failed writes; > 0 means the store is backing off. */
  let failures = 0;
  let tries = 0;
  let closed = false;

  const drop = (n: number, reason: "queue_full" | "refused" | "shutdown"): void => {
    dropped += n;
    droppedCounter?.inc({ reason }, n);
    const now = performance.now();
    if (now - lastDropLog >= 1_000) {
      lastDropLog = now;
      deps.logger.error({ dropped, reason }, "generation records lost (see portico_generation_records_dropped_total)");
    }
  };

  const insert = insertStatement(provider);
  const sqlite = provider === "sqlite";
  const writeSqlite = sqlite ? deps.writeSqlite : undefined;
  const executePrepared = sqlite ? undefined : deps.executePrepared;
  const params = (part: readonly GenerationRecord[]) => putValues(new Array(part.length * COLUMNS.length), part, sqlite);
  /** PostgreSQL: one name per statement size, kept prepared per pooled connection. */
  const names = Array.from({ length: ROWS_PER_STATEMENT + 1 }, (_, n) => `portico_generation_insert_${n}`);
  // Raw multi-row INSERTs: Prisma's createMany costs ~0.4 ms of CPU per row here (query compiler and per-field
  // processing), which stalled the event loop of the serving process for tens of ms per flush; a prepared
  // statement of at most ROWS_PER_STATEMENT rows costs a small part of that and bounds each stall. Sent past the
  // Prisma client (whose raw calls cost ~40 µs per row, issue 24) and past the driver adapters' argument mapping:
  // on SQLite on the connection itself, ROWS_PER_TRANSACTION rows per transaction; on PostgreSQL as named
  // prepared statements (parsed once per connection: ~half the server's and this process's CPU per row).
  const chunkRows = writeSqlite ? ROWS_PER_TRANSACTION : ROWS_PER_STATEMENT;
  /** The chunk's statement-sized parts (statementSizes). */
  const parts = function* (chunk: GenerationRecord[]): Generator<[number, GenerationRecord[]]> {
    let j = 0;
    for (const size of statementSizes(chunk.length)) {
      yield [size, size === chunk.length ? chunk : chunk.slice(j, j + size)];
      j += size;
    }
  };
  const writeChunk: (chunk: GenerationRecord[]) => Promise<unknown> = writeSqlite
    ? (chunk) =>
        writeSqlite((connection) => {
          const written: GenerationRecord[] = [];
          for (const [size, part] of parts(chunk)) insertedSqlite(part, connection.prepare(insert(size)).run(...params(part)), connection, written);
          for (const d of windowDeltas(written)) connection.prepare(SQLITE_WINDOW_UPSERT).run(...deltaParams(d));
        })
    : sqlite
      ? (chunk) =>
          // SQLite without the connection (benches, tests): the same statements in a Prisma transaction.
          deps.db.$transaction(async (tx) => {
            const written: GenerationRecord[] = [];
            for (const [size, part] of parts(chunk)) insertedOf(part, await tx.$queryRawUnsafe<Array<{ id: string }>>(`${insert(size)} RETURNING "id"`, ...params(part)), written);
            for (const d of windowDeltas(written)) await tx.$executeRawUnsafe(SQLITE_WINDOW_UPSERT, ...deltaParams(d));
          })
      : async (chunk) => {
          for (const [size, part] of parts(chunk)) {
            if (executePrepared) await executePrepared(names[size]!, insert(size), params(part));
            else await execute(insert(size), params(part));
          }
        };
  /** Writes rows in chunks (statements, on SQLite transactions); returns how many were written before a failure. */
  const write = async (rows: GenerationRecord[]): Promise<{ written: number; error?: unknown }> => {
    let written = 0;
    try {
      for (let i = 0; i < rows.length; i += chunkRows) {
        const chunk = rows.length <= chunkRows ? rows : rows.slice(i, i + chunkRows);
        await writeChunk(chunk);
        written += chunk.length;
      }
      return { written };
    } catch (error) {
      return { written, error };
    }
  };

  const databaseAnswers = async (): Promise<boolean> => {
    try {
      await deps.db.$queryRawUnsafe("SELECT 1");
      return true;
    } catch {
      return false;
    }
  };

  /** Writes rows one by one, dropping (and counting) those the database refuses. */
  const writeOneByOne = async (rows: GenerationRecord[]): Promise<GenerationRecord[]> => {
    for (let i = 0; i < rows.length; i++) {
      const { error } = await write([rows[i]!]);
      if (!error) continue;
      if (!isRowError(error) || !(await databaseAnswers())) return rows.slice(i);
      deps.logger.warn({ err: { message: (error as Error).message } }, "the database refused a generation record; it is dropped");
      drop(1, "refused");
    }
    return [];
  };

  const schedule = (ms: number): void => {
    if (timer || closed) return;
    timer = setTimeout(() => {
      timer = undefined;
      void flush();
    }, ms);
  };

  /** One pass: takes the queue, writes it, puts back what was not written. */
  const pass = async (): Promise<void> => {
    const rows = queue;
    queue = [];
    inFlight = rows.length;
    let left: GenerationRecord[] = [];
    try {
      const { written, error } = await write(rows);
      if (!error) {
        if (failures > 0) deps.logger.info({ failures }, "generation records are written again");
        failures = 0;
        tries = 0;
        return;
      }
      left = rows.slice(written);
      if (await databaseAnswers()) {
        tries++;
        if (tries >= TRIES_BEFORE_SPLIT) {
          left = await writeOneByOne(left);
          tries = 0;
        }
      }
      if (left.length > 0) {
        if (failures === 0) {
          deps.logger.warn({ err: { message: (error as Error).message }, rows: left.length }, "could not record generations; kept in memory and retried");
        }
        failures++;
      } else {
        failures = 0;
      }
    } finally {
      inFlight = 0;
      // What was not written goes first; new rows that do not fit beside it are dropped.
      if (left.length > 0) {
        const room = Math.max(0, maxQueued - left.length);
        if (queue.length > room) {
          drop(queue.length - room, "queue_full");
          queue = queue.slice(0, room);
        }
        queue = left.concat(queue);
      }
    }
  };

  const flush = (): Promise<void> => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (writing) return writing;
    if (queue.length === 0) return Promise.resolve();
    writing = pass().finally(() => {
      writing = undefined;
      if (queue.length === 0) return;
      if (failures > 0) schedule(Math.min(retryMaxMs, retryMinMs * 2 ** (failures - 1)));
      else if (queue.length >= batch) void flush();
      else schedule(flushMs);
    });
    return writing;
  };

  return {
    record(rec) {
      if (queue.length + inFlight >= maxQueued) {
        drop(1, "queue_full");
        return;
      }
      queue.push(rec);
      if (failures > 0 || writing) return; // the retry timer or the running pass picks it up
      if (queue.length >= batch) void flush();
      else schedule(flushMs);
    },
    async flush() {
      if (writing) await writing;
      await flush();
    },
    async close() {
      const deadline = performance.now() + closeTimeoutMs;
      if (writing) await writing;
      while (queue.length > 0 && performance.now() < deadline) {
        await flush();
        if (queue.length > 0 && failures > 0) {
          await new Promise((r) => setTimeout(r, Math.min(retryMaxMs, retryMinMs * 2 ** (failures - 1), Math.max(0, deadline - performance.now()))));
        }
      }
      closed = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      if (queue.length > 0) {
        drop(queue.length, "shutdown");
        queue = [];
      }
    },
    dropped: () => dropped,
  };
}
