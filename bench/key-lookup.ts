/**
 * Authenticated-route benchmark (issue 12): `GET /api/v1/key` on the real stack (core + gateway over the
 * in-memory transport, as `portico serve` runs, fresh SQLite database) with the API-key cache on
 * (PORTICO_AUTH_CACHE_TTL_MS=1000, the default) and off (0: one database read per request, the behaviour
 * before the cache), beside a bare Node `http` server answering a small JSON body, all in one run. Load
 * comes from a worker thread (own event loop) over keep-alive HTTP/1.1.
 *
 *   node bin/run-ts.mjs bench/key-lookup.ts [--seconds 5] [--warmup 1] [--concurrency 32] [--root <tree>]
 *
 * CPU per request: the serving thread's busy time (event-loop utilisation: core, gateway, Prisma and SQLite all run
 * on it) over the measured window, divided by the requests answered; and the process's CPU (user + system, the
 * load worker's thread included). `--root <tree>`: serve from another checkout's src/ (e.g. /work/base-main), the
 * load and the figures from this file, for A/B runs of two trees with the same bench.
 */
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { Writable } from "node:stream";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, cpus, loadavg } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";
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
  /** Serving thread's busy ms per request, process CPU ms per request (set by main). */
  busyMs?: number;
  cpuMs?: number;
}

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

async function main(): Promise<void> {
  const seconds = arg("seconds", 5);
  const warmup = arg("warmup", 1);
  const concurrency = arg("concurrency", 32);
  const rootArg = process.argv.indexOf("--root");
  const src = rootArg > 0 ? pathToFileURL(resolve(process.argv[rootArg + 1]!, "src") + "/").href : new URL("../src/", import.meta.url).href;
  const from = (path: string) => new URL(path, src).href;
  const { openDatabase } = (await import(from("db/client.js"))) as typeof import("../src/db/client.js");
  const { createCore } = (await import(from("core/core.js"))) as typeof import("../src/core/core.js");
  const { buildGateway } = (await import(from("gateway/app.js"))) as typeof import("../src/gateway/app.js");
  const { bootstrap } = (await import(from("core/identity/bootstrap.js"))) as typeof import("../src/core/identity/bootstrap.js");
  const { createLogger } = (await import(from("log.js"))) as typeof import("../src/log.js");
  const { createMetrics } = (await import(from("lib/metrics.js"))) as typeof import("../src/lib/metrics.js");
  const { loadConfig } = (await import(from("config.js"))) as typeof import("../src/config.js");

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
    let elu0 = performance.eventLoopUtilization();
    let cpu0 = process.cpuUsage();
    let busy = 0;
    let cpu = 0;
    const r = await runInWorker<Result>(import.meta.url, { name: t.name, port: t.port, key: boot.api_key, seconds, warmup, concurrency }, (edge) => {
      if (edge === "start") {
        elu0 = performance.eventLoopUtilization();
        cpu0 = process.cpuUsage();
      } else {
        busy = performance.eventLoopUtilization(elu0).active;
        const c = process.cpuUsage(cpu0);
        cpu = (c.user + c.system) / 1000;
      }
    });
    r.busyMs = busy / r.requests;
    r.cpuMs = cpu / r.requests;
    results.push(r);
    console.error(`${r.name}: ${r.rps.toFixed(0)} req/s p50 ${r.p50.toFixed(2)} ms p99 ${r.p99.toFixed(2)} ms errors ${r.errors}, serving thread ${r.busyMs.toFixed(3)} ms/request, process CPU ${r.cpuMs.toFixed(3)} ms/request`);
  }
  for (const s of stacks) await s.close();
  bare.close();
  await database.close();
  rmSync(dir, { recursive: true, force: true });

  const bareRps = results[0]!.rps;
  console.log(`\nNode ${process.version}, ${cpus().length} CPU(s), SQLite, one process, c=${concurrency}, ${seconds}s per scenario after ${warmup}s warm-up; src ${src}; load average at start ${load}, at end ${loadavg()[0]!.toFixed(2)}.\n`);
  console.log("| scenario | req/s | p50 ms | p99 ms | errors | share of bare http | serving thread ms/request | process CPU ms/request |");
  console.log("|---|---:|---:|---:|---:|---:|---:|---:|");
  for (const r of results) console.log(`| ${r.name} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.errors} | ${((100 * r.rps) / bareRps).toFixed(1)} % | ${r.busyMs!.toFixed(3)} | ${r.cpuMs!.toFixed(3)} |`);
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
  const figures = await closedLoop({ concurrency, warmupSeconds: warmup, seconds, send, onWindow: (edge) => parentPort!.postMessage({ edge }) });
  agent.destroy();
  const result: Result = { name, requests: figures.requests, errors: figures.errors, rps: figures.rps, p50: figures.p50, p99: figures.p99 };
  parentPort!.postMessage(result);
}

if (isMainThread) await main();
else await worker();
