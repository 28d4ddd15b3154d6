/**
 * Chat completions relay benchmark (issue 11): in one run, against one local fake upstream that speaks
 * OpenAI's wire format (test/helpers/fake-upstreams), the same requests sent (a) to the upstream directly,
 * (b) through a minimal Fastify + fetch (undici) relay written here, and (c) through Portico (core + gateway
 * in this process over the in-memory transport, as `portico serve` runs one worker; fresh SQLite; a BYOK
 * credential stored through the API). Load from a worker thread over keep-alive HTTP/1.1.
 *
 *   node bin/run-ts.mjs bench/chat-relay.ts [--seconds 5] [--warmup 1]
 *
 * Reports per target: non-streaming p50 at c=1 and req/s + p99 at c=32; streaming time to first chunk p50
 * at c=1. "Added" figures subtract the direct ones.
 */
import http from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { runInWorker } from "./lib/worker.js";
import { closedLoop, type LoadFigures } from "./lib/closed-loop.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};

interface Job {
  url: string;
  key: string;
  model: string;
  stream: boolean;
  concurrency: number;
  seconds: number;
  warmup: number;
}

async function main(): Promise<void> {
  const seconds = arg("seconds", 5);
  const warmup = arg("warmup", 1);
  const { startFakeOpenAI } = await import("../test/helpers/fake-upstreams/openai.js");
  const fake = await startFakeOpenAI({ text: ["Hello", ", ", "world", "!"], finish: "stop", usage: { input: 12, output: 4 } });

  // (b) the minimal relay
  const { fastify } = await import("fastify");
  const relay = fastify();
  relay.post("/v1/chat/completions", async (req, reply) => {
    const upstream = await fetch(`${fake.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer relay-key" },
      body: JSON.stringify(req.body),
    });
    reply.code(upstream.status).header("content-type", upstream.headers.get("content-type") ?? "application/json");
    return reply.send(Readable.fromWeb(upstream.body as never));
  });
  await relay.listen({ host: "127.0.0.1", port: 0 });

  // (c) Portico
  const { openDatabase } = await import("../src/db/client.js");
  const { createCore } = await import("../src/core/core.js");
  const { buildGateway } = await import("../src/gateway/app.js");
  const { bootstrap } = await import("../src/core/identity/bootstrap.js");
  const { createLogger } = await import("../src/log.js");
  const { createMetrics } = await import("../src/lib/metrics.js");
  const { loadConfig } = await import("../src/config.js");
  const dir = mkdtempSync(join(tmpdir(), "portico-bench-chat-"));
  const database = await openDatabase({ dataDir: join(dir, "data") });
  const logger = createLogger({ level: "warn", destination: new Writable({ write: (_c, _e, cb) => cb() }) });
  const config = loadConfig({
    PORTICO_DATA_DIR: join(dir, "data"),
    HOST: "127.0.0.1",
    PORT: "0",
    PORTICO_GRPC_PORT: "0",
    PORTICO_EMBEDDED_HOST: "false",
    PORTICO_PROVIDER_GROQ_BASE_URL: `${fake.url}/v1`,
  });
  const metrics = createMetrics();
  const core = await createCore({ database, config, logger, metrics });
  const gateway = await buildGateway({ transport: core.createInMemoryTransport(), logger, metrics, bodyLimitBytes: config.bodyLimitBytes, brand: config.brand });
  await gateway.listen({ host: "127.0.0.1", port: 0 });
  const boot = await bootstrap(database.db, []);
  const gw = `http://127.0.0.1:${(gateway.server.address() as { port: number }).port}`;
  const stored = await fetch(`${gw}/api/v1/byok`, {
    method: "POST",
    headers: { authorization: `Bearer ${boot.management_key}`, "content-type": "application/json" },
    body: JSON.stringify({ provider: "groq", key: "gsk-bench" }),
  });
  if (stored.status !== 200) throw new Error(`BYOK create: ${stored.status}`);

  const targets = [
    { name: "direct to the fake upstream", url: `${fake.url}/v1/chat/completions`, key: "direct-key", model: "llama-3.3-70b" },
    { name: "minimal Fastify + fetch relay", url: `http://127.0.0.1:${(relay.server.address() as { port: number }).port}/v1/chat/completions`, key: "x", model: "llama-3.3-70b" },
    { name: "Portico", url: `${gw}/api/v1/chat/completions`, key: boot.api_key!, model: "groq/llama-3.3-70b" },
  ];
  const load = loadavg()[0]!.toFixed(2);
  const rows: Array<{ name: string; c1: LoadFigures; c32: LoadFigures; ttfc: LoadFigures }> = [];
  for (const t of targets) {
    const job = (stream: boolean, concurrency: number): Job => ({ url: t.url, key: t.key, model: t.model, stream, concurrency, seconds, warmup });
    const c1 = await runInWorker<LoadFigures>(import.meta.url, job(false, 1));
    const c32 = await runInWorker<LoadFigures>(import.meta.url, job(false, 32));
    const ttfc = await runInWorker<LoadFigures>(import.meta.url, job(true, 1));
    rows.push({ name: t.name, c1, c32, ttfc });
    console.error(`${t.name}: c=1 p50 ${c1.p50.toFixed(3)} ms, c=32 ${c32.rps.toFixed(0)} req/s p99 ${c32.p99.toFixed(2)} ms, TTFC p50 ${ttfc.p50.toFixed(3)} ms, errors ${c1.errors + c32.errors + ttfc.errors}`);
  }
  await gateway.close();
  await core.close();
  await database.close();
  await relay.close();
  await fake.close();
  rmSync(dir, { recursive: true, force: true });

  const direct = rows[0]!;
  const relayRow = rows[1]!;
  console.log(`\nNode ${process.version}, ${cpus().length} CPU(s), one process, ${seconds}s per scenario after ${warmup}s warm-up; load average at start ${load}.\n`);
  console.log("| target | c=1 p50 ms (added) | c=32 req/s | c=32 p99 ms | stream: first chunk p50 ms (added) | errors |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    const added = (v: number, d: number) => (r === direct ? `${v.toFixed(3)}` : `${v.toFixed(3)} (+${(v - d).toFixed(3)})`);
    console.log(`| ${r.name} | ${added(r.c1.p50, direct.c1.p50)} | ${r.c32.rps.toFixed(0)} | ${r.c32.p99.toFixed(2)} | ${added(r.ttfc.p50, direct.ttfc.p50)} | ${r.c1.errors + r.c32.errors + r.ttfc.errors} |`);
  }
  const portico = rows[2]!;
  console.log(`\nc=32 throughput, Portico / minimal relay: ${((100 * portico.c32.rps) / relayRow.c32.rps).toFixed(1)} %`);
}

async function worker(): Promise<void> {
  const job = workerData as Job;
  const target = new URL(job.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.concurrency });
  const payload = JSON.stringify({ model: job.model, messages: [{ role: "user", content: "Say hello." }], stream: job.stream });
  // Streams: the latency is the time to the first `data:` event; the rest is read to the end.
  const send = () =>
    new Promise<{ ok: boolean; firstMs?: number }>((resolve) => {
      const t0 = process.hrtime.bigint();
      const req = http.request(
        {
          agent,
          host: target.hostname,
          port: target.port,
          path: target.pathname,
          method: "POST",
          headers: { authorization: `Bearer ${job.key}`, "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
        },
        (res) => {
          let first: number | undefined;
          res.on("data", () => {
            first ??= Number(process.hrtime.bigint() - t0) / 1e6;
          });
          res.on("end", () => resolve({ ok: res.statusCode === 200, firstMs: first }));
        },
      );
      req.on("error", () => resolve({ ok: false }));
      req.end(payload);
    });
  let firsts: number[] = [];
  const figures = await closedLoop({
    concurrency: job.concurrency,
    warmupSeconds: job.warmup,
    seconds: job.seconds,
    send: async () => {
      const r = await send();
      if (job.stream && r.firstMs !== undefined) firsts.push(r.firstMs);
      return r.ok;
    },
  });
  agent.destroy();
  if (job.stream) {
    // Report time to first chunk in place of whole-response latency.
    firsts = firsts.slice(Math.floor(firsts.length * (job.warmup / (job.warmup + job.seconds))));
    firsts.sort((a, b) => a - b);
    figures.p50 = firsts[Math.floor(firsts.length / 2)] ?? NaN;
    figures.p99 = firsts[Math.min(firsts.length - 1, Math.floor(firsts.length * 0.99))] ?? NaN;
  }
  parentPort!.postMessage(figures);
}

if (isMainThread) await main();
else await worker();
