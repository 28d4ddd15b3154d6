/**
 * `portico serve` with one worker process vs one per CPU (issue 12): the real command on a fresh SQLite
 * data folder, load from a worker thread of this process over keep-alive HTTP/1.1 (c connections;
 * the cluster spreads connections over the workers). Scenarios: `GET /api/v1/key` and preset creation
 * (one slug per connection).
 *
 *   node bin/run-ts.mjs bench/serve-workers.ts [--seconds 5] [--warmup 1] [--concurrency 32] [--workers 1,2]
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import http from "node:http";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { runInWorker } from "./lib/worker.js";
import { closedLoop } from "./lib/closed-loop.js";

interface Result {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : fallback;
};
const BODY = JSON.stringify({
  model: "openai/gpt-4o",
  messages: [
    { role: "system", content: "You are a helpful assistant." },
    { role: "user", content: "Hello!" },
  ],
  temperature: 0.7,
});

async function startServe(workers: number): Promise<{ child: ChildProcess; api: string; keys: { management: string; api: string }; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), "portico-bench-serve-"));
  const child = spawn(process.execPath, [resolve(import.meta.dirname, "..", "bin", "portico.mjs"), "serve"], {
    env: { ...process.env, PORT: "0", PORTICO_GRPC_PORT: "0", PORTICO_DATA_DIR: dir, PORTICO_LOG_LEVEL: "info", PORTICO_WORKERS: String(workers), PORTICO_EMBEDDED_HOST: "false" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  return new Promise((resolvePromise, reject) => {
    const check = () => {
      const api = /"url":"(http:\/\/127\.0\.0\.1:\d+\/api\/v1)","msg":"gateway listening/.exec(out)?.[1];
      const mk = /management key:\s+(pk-v1-[0-9a-f]+)/.exec(out)?.[1];
      const ak = /api key:\s+(pk-v1-[0-9a-f]+)/.exec(out)?.[1];
      const ready = workers > 1 ? out.includes("serving with worker processes") : out.includes("gateway listening");
      if (api && mk && ak && ready) resolvePromise({ child, api, keys: { management: mk, api: ak }, dir });
    };
    child.stdout!.on("data", (d) => ((out += d), check()));
    child.stderr!.on("data", (d) => ((out += d), check()));
    child.once("exit", (code) => reject(new Error(`serve exited ${code}\n${out}`)));
  });
}

async function main(): Promise<void> {
  const seconds = Number(arg("seconds", "5"));
  const warmup = Number(arg("warmup", "1"));
  const concurrency = Number(arg("concurrency", "32"));
  const counts = arg("workers", `1,${cpus().length}`).split(",").map(Number);
  const rows: string[] = [];
  const load = loadavg()[0]!.toFixed(2);
  for (const workers of counts) {
    const s = await startServe(workers);
    for (const scenario of ["GET /api/v1/key", "POST /presets/{slug}/chat/completions"] as const) {
      const r = await runInWorker<Result>(import.meta.url, { api: s.api, key: scenario.startsWith("GET") ? s.keys.api : s.keys.management, scenario, seconds, warmup, concurrency, tag: `w${workers}` });
      rows.push(`| ${scenario} | ${workers} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.errors} |`);
      console.error(rows.at(-1));
    }
    const gone = new Promise((r) => s.child.once("exit", r));
    s.child.kill("SIGTERM");
    await gone;
    rmSync(s.dir, { recursive: true, force: true });
  }
  console.log(`\nNode ${process.version}, ${cpus().length} CPU(s), SQLite, c=${concurrency}, ${seconds}s after ${warmup}s warm-up, load from a thread of the bench process; load average at start ${load}.\n`);
  console.log("| scenario | workers | req/s | p50 ms | p99 ms | errors |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const r of rows) console.log(r);
}

async function worker(): Promise<void> {
  const { api, key, scenario, seconds, warmup, concurrency, tag } = workerData as { api: string; key: string; scenario: string; seconds: number; warmup: number; concurrency: number; tag: string };
  const target = new URL(api);
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const send = (conn: number) =>
    new Promise<boolean>((done) => {
      const post = scenario.startsWith("POST");
      const req = http.request(
        {
          agent,
          host: target.hostname,
          port: target.port,
          method: post ? "POST" : "GET",
          path: post ? `${target.pathname}/presets/${tag}-c${conn}/chat/completions` : `${target.pathname}/key`,
          headers: { authorization: `Bearer ${key}`, ...(post ? { "content-type": "application/json", "content-length": Buffer.byteLength(BODY) } : {}) },
        },
        (res) => {
          res.resume();
          res.on("end", () => done(res.statusCode === 200));
        },
      );
      req.on("error", () => done(false));
      req.end(post ? BODY : undefined);
    });
  const figures = await closedLoop({ concurrency, warmupSeconds: warmup, seconds, send });
  agent.destroy();
  parentPort!.postMessage({ rps: figures.rps, p50: figures.p50, p99: figures.p99, errors: figures.errors } satisfies Result);
}

if (isMainThread) await main();
else await worker();
