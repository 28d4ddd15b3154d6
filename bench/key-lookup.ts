/**
 * Authenticated-route benchmark (issue 12): `GET /api/v1/key` on the real stack (core + gateway over the
 * in-memory transport, as `portico serve` runs, fresh SQLite database) with the API-key cache on
 * (PORTICO_AUTH_CACHE_TTL_MS=1000, the default) and off (0: one database read per request, the behaviour
 * before the cache), beside a bare Node `http` server answering a small JSON body, all in one run. Load
 * comes from a worker thread (own event loop) over keep-alive HTTP/1.1.
 *
 *   node bin/run-ts.mjs bench/key-lookup.ts [--seconds 5] [--warmup 1] [--concurrency 32]
 */
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { Writable } from "node:stream";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, cpus, loadavg } from "node:os";
import { join } from "node:path";
import http from "node:http";
import { runInWorker } from "./lib/worker.js";
import { closedLoop } from "./lib/closed-loop.js";

interface Result {
  name: string;
  requests: number;
  errors: number;
  rps: number;
  p50: number;
  p99: number;
}

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

async function main(): Promise<void> {
  const seconds = arg("seconds", 5);
  const warmup = arg("warmup", 1);
  const concurrency = arg("concurrency", 32);
  const { openDatabase } = await import("../src/db/client.js");
  const { createCore } = await import("../src/core/core.js");
  const { buildGateway } = await import("../src/gateway/app.js");
  const { bootstrap } = await import("../src/core/identity/bootstrap.js");
  const { createLogger } = await import("../src/log.js");
  const { createMetrics } = await import("../src/lib/metrics.js");
  const { loadConfig } = await import("../src/config.js");

  const dir = mkdtempSync(join(tmpdir(), "portico-bench-key-"));
  const database = await openDatabase({ dataDir: join(dir, "data") });
  const logger = createLogger({ level: "warn", destination: new Writable({ write: (_c, _e, cb) => cb() }) });
  const boot = await bootstrap(database.db, []);
  const stacks: Array<{ name: string; port: number; close: () => Promise<void> }> = [];
  for (const ttl of ["1000", "0"]) {
    const config = loadConfig({ PORTICO_DATA_DIR: join(dir, "data"), HOST: "127.0.0.1", PORT: "0", PORTICO_GRPC_PORT: "0", PORTICO_EMBEDDED_HOST: "false", PORTICO_AUTH_CACHE_TTL_MS: ttl });
    const metrics = createMetrics();
    const core = await createCore({ database, config, logger, metrics });
    const gateway = await buildGateway({ transport: core.createInMemoryTransport(), logger, metrics, bodyLimitBytes: config.bodyLimitBytes, brand: config.brand });
    await gateway.listen({ host: "127.0.0.1", port: 0 });
    stacks.push({
      name: ttl === "0" ? "GET /api/v1/key, key cache off (a read per request)" : "GET /api/v1/key, key cache on",
      port: (gateway.server.address() as { port: number }).port,
      close: async () => {
        await gateway.close();
        await core.close();
      },
    });
  }
  const bare = http.createServer((req, res) => {
    const body = JSON.stringify({ data: { label: "pk-v1-abc...wxyz", limit: null, usage: 0, is_free_tier: false } });
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
  });
  await new Promise<void>((r) => bare.listen(0, "127.0.0.1", r));
  const targets = [{ name: "bare Node http", port: (bare.address() as { port: number }).port }, ...stacks];

  const load = loadavg()[0]!.toFixed(2);
  const results: Result[] = [];
  for (const t of targets) {
    const r = await runInWorker<Result>(import.meta.url, { name: t.name, port: t.port, key: boot.api_key, seconds, warmup, concurrency });
    results.push(r);
    console.error(`${r.name}: ${r.rps.toFixed(0)} req/s p50 ${r.p50.toFixed(2)} ms p99 ${r.p99.toFixed(2)} ms errors ${r.errors}`);
  }
  for (const s of stacks) await s.close();
  bare.close();
  await database.close();
  rmSync(dir, { recursive: true, force: true });

  const bareRps = results[0]!.rps;
  console.log(`\nNode ${process.version}, ${cpus().length} CPU(s), SQLite, one process, c=${concurrency}, ${seconds}s per scenario after ${warmup}s warm-up; load average at start ${load}.\n`);
  console.log("| scenario | req/s | p50 ms | p99 ms | errors | share of bare http |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const r of results) console.log(`| ${r.name} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.errors} | ${((100 * r.rps) / bareRps).toFixed(1)} % |`);
}

async function worker(): Promise<void> {
  const { name, port, key, seconds, warmup, concurrency } = workerData as { name: string; port: number; key: string; seconds: number; warmup: number; concurrency: number };
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const path = name.startsWith("bare") ? "/" : "/api/v1/key";
  const send = () =>
    new Promise<boolean>((resolve) => {
      const req = http.request({ agent, host: "127.0.0.1", port, method: "GET", path, headers: { authorization: `Bearer ${key}` } }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode === 200));
      });
      req.on("error", () => resolve(false));
      req.end();
    });
  const figures = await closedLoop({ concurrency, warmupSeconds: warmup, seconds, send });
  agent.destroy();
  const result: Result = { name, requests: figures.requests, errors: figures.errors, rps: figures.rps, p50: figures.p50, p99: figures.p99 };
  parentPort!.postMessage(result);
}

if (isMainThread) await main();
else await worker();
