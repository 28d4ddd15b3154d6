/**
 * Generation records written while the database cannot take them are kept in memory and written once
 * it can again (nothing lost); past the in-memory bound, what is lost is counted (metric + log line).
 *
 * The outage is real: on PostgreSQL the test database stops accepting connections and its sessions are
 * terminated (pg_terminate_backend); on SQLite another connection holds the write lock (as a backup or
 * a long admin transaction would) for longer than the busy timeout.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import Database from "better-sqlite3";
import pg from "pg";
import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { openDatabase, type DatabaseHandle } from "../../../src/db/client.js";
import { createGenerationStore, type GenerationStore } from "../../../src/core/chat/generations.js";
import type { GenerationRecord } from "../../../src/core/chat/seams.js";
import { createLogger } from "../../../src/log.js";
import { createTestPgDatabase, testPgAdminUrl } from "../../helpers/db.js";
import { waitFor } from "../../helpers/wait.js";

function rec(i: number): GenerationRecord {
  return {
    id: randomUUID(), organizationId: "org", workspaceId: "ws", keyHash: "k".repeat(64), requestedModel: "openai/gpt-4o-mini",
    model: "gpt-4o-mini", provider: "openai", credentialId: null, credentialSource: null, presetSlug: null, presetVersion: null,
    streamed: i % 2 === 0, promptTokens: 1, completionTokens: 2, totalTokens: 3, latencyMs: 5, timeToFirstTokenMs: null,
    status: "success", finishReason: "stop", errorCode: null, attempts: 1, createdAt: new Date(),
    cachedTokens: null, cacheWriteTokens: null, reasoningTokens: null,
    costFemtoUsd: i % 3 === 0 ? null : BigInt(i) * 1_234_567_890_123n, upstreamCostFemtoUsd: i % 3 === 0 ? null : BigInt(i) * 1_234_567_890_123n,
  };
}

const until = (what: string, probe: () => Promise<boolean> | boolean) => waitFor(what, probe, { timeoutMs: 20_000 });

/** An outage of one test database and how to end it. */
interface Outage {
  start(): Promise<void>;
  end(): Promise<void>;
}

interface Setup {
  handle: DatabaseHandle;
  outage: Outage;
  dispose(): Promise<void>;
}

async function postgres(): Promise<Setup> {
  const tmp = await createTestPgDatabase();
  const handle = await openDatabase({ databaseUrl: tmp.url, dataDir: tmpdir(), poolSize: 2 });
  const admin = new pg.Client({ connectionString: testPgAdminUrl() });
  admin.on("error", () => undefined);
  await admin.connect();
  return {
    handle,
    outage: {
      async start() {
        await admin.query(`ALTER DATABASE "${tmp.name}" ALLOW_CONNECTIONS false`);
        await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [tmp.name]);
      },
      async end() {
        await admin.query(`ALTER DATABASE "${tmp.name}" ALLOW_CONNECTIONS true`);
      },
    },
    async dispose() {
      await admin.query(`ALTER DATABASE "${tmp.name}" ALLOW_CONNECTIONS true`).catch(() => undefined);
      await handle.close();
      await admin.end();
      await tmp.drop();
    },
  };
}

async function sqlite(): Promise<Setup> {
  const dir = mkdtempSync(join(tmpdir(), "portico-gen-outage-"));
  const handle = await openDatabase({ dataDir: join(dir, "data"), busyTimeoutMs: 20 });
  const path = handle.url.slice("file:".length);
  let holder: Database.Database | undefined;
  return {
    handle,
    outage: {
      async start() {
        holder = new Database(path);
        holder.exec("BEGIN EXCLUSIVE");
      },
      async end() {
        holder?.exec("COMMIT");
        holder?.close();
        holder = undefined;
      },
    },
    async dispose() {
      holder?.close();
      await handle.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe.each([
  ["sqlite", sqlite],
  ["postgresql", postgres],
] as const)("generation records during a database outage (%s)", (provider, setup) => {
  let s: Setup | undefined;
  let store: GenerationStore | undefined;
  afterEach(async () => {
    await s?.outage.end();
    await store?.close();
    await s?.dispose();
    s = undefined;
    store = undefined;
  });

  const open = async (opts: { maxQueued?: number }) => {
    s = await setup();
    const lines: string[] = [];
    const logger = createLogger({ level: "debug", destination: new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) }) });
    const registry = new Registry();
    // As the core writes them: past the Prisma client, on the SQLite connection or as PostgreSQL prepared statements.
    store = createGenerationStore({
      db: s.handle.db, provider, logger, flushMs: 5, retryMinMs: 10, retryMaxMs: 100, registry,
      execute: s.handle.executeRaw, writeSqlite: s.handle.writeSqlite, executePrepared: s.handle.executePrepared, ...opts,
    });
    const count = () => s!.handle.db.generation.count();
    return { lines, registry, count, store, outage: s.outage };
  };

  it("keeps what is recorded during the outage and writes it once the database is back", async () => {
    const { lines, count, store, outage } = await open({});
    for (let i = 0; i < 10; i++) store.record(rec(i));
    await store.flush();
    expect(await count()).toBe(10);

    await outage.start();
    for (let i = 0; i < 300; i++) store.record(rec(i));
    await until("a failed write", () => lines.some((l) => l.includes("could not record generations")));
    for (let i = 0; i < 300; i++) store.record(rec(i));
    await outage.end();

    await until("every record written", async () => (await count()) === 610);
    expect(store.dropped()).toBe(0);
    expect(lines.filter((l) => l.includes("generation records lost"))).toEqual([]);
  });

  it("writes flushes of any size, in statements of 50 rows and powers of two", async () => {
    const { count, store } = await open({});
    let n = 0;
    for (const size of [137, 7, 1, 50, 63, 249]) {
      for (let i = 0; i < size; i++) store.record(rec(n++));
      await store.flush();
      expect(await count()).toBe(n);
    }
    expect(store.dropped()).toBe(0);
  });

  it("drops only a row the database refuses (counted as refused) and writes the others", async () => {
    const { lines, registry, count, store } = await open({});
    store.record(rec(0));
    store.record({ ...rec(1), organizationId: null as unknown as string }); // NOT NULL: refused on both databases
    store.record(rec(2));
    await until("the refused row dropped", () => store.dropped() === 1);
    await until("the other rows written", async () => (await count()) === 2);
    const metric = await registry.getSingleMetric("portico_generation_records_dropped_total")!.get();
    expect(metric.values.find((v) => v.labels["reason"] === "refused")?.value).toBe(1);
    expect(lines.some((l) => l.includes("the database refused a generation record"))).toBe(true);
  });

  it("counts what is lost when the in-memory bound is hit (metric and log line)", async () => {
    const { lines, registry, count, store, outage } = await open({ maxQueued: 50 });
    await outage.start();
    store.record(rec(0));
    await until("a failed write", () => lines.some((l) => l.includes("could not record generations")));
    for (let i = 1; i < 80; i++) store.record(rec(i));
    expect(store.dropped()).toBe(30);
    const metric = await registry.getSingleMetric("portico_generation_records_dropped_total")!.get();
    expect(metric.values.find((v) => v.labels["reason"] === "queue_full")?.value).toBe(30);
    expect(lines.some((l) => l.includes("generation records lost"))).toBe(true);
    await outage.end();
    await until("the kept records written", async () => (await count()) === 50);
  });
});
