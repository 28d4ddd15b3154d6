/**
 * Chat completions relay benchmark (issue 11): in one run, against a local fake upstream that speaks
 * OpenAI's wire format (test/helpers/fake-upstreams, in a worker thread of its own), the same requests sent (a) to the upstream directly,
 * (b) through a minimal Fastify + fetch (undici) relay written here, and (c) through Portico (core + gateway
 * in this process over the in-memory transport, as `portico serve` runs one worker; fresh SQLite; a BYOK
 * credential stored through the API). Load from a worker thread over keep-alive HTTP/1.1.
 *
 *   node bin/run-ts.mjs bench/chat-relay.ts [--seconds 5] [--warmup 1] [--rounds 3] [--streams 500]
 *
 * Reports per target: non-streaming p50 at c=1 and req/s + p99 at c=32; streaming time to first chunk p50
 * at c=1. "Added" figures subtract the direct ones. Then, with a second fake upstream that streams 100
 * numbered content chunks:
 * - CPU per relayed chunk: the main thread's CPU time (from /proc, so neither the load generator's thread nor
 *   the fake upstreams' thread is counted) over streams read at c=8, minus the same figure when the fake
 *   upstream is called directly, divided by the chunks the client received;
 * - integrity at `--streams` concurrent streams (all open at once): every stream's content must be exactly
 *   w0 … w99 in order and end with [DONE]; a lost, duplicated or reordered chunk makes the stream bad.
 */
import http from "node:http";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { runInWorker, startWorker } from "./lib/worker.js";
import { closedLoop, type LoadFigures } from "./lib/closed-loop.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};

