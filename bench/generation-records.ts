/**
 * What recording generations costs (issues 24 and 30): CPU of this process per generation row written by the
 * generation store (src/core/chat/generations.ts) the way the core builds it, on SQLite and PostgreSQL, after the
 * table holds `--prefill` rows (the primary key's index then no longer fits in a few pages, as in a deployment).
 *
 * Per row: this process's CPU (user + system, so SQLite's own work and its write syscalls count), wall time, write
 * syscalls (`syscw` of /proc/self/io: SQLite's pwrite64 to the WAL and the checkpoints to the database file), and
 * on PostgreSQL the CPU of the database's server processes (their /proc stat, when they run on this machine).
 * Rows are recorded `--per-flush` at a time and flushed, as `serve` does every 50 ms (at c=32 a flush carries tens
 * of rows); the row is the hot-path bench's request (no plugin, tool, metadata), with an attempts log.
 *
 * `--base <checkout>[,…]` runs the same against other checkouts' `src/` (no build needed), taking turns with this
 * tree `--pairs` times; each tree gets its own fresh databases, ids made as that tree makes them.
 *
 * `--via stage` records each measured row as a request does instead of handing the store a row built here: the tree's
 * `newCall` (stage.ts: the tracking and its generation id), its fields set as a served non-streaming request, then the
 * tree's record stage (`createRecordStage`: `recordOf`) through the Prometheus series of `withGenerationMetrics` into the
 * store, so the figures also hold what a request pays to make and count its record.
 *
 *   node bin/run-ts.mjs bench/generation-records.ts [--base /work/base-main] [--providers sqlite,postgresql]
 *       [--per-flush 10,50] [--rows 20000] [--prefill 100000] [--pairs 2] [--via store|stage]
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import pg from "pg";
import { flag, num, list } from "./lib/args.js";

const providers = list("providers", "sqlite,postgresql") as Array<"sqlite" | "postgresql">;
const perFlushes = list("per-flush", "10,50").map(Number);
const rowsPerRun = num("rows", 20_000);
const prefill = num("prefill", 100_000);
const pairs = num("pairs", 2);
const bases = list("base", "");
const via = flag("via") ?? "store";
if (via !== "store" && via !== "stage") throw new Error("--via: store or stage");
const pgAdmin = process.env["PORTICO_TEST_PG_URL"] || "postgresql://postgres@127.0.0.1:5432/postgres";

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
const writeSyscalls = () => Number(/syscw:\s*(\d+)/.exec(readFileSync("/proc/self/io", "utf8"))?.[1] ?? NaN);
const TICK_US = 1e6 / 100; // USER_HZ

/** CPU µs of the server processes of one PostgreSQL database (backends name it in their title); NaN if not visible. */
function pgServerCpuUs(database: string): number {
  let total = 0;
  let seen = false;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(database)) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      total += (Number(f[11]) + Number(f[12])) * TICK_US;
      seen = true;
    } catch {
      // gone, or not ours to read
    }
  }
  return seen ? total : NaN;
}

interface Figures {
  cpuUs: number;
  wallUs: number;
  syscw: number;
  serverUs: number;
}

interface Session {
  /** Records and flushes `rows` rows, `perFlush` per flush; figures per row. */
  run(rows: number, perFlush: number): Promise<Figures>;
  close(): Promise<void>;
}

interface Tree {
  name: string;
  open(provider: "sqlite" | "postgresql"): Promise<Session>;
}

async function pgAdminQuery(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: pgAdmin });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

