/**
 * GetCaller's spend read alone (src/core/spend/key-spend.ts, issue 24): CPU and wall time per call of the key spend
 * reader for the bootstrap key of a fresh database, in process, sequential calls after `--warmup` (300) calls. `--root`
 * reads another checkout's src/ (e.g. /work/base-main, whose reader ran eight Prisma aggregates and a key read), so
 * two trees can be compared call for call; `--database-url` a PostgreSQL database (created if missing, left).
 *
 * `--generations N`: the key first gets N generations (priced, one in four BYOK) spread over the last 60 days, written
 * through the tree's generation records' writer (which, since the spend counters, keeps the key's counters too).
 *
 *   node bin/run-ts.mjs bench/key-spend.ts [--root <tree>] [--calls 2000] [--warmup 300] [--generations 0] [--database-url postgresql://…]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, loadavg } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const opt = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const root = resolve(opt("root") ?? new URL("..", import.meta.url).pathname);
const calls = Number(opt("calls") ?? 2000);
const url = opt("database-url");
const src = pathToFileURL(resolve(root, "src") + "/").href;
const from = (p: string) => new URL(p, src).href;
const { openDatabase } = (await import(from("db/client.js"))) as typeof import("../src/db/client.js");
const { createKeySpendReader } = (await import(from("core/spend/key-spend.js"))) as { createKeySpendReader: (deps: Record<string, unknown>) => (id: string, hash: string, org: string) => Promise<unknown> };
const { createSpendStore } = (await import(from("core/spend/spend-store.js"))) as typeof import("../src/core/spend/spend-store.js");
const { bootstrap } = (await import(from("core/identity/bootstrap.js"))) as typeof import("../src/core/identity/bootstrap.js");

const dir = mkdtempSync(join(tmpdir(), "portico-bench-key-spend-"));
const database = await openDatabase(url ? { databaseUrl: url, dataDir: dir } : { dataDir: join(dir, "data") });
if ((await database.db.apiKey.count()) === 0) await bootstrap(database.db, []);
const key = (await database.db.apiKey.findFirst())!;
const generations = Number(opt("generations") ?? 0);
const nowMs = Date.now();
// Written as the core writes them (the generation records' writer; on this branch it also keeps the key's spend
// counters per window), 2000 per flush.
const { createGenerationStore } = (await import(from("core/chat/generations.js"))) as typeof import("../src/core/chat/generations.js");
const { createLogger } = (await import(from("log.js"))) as typeof import("../src/log.js");
const writer = createGenerationStore({
  db: database.db, provider: database.provider, logger: createLogger({ level: "error" }), flushMs: 1e9, batch: 1e9,
  execute: database.executeRaw, writeSqlite: database.writeSqlite, executePrepared: database.executePrepared,
});
for (let i = 0; i < generations; i++) {
  writer.record({
    id: `gen-bench-${nowMs}-${i}`, organizationId: key.organizationId, workspaceId: key.workspaceId, keyHash: key.hash,
    requestedModel: "m", model: null, provider: null, credentialId: null, credentialSource: i % 4 === 0 ? "byok" : "shared",
    presetSlug: null, presetVersion: null, streamed: false, promptTokens: null, completionTokens: null, totalTokens: null,
    latencyMs: 1, timeToFirstTokenMs: null, status: "success", finishReason: null, errorCode: null, attempts: 1,
    createdAt: new Date(nowMs - Math.floor((i / generations) * 60 * 86_400_000)), cachedTokens: null, cacheWriteTokens: null,
    reasoningTokens: null, costFemtoUsd: i % 4 === 0 ? 0n : 1_234_567_890n, upstreamCostFemtoUsd: 1_234_567_890n,
  });
  if (i % 2000 === 1999) await writer.flush();
}
await writer.close();
const store = createSpendStore({ db: database.db, reservationTtlMs: 60_000 });
// Trees before the one-statement read take the Prisma client.
const handle = database as Partial<typeof database>;
const read = handle.queryRaw
  ? createKeySpendReader({ query: handle.queryRaw, provider: database.provider, store })
  : createKeySpendReader({ db: database.db, store });
const warmup = Number(opt("warmup") ?? 300);
for (let i = 0; i < warmup; i++) await read(key.id, key.hash, key.organizationId);
const load = loadavg()[0]!.toFixed(2);
const c0 = process.cpuUsage();
const t0 = performance.now();
for (let i = 0; i < calls; i++) await read(key.id, key.hash, key.organizationId);
const c = process.cpuUsage(c0);
const t = performance.now() - t0;
console.log(
  `${root} (${database.provider}): ${((c.user + c.system) / 1000 / calls).toFixed(3)} ms CPU per call, ${(t / calls).toFixed(3)} ms wall per call, ${calls} calls, ${generations} generations; load ${load} → ${loadavg()[0]!.toFixed(2)}`,
);
await database.close();
rmSync(dir, { recursive: true, force: true });