interface Job {
  /** load: closed-loop figures; streams: `concurrency` loops × `rounds` long streams, each checked. */
  mode?: "load" | "streams";
  rounds?: number;
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
  // The fake upstreams run in a thread of their own, as a real upstream runs elsewhere: sharing the main
  // thread would add their CPU time to every relayed request (and to the relays' CPU per chunk).
  const fakes = await startWorker<{ fake: string; long: string }>(import.meta.url, { mode: "fakes" });
  const fake = { url: fakes.ready.fake };
  const long = { url: fakes.ready.long };

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
  relay.post("/long/v1/chat/completions", async (req, reply) => {
    const upstream = await fetch(`${long.url}/v1/chat/completions`, {
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
    PORTICO_PROVIDER_TOGETHER_BASE_URL: `${long.url}/v1`,
    // `--streams` streams of one key open at once: above the default per-key bound (64), the rest would be refused
    // with 429 and counted as failed streams.
    PORTICO_CHAT_MAX_CONCURRENT_PER_KEY: String(Math.max(64, streamsAtOnce)),
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
  const storedLong = await fetch(`${gw}/api/v1/byok`, {
    method: "POST",
    headers: { authorization: `Bearer ${boot.management_key}`, "content-type": "application/json" },
    body: JSON.stringify({ provider: "together", key: "tg-bench" }),
  });
  if (storedLong.status !== 200) throw new Error(`BYOK create: ${storedLong.status}`);

  const targets = [
    { name: "direct to the fake upstream", url: `${fake.url}/v1/chat/completions`, key: "direct-key", model: "llama-3.3-70b" },
    { name: "minimal Fastify + fetch relay", url: `http://127.0.0.1:${(relay.server.address() as { port: number }).port}/v1/chat/completions`, key: "x", model: "llama-3.3-70b" },
    { name: "Portico", url: `${gw}/api/v1/chat/completions`, key: boot.api_key!, model: "groq/llama-3.3-70b" },
  ];
  const load = loadavg()[0]!.toFixed(2);
  const rows: Array<{ name: string; c1: LoadFigures; c32: LoadFigures; ttfc: LoadFigures; c1Runs: number[]; ttfcRuns: number[] }> = [];
  const only = process.argv.includes("--only") ? process.argv[process.argv.indexOf("--only") + 1] : undefined;
  const skipped: LoadFigures = { requests: 0, errors: 0, seconds: 0, rps: NaN, p50: NaN, p99: NaN, max: NaN };
  const chosen = targets.filter((t) => !only || t.name === only);
  for (const t of chosen) rows.push({ name: t.name, c1: skipped, c32: skipped, ttfc: skipped, c1Runs: [], ttfcRuns: [] });
  const job = (t: (typeof targets)[number], stream: boolean, concurrency: number): Job => ({ url: t.url, key: t.key, model: t.model, stream, concurrency, seconds, warmup });
  const phase = (name: string, j: Job) => (phases.includes(name) ? runInWorker<LoadFigures>(import.meta.url, j) : Promise.resolve(skipped));
  // c=1 latencies drift with the machine (a virtual one wakes idle cores slowly): the targets take turns,
  // `--rounds` times, and the median of each target's per-round p50 is reported.
  for (let round = 0; round < rounds; round++) {
    for (const [i, t] of chosen.entries()) {
      const r = rows[i]!;
      const c1 = await phase("c1", job(t, false, 1));
      const ttfc = await phase("ttfc", job(t, true, 1));
      r.c1Runs.push(c1.p50);
      r.ttfcRuns.push(ttfc.p50);
      if (c1.errors + ttfc.errors > 0) r.c1 = { ...r.c1, errors: r.c1.errors + c1.errors + ttfc.errors };
    }
  }
  for (const [i, t] of chosen.entries()) {
    const r = rows[i]!;
    r.c1 = { ...r.c1, p50: median(r.c1Runs) };
    r.ttfc = { ...r.ttfc, p50: median(r.ttfcRuns) };
    r.c32 = await phase("c32", job(t, false, 32));
    console.error(`${t.name}: c=1 p50 ${r.c1Runs.map((v) => v.toFixed(3)).join("/")} ms, c=32 ${r.c32.rps.toFixed(0)} req/s p99 ${r.c32.p99.toFixed(2)} ms, TTFC p50 ${r.ttfcRuns.map((v) => v.toFixed(3)).join("/")} ms, errors ${r.c1.errors + r.c32.errors}`);
  }
  const relayPort = (relay.server.address() as { port: number }).port;
  const longTargets = [
    { name: "direct to the fake upstream", url: `${long.url}/v1/chat/completions`, key: "direct-key", model: "llama-3.3-70b" },
    { name: "minimal Fastify + fetch relay", url: `http://127.0.0.1:${relayPort}/long/v1/chat/completions`, key: "x", model: "llama-3.3-70b" },
    { name: "Portico", url: `${gw}/api/v1/chat/completions`, key: boot.api_key!, model: "together/llama-3.3-70b" },
  ];
  const streamRows: Array<{ name: string; cpu: StreamFigures & { cpuMs: number }; wide: StreamFigures }> = [];
  for (const t of only ? [] : longTargets) {
    const base = { url: t.url, key: t.key, model: t.model, stream: true, seconds, warmup, mode: "streams" as const };
    await runInWorker<StreamFigures>(import.meta.url, { ...base, concurrency: 8, rounds: 20 }); // warm-up
    const before = mainThreadCpuMs();
    const cpu = await runInWorker<StreamFigures>(import.meta.url, { ...base, concurrency: 8, rounds: Math.max(20, seconds * 40) });
    const cpuMs = mainThreadCpuMs() - before;
    const wide = await runInWorker<StreamFigures>(import.meta.url, { ...base, concurrency: streamsAtOnce, rounds: 2 });
    streamRows.push({ name: t.name, cpu: { ...cpu, cpuMs }, wide });
    console.error(`${t.name}: ${cpu.chunks} chunks in ${cpuMs.toFixed(0)} ms main-thread CPU; ${wide.streams} streams at c=${streamsAtOnce}: ${wide.bad} bad, ${wide.failed} failed`);
  }

  await gateway.close();
  await core.close();
  await database.close();
  await relay.close();
  await fakes.stop();
  rmSync(dir, { recursive: true, force: true });

  if (only) return;
  const direct = rows[0]!;
  const relayRow = rows[1]!;
  console.log(`\nNode ${process.version}, ${cpus().length} CPU(s), one process, ${seconds}s per scenario after ${warmup}s warm-up; c=1 and first-chunk p50: median of ${rounds} interleaved rounds; load average at start ${load}.\n`);
  console.log("| target | c=1 p50 ms (added) | c=32 req/s | c=32 p99 ms | stream: first chunk p50 ms (added) | errors |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    const added = (v: number, d: number) => (r === direct ? `${v.toFixed(3)}` : `${v.toFixed(3)} (+${(v - d).toFixed(3)})`);
    console.log(`| ${r.name} | ${added(r.c1.p50, direct.c1.p50)} | ${r.c32.rps.toFixed(0)} | ${r.c32.p99.toFixed(2)} | ${added(r.ttfc.p50, direct.ttfc.p50)} | ${r.c1.errors + r.c32.errors} |`);
  }
  const portico = rows[2]!;
  console.log(`\nc=32 throughput, Portico / minimal relay: ${((100 * portico.c32.rps) / relayRow.c32.rps).toFixed(1)} %`);

  const perChunkUs = (r: (typeof streamRows)[number]) => (1000 * r.cpu.cpuMs) / r.cpu.chunks;
  console.log(`\nStreams of ${LONG_TEXT.length} content chunks (${LONG_TEXT.length + 2} chunk events each with role and finish): main-thread CPU at c=8, and ${streamsAtOnce} streams open at once (2 rounds).\n`);
  console.log("| target | chunks read | main-thread CPU ms | µs per chunk | relay CPU per chunk µs | streams at once | bad streams | failed |");
  console.log("|---|---:|---:|---:|---:|---:|---:|---:|");
  for (const r of streamRows) {
    const relayUs = r === streamRows[0] ? "—" : (perChunkUs(r) - perChunkUs(streamRows[0]!)).toFixed(1);
    console.log(`| ${r.name} | ${r.cpu.chunks} | ${r.cpu.cpuMs.toFixed(0)} | ${perChunkUs(r).toFixed(1)} | ${relayUs} | ${r.wide.streams} | ${r.wide.bad} | ${r.wide.failed} |`);
  }
}

const LONG_TEXT = Array.from({ length: 100 }, (_, i) => `w${i} `);
const streamsAtOnce = arg("streams", 500);
const rounds = arg("rounds", 3);
const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted.length % 2 ? sorted[(sorted.length - 1) / 2]! : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2;
};
/** `--phases c1,ttfc` runs only those load phases (for profiling one of them); default all three. */
const phases = process.argv.includes("--phases") ? process.argv[process.argv.indexOf("--phases") + 1]!.split(",") : ["c1", "c32", "ttfc"];

/** utime + stime of the main thread (this process's first task), in ms; /proc counts in clock ticks. */
function mainThreadCpuMs(): number {
  const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // Fields 14 and 15 of stat(5); after the ")" the list starts at field 3.
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / CLOCK_TICKS;
}
const CLOCK_TICKS = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

interface StreamFigures {
  streams: number;
  /** Chunk events read (data lines other than [DONE]). */
  chunks: number;
  /** Streams whose content was not exactly w0 … w99 in order, or that did not end with [DONE]. */
  bad: number;
  /** Requests that failed (status, connection). */
  failed: number;
}

/** POSTs a JSON body with the job's key on a keep-alive agent (both load workers). */
function post(
  target: URL,
  key: string,
  agent: http.Agent,
  payload: string,
  onResponse: (res: http.IncomingMessage) => void,
  onError: () => void,
): void {
  const req = http.request(
    {
      agent,
      host: target.hostname,
      port: target.port,
      path: target.pathname,
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
    },
    onResponse,
  );
  req.on("error", onError);
  req.end(payload);
}

async function streamsWorker(job: Job): Promise<StreamFigures> {
  const target = new URL(job.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.concurrency });
  const payload = JSON.stringify({ model: job.model, messages: [{ role: "user", content: "Count." }], stream: true });
  const expected = LONG_TEXT.join("");
  const figures: StreamFigures = { streams: 0, chunks: 0, bad: 0, failed: 0 };
  const one = () =>
    new Promise<void>((resolve) => {
      post(
        target,
        job.key,
        agent,
        payload,
        (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (body += d));
          res.on("end", () => {
            figures.streams++;
            if (res.statusCode !== 200) {
              figures.failed++;
              return resolve();
            }
            let content = "";
            let done = false;
            for (const event of body.split("\n\n")) {
              const data = event.split("\n").find((l) => l.startsWith("data: "))?.slice(6);
              if (data === undefined) continue;
              if (data === "[DONE]") {
                done = true;
                continue;
              }
              figures.chunks++;
              content += JSON.parse(data).choices?.[0]?.delta?.content ?? "";
            }
            if (content !== expected || !done) figures.bad++;
            resolve();
          });
          res.on("error", () => {
            figures.failed++;
            resolve();
          });
        },
        () => {
          figures.streams++;
          figures.failed++;
          resolve();
        },
      );
    });
  await Promise.all(
    Array.from({ length: job.concurrency }, async () => {
      for (let i = 0; i < (job.rounds ?? 1); i++) await one();
    }),
  );
  agent.destroy();
  return figures;
}

/** The fake upstreams' thread: starts both, reports their URLs, closes them on "stop". */
async function fakesWorker(): Promise<void> {
  const { startFakeOpenAI } = await import("../test/helpers/fake-upstreams/openai.js");
  const fake = await startFakeOpenAI({ text: ["Hello", ", ", "world", "!"], finish: "stop", usage: { input: 12, output: 4 } });
  const long = await startFakeOpenAI({ text: LONG_TEXT, finish: "stop", usage: { input: 12, output: LONG_TEXT.length } });
  parentPort!.once("message", () => {
    void Promise.all([fake.close(), long.close()]).then(() => process.exit(0));
  });
  parentPort!.postMessage({ fake: fake.url, long: long.url });
}

async function worker(): Promise<void> {
  if ((workerData as { mode?: string }).mode === "fakes") return fakesWorker();
  const job = workerData as Job;
  if (job.mode === "streams") {
    parentPort!.postMessage(await streamsWorker(job));
    return;
  }
  const target = new URL(job.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.concurrency });
  const payload = JSON.stringify({ model: job.model, messages: [{ role: "user", content: "Say hello." }], stream: job.stream });
  // Streams: the latency is the time to the first `data:` event; the rest is read to the end.
  const send = () =>
    new Promise<{ ok: boolean; firstMs?: number }>((resolve) => {
      const t0 = process.hrtime.bigint();
      post(
        target,
        job.key,
        agent,
        payload,
        (res) => {
          let first: number | undefined;
          res.on("data", () => {
            first ??= Number(process.hrtime.bigint() - t0) / 1e6;
          });
          res.on("end", () => resolve({ ok: res.statusCode === 200, firstMs: first }));
        },
        () => resolve({ ok: false }),
      );
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