async function treeAt(name: string, root: string): Promise<Tree> {
  const m = (p: string) => import(pathToFileURL(resolve(root, "src", p)).href);
  const [{ openDatabase }, { createGenerationStore }, { createLogger }, idModule, stage] = await Promise.all([
    m("db/client.ts"),
    m("core/chat/generations.ts"),
    m("log.ts"),
    m("core/chat/generation-id.ts").catch(() => ({})),
    via === "stage"
      ? Promise.all([m("core/chat/pipeline/stage.ts"), m("core/chat/pipeline/record.ts"), m("core/chat/generation-metrics.ts"), m("lib/metrics.ts")])
      : undefined,
  ]);
  // Trees before generation-id.ts made ids as stage.ts did: `gen-${randomUUID()}`.
  const newId: () => string = (idModule as { generationId?: () => string }).generationId ?? (() => `gen-${randomUUID()}`);
  const logger = createLogger({ level: "error" });
  const attemptsLog = JSON.stringify([{ provider: "groq", model: "llama-3.3-70b", credential_source: "byok", status: 200, reason: "ok", duration_ms: 1 }]);
  const row = () => ({
    id: newId(), organizationId: "0b6c1a52-3f0e-4a57-9d0e-7c3b2f1e4d5a", workspaceId: "5e2d9c1b-7a4f-4c3e-8b1d-0f9e8d7c6b5a",
    keyHash: "3f1c9d2e7b8a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e", requestedModel: "groq/llama-3.3-70b",
    model: "llama-3.3-70b", provider: "groq", credentialId: "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d", credentialSource: "byok" as const,
    presetSlug: null, presetVersion: null, streamed: false, promptTokens: 12, completionTokens: 4, totalTokens: 16,
    latencyMs: 1.234, timeToFirstTokenMs: null, status: "success" as const, finishReason: "stop", errorCode: null, attempts: 1,
    createdAt: new Date(), cachedTokens: 0, cacheWriteTokens: null, reasoningTokens: 0, costFemtoUsd: 0n,
    upstreamCostFemtoUsd: 7_080_000_000_000n, catalogModel: "meta-llama/llama-3.3-70b-instruct", cacheHit: false,
    attemptsLog, dialect: "chat",
  });
  return {
    name,
    async open(provider) {
      let cleanup: () => Promise<void>;
      let databaseUrl: string | undefined;
      let pgName = "";
      const dir = mkdtempSync(join(tmpdir(), "portico-bench-genrec-"));
      if (provider === "postgresql") {
        pgName = `portico_bench_genrec_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
        await pgAdminQuery(`CREATE DATABASE "${pgName}"`);
        const u = new URL(pgAdmin);
        u.pathname = `/${pgName}`;
        databaseUrl = u.toString();
      }
      const database = await openDatabase({ dataDir: dir, databaseUrl });
      cleanup = async () => {
        await database.close();
        rmSync(dir, { recursive: true, force: true });
        if (pgName) await pgAdminQuery(`DROP DATABASE IF EXISTS "${pgName}" WITH (FORCE)`);
      };
      // As src/core/core.ts builds it; options a tree does not know are ignored by it.
      const store = createGenerationStore({
        db: database.db, provider: database.provider, logger, flushMs: 1e9, batch: 1e9,
        execute: database.executeRaw, writeSqlite: database.writeSqlite, executePrepared: database.executePrepared,
      });
      const recordOne = stage ? viaStage(stage, store) : () => store.record(row());
      const write = async (rows: number, perFlush: number) => {
        for (let done = 0; done < rows; done += perFlush) {
          for (let i = 0; i < perFlush; i++) await recordOne();
          await store.flush();
        }
      };
      await write(prefill, 200);
      await write(2_000, 20); // warm-up at a small batch size
      return {
        async run(rows, perFlush) {
          await write(perFlush, perFlush); // the pool's connections open again (PostgreSQL closes idle ones)
          const w0 = writeSyscalls();
          const s0 = pgName ? pgServerCpuUs(pgName) : NaN;
          const t0 = performance.now();
          const c0 = cpuUs();
          await write(rows, perFlush);
          const cpu = cpuUs() - c0;
          const wall = (performance.now() - t0) * 1000;
          const server = pgName ? pgServerCpuUs(pgName) - s0 : NaN;
          return { cpuUs: cpu / rows, wallUs: wall / rows, syscw: (writeSyscalls() - w0) / rows, serverUs: server / rows };
        },
        async close() {
          await store.close();
          await cleanup();
        },
      };
    },
  };
}

/**
 * `--via stage`: one request's record as the pipeline makes it, from the tree's own modules: a tracking from `newCall`,
 * filled as the bench row above (a served, priced BYOK answer with one attempt), recorded by the record stage through
 * the Prometheus series (a registry of its own per tree) into `store`.
 */
function viaStage(modules: unknown[], store: { record(rec: unknown): void }): () => Promise<void> {
  const [{ newCall }, { createRecordStage }, { withGenerationMetrics }, { createMetrics }] = modules as [
    { newCall: (caller: unknown, signal: AbortSignal, streamed: boolean, request: unknown) => { track: Record<string, unknown> } },
    { createRecordStage: (deps: { generations: unknown }) => { run(call: unknown, next: () => Promise<unknown>): Promise<unknown> } },
    { withGenerationMetrics: (recorder: unknown, metrics: unknown) => unknown },
    { createMetrics: () => unknown },
  ];
  const record = createRecordStage({ generations: withGenerationMetrics(store, createMetrics()) });
  const caller = {
    keyId: "k", keyHash: "3f1c9d2e7b8a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e", keyLabel: "bench",
    organizationId: "0b6c1a52-3f0e-4a57-9d0e-7c3b2f1e4d5a", workspaceId: "5e2d9c1b-7a4f-4c3e-8b1d-0f9e8d7c6b5a", userId: "u",
    isManagement: false, internsProgramme: false,
  };
  const signal = new AbortController().signal;
  const request = { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "hi" }] };
  const outcome = { kind: "completion", completion: {} };
  const next = async () => outcome;
  return async () => {
    const call = newCall(caller, signal, false, request);
    const t = call.track;
    t.requestedModel = "groq/llama-3.3-70b";
    t.model = "llama-3.3-70b";
    t.provider = "groq";
    t.credentialId = "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d";
    t.credentialSource = "byok";
    t.attempts = 1;
    t.usage = { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } };
    t.finishReason = "stop";
    t.status = "success";
    t.catalogModel = "meta-llama/llama-3.3-70b-instruct";
    t.cost = { femtoUsd: 7_080_000_000_000n, paidBy: "byok" };
    (t.attemptsLog as unknown[]).push({ provider: "groq", model: "llama-3.3-70b", credential_source: "byok", status: 200, reason: "served", duration_ms: 1 });
    await record.run(call, next);
  };
}

async function main(): Promise<void> {
  const trees = [await treeAt("this tree", resolve(import.meta.dirname, "..")), ...(await Promise.all(bases.map((b) => treeAt(b, b))))];
  const rows: string[] = [];
  console.log(`Node ${process.version}; ${rowsPerRun} rows per run after ${prefill} prefilled; rows recorded via the ${via}; load average at start ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  for (const provider of providers) {
    const sessions = new Map<Tree, Session>();
    for (const t of trees) sessions.set(t, await t.open(provider));
    try {
      for (let p = 1; p <= pairs; p++) {
        for (const perFlush of perFlushes) {
          for (const t of p % 2 === 1 ? trees : [...trees].reverse()) {
            const f = await sessions.get(t)!.run(rowsPerRun, perFlush);
            const line = `| ${provider} | ${perFlush} | ${p} | ${t.name} | ${f.cpuUs.toFixed(2)} | ${f.wallUs.toFixed(2)} | ${f.syscw.toFixed(2)} | ${Number.isNaN(f.serverUs) ? "—" : f.serverUs.toFixed(2)} | ${loadavg()[0]!.toFixed(2)} |`;
            rows.push(line);
            console.error(line);
          }
        }
      }
    } finally {
      for (const s of sessions.values()) await s.close();
    }
  }
  console.log("\n| database | rows per flush | pair | tree | CPU µs per row | wall µs per row | write syscalls per row | PostgreSQL server CPU µs per row | load |");
  console.log("|---|---:|---:|---|---:|---:|---:|---:|---:|");
  for (const r of rows) console.log(r);
}

await main();
