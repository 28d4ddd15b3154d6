/**
 * The Anthropic Messages and OpenAI Responses dialects' added cost (issue 28): in one run, Portico (core + gateway
 * in this process over the in-memory transport, as `portico serve` runs one worker; fresh SQLite; BYOK credentials
 * stored through the API) answers the same prompt through `POST /api/v1/chat/completions`, `POST /api/v1/messages`
 * and `POST /api/v1/responses`,
 * against fake upstreams (OpenAI-compatible and Anthropic wire, in a worker thread of their own). Load from a
 * worker thread over keep-alive HTTP/1.1.
 *
 *   node bin/run-ts.mjs bench/messages-dialect.ts [--seconds 3] [--warmup 1] [--rounds 3]
 *
 * Reports per (route, upstream): non-streaming p50 at c=1 and streaming time to first event p50 at c=1 (the
 * median of `--rounds` interleaved rounds, the targets taking turns), and the main thread's CPU per relayed
 * event over streams of 100 content pieces at c=8 (events: SSE `data:` frames the client read; for /messages
 * that counts message_start, ping, block start/stop, message_delta and message_stop too, for /responses the
 * created, in_progress, item and part events and completed, so the per-piece figure is also given).
 */
import http from "node:http";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { runInWorker, startWorker } from "./lib/worker.js";
import { closedLoop, type LoadFigures } from "./lib/closed-loop.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const LONG_TEXT = Array.from({ length: 100 }, (_, i) => `w${i} `);
const CLOCK_TICKS = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

function mainThreadCpuMs(): number {
  const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}

interface Job {
  mode: "load" | "streams";
  url: string;
  key: string;
  body: Record<string, unknown>;
  concurrency: number;
  seconds: number;
  warmup: number;
  rounds?: number;
  /** Resolve at the first body bytes (time to first event) instead of the end. */
  firstByte?: boolean;
}

interface StreamFigures {
  streams: number;
  events: number;
  /** Streams whose text was not exactly w0 … w99. */
  bad: number;
  failed: number;
}

function post(job: Job, agent: http.Agent, onResponse: (res: http.IncomingMessage) => void, onError: () => void): void {
  const target = new URL(job.url);
  const payload = JSON.stringify(job.body);
  const req = http.request(
    {
      agent,
      host: target.hostname,
      port: target.port,
      path: target.pathname,
      method: "POST",
      headers: { authorization: `Bearer ${job.key}`, "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
    },
    onResponse,
  );
  req.on("error", onError);
  req.end(payload);
}

async function loadWorker(job: Job): Promise<LoadFigures> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.concurrency });
  const figures = await closedLoop({
    concurrency: job.concurrency,
    warmupSeconds: job.warmup,
    seconds: job.seconds,
    send: () =>
      new Promise<boolean>((resolve) => {
        post(
          job,
          agent,
          (res) => {
            let first = true;
            res.on("data", () => {
              if (first && job.firstByte) resolve(res.statusCode === 200);
              first = false;
            });
            res.on("end", () => resolve(res.statusCode === 200));
          },
          () => resolve(false),
        );
      }),
  });
  agent.destroy();
  return figures;
}

async function streamsWorker(job: Job): Promise<StreamFigures> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.concurrency });
  const figures: StreamFigures = { streams: 0, events: 0, bad: 0, failed: 0 };
  const expected = LONG_TEXT.join("");
  const one = () =>
    new Promise<void>((resolve) => {
      post(
        job,
        agent,
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
            let text = "";
            for (const frame of body.split("\n\n")) {
              const data = frame.split("\n").find((l) => l.startsWith("data: "))?.slice(6);
              if (data === undefined || data === "[DONE]") continue;
              figures.events++;
              const o = JSON.parse(data);
              if (o.type === "response.output_text.delta") text += o.delta;
              else text += o.choices?.[0]?.delta?.content ?? (o.delta?.type === "text_delta" ? o.delta.text : "");
            }
            if (text !== expected) figures.bad++;
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
  await Promise.all(Array.from({ length: job.concurrency }, async () => {
    for (let i = 0; i < (job.rounds ?? 1); i++) await one();
  }));
  agent.destroy();
  return figures;
}

async function fakesWorker(): Promise<void> {
  const { startFakeOpenAI } = await import("../test/helpers/fake-upstreams/openai.js");
  const { startFakeAnthropic } = await import("../test/helpers/fake-upstreams/anthropic.js");
  const short = { text: ["Hello", ", ", "world", "!"], usage: { input: 12, output: 4 } };
  const long = { text: LONG_TEXT, usage: { input: 12, output: LONG_TEXT.length } };
  const fakes = [
    await startFakeOpenAI({ ...short, finish: "stop" }),
    await startFakeOpenAI({ ...long, finish: "stop" }),
    await startFakeAnthropic({ ...short, finish: "end_turn" }),
    await startFakeAnthropic({ ...long, finish: "end_turn" }),
  ];
  parentPort!.once("message", () => void Promise.all(fakes.map((f) => f.close())).then(() => process.exit(0)));
  parentPort!.postMessage(fakes.map((f) => f.url));
}

async function main(): Promise<void> {
  const seconds = arg("seconds", 3);
  const warmup = arg("warmup", 1);
  const rounds = arg("rounds", 3);
  const fakes = await startWorker<string[]>(import.meta.url, { mode: "fakes" });
  const [oaShort, oaLong, anShort, anLong] = fakes.ready as [string, string, string, string];

  const { openDatabase } = await import("../src/db/client.js");
  const { createCore } = await import("../src/core/core.js");
  const { buildGateway } = await import("../src/gateway/app.js");
  const { bootstrap } = await import("../src/core/identity/bootstrap.js");
  const { createLogger } = await import("../src/log.js");
  const { createMetrics } = await import("../src/lib/metrics.js");
  const { loadConfig } = await import("../src/config.js");
  const dir = mkdtempSync(join(tmpdir(), "portico-bench-messages-"));
  const database = await openDatabase({ dataDir: join(dir, "data") });
  const logger = createLogger({ level: "warn", destination: new Writable({ write: (_c, _e, cb) => cb() }) });
  const config = loadConfig({
    PORTICO_DATA_DIR: join(dir, "data"),
    HOST: "127.0.0.1",
    PORT: "0",
    PORTICO_GRPC_PORT: "0",
    PORTICO_EMBEDDED_HOST: "false",
    PORTICO_PROVIDER_GROQ_BASE_URL: `${oaShort}/v1`,
    PORTICO_PROVIDER_TOGETHER_BASE_URL: `${oaLong}/v1`,
    PORTICO_PROVIDER_ANTHROPIC_BASE_URL: anShort,
  });
  const metrics = createMetrics();
  const core = await createCore({ database, config, logger, metrics });
  const gateway = await buildGateway({ transport: core.createInMemoryTransport(), logger, metrics, bodyLimitBytes: config.bodyLimitBytes, brand: config.brand });
  await gateway.listen({ host: "127.0.0.1", port: 0 });
  const boot = await bootstrap(database.db, []);
  const gw = `http://127.0.0.1:${(gateway.server.address() as { port: number }).port}`;
  for (const provider of ["groq", "together", "anthropic"]) {
    const res = await fetch(`${gw}/api/v1/byok`, {
      method: "POST",
      headers: { authorization: `Bearer ${boot.management_key}`, "content-type": "application/json" },
      body: JSON.stringify({ provider, key: `${provider}-bench` }),
    });
    if (res.status !== 200) throw new Error(`BYOK ${provider}: ${res.status}`);
  }
  const key = boot.api_key!;
  const prompt = [{ role: "user", content: "Say hello." }];
  const chat = (model: string) => ({ url: `${gw}/api/v1/chat/completions`, body: { model, messages: prompt } });
  const messages = (model: string) => ({ url: `${gw}/api/v1/messages`, body: { model, max_tokens: 256, messages: prompt } });
  const responses = (model: string) => ({ url: `${gw}/api/v1/responses`, body: { model, max_output_tokens: 256, input: prompt } });
  // `base`: the chat/completions target each one is compared with.
  const targets = [
    { name: "chat/completions → OpenAI-compatible", base: 0, ...chat("groq/llama-3.3-70b"), long: chat("together/llama-3.3-70b") },
    { name: "messages → OpenAI-compatible", base: 0, ...messages("groq/llama-3.3-70b"), long: messages("together/llama-3.3-70b") },
    { name: "responses → OpenAI-compatible", base: 0, ...responses("groq/llama-3.3-70b"), long: responses("together/llama-3.3-70b") },
    { name: "chat/completions → Anthropic", base: 3, ...chat("anthropic/claude-sonnet-4"), long: undefined },
    { name: "messages → Anthropic", base: 3, ...messages("anthropic/claude-sonnet-4"), long: undefined },
    { name: "responses → Anthropic", base: 3, ...responses("anthropic/claude-sonnet-4"), long: undefined },
  ];
  const load = loadavg().map((v) => v.toFixed(2)).join(" ");
  const c1: number[][] = targets.map(() => []);
  const ttfe: number[][] = targets.map(() => []);
  let errors = 0;
  for (let round = 0; round < rounds; round++) {
    for (const [i, t] of targets.entries()) {
      const a = await runInWorker<LoadFigures>(import.meta.url, { mode: "load", url: t.url, key, body: t.body, concurrency: 1, seconds, warmup } satisfies Job);
      const b = await runInWorker<LoadFigures>(import.meta.url, { mode: "load", url: t.url, key, body: { ...t.body, stream: true }, concurrency: 1, seconds, warmup, firstByte: true } satisfies Job);
      c1[i]!.push(a.p50);
      ttfe[i]!.push(b.p50);
      errors += a.errors + b.errors;
    }
  }
  const cpu: Array<{ name: string; figures: StreamFigures; cpuMs: number } | undefined> = [];
  for (const t of targets) {
    if (!t.long) {
      cpu.push(undefined);
      continue;
    }
    const job: Job = { mode: "streams", url: t.long.url, key, body: { ...t.long.body, stream: true }, concurrency: 8, seconds, warmup, rounds: 20 };
    await runInWorker<StreamFigures>(import.meta.url, job);
    const before = mainThreadCpuMs();
    const figures = await runInWorker<StreamFigures>(import.meta.url, { ...job, rounds: Math.max(20, seconds * 40) });
    cpu.push({ name: t.name, figures, cpuMs: mainThreadCpuMs() - before });
  }
  await gateway.close();
  await core.close();
  await database.close();
  await fakes.stop();
  rmSync(dir, { recursive: true, force: true });

  console.log(`\nNode ${process.version}, ${cpus().length} CPU(s), one process; ${seconds}s per scenario after ${warmup}s warm-up; p50s are the median of ${rounds} interleaved rounds; load average at start ${load}; errors ${errors}.\n`);
  console.log("| route → upstream | c=1 p50 ms | vs chat/completions | c=1 first event p50 ms | vs chat/completions |");
  console.log("|---|---:|---:|---:|---:|");
  for (const [i, t] of targets.entries()) {
    const base = t.base;
    const d = (xs: number[][]) => (i === base ? "—" : `${(median(xs[i]!) - median(xs[base]!)) >= 0 ? "+" : ""}${(median(xs[i]!) - median(xs[base]!)).toFixed(3)}`);
    console.log(`| ${t.name} | ${median(c1[i]!).toFixed(3)} | ${d(c1)} | ${median(ttfe[i]!).toFixed(3)} | ${d(ttfe)} |`);
  }
  console.log(`\nStreams of ${LONG_TEXT.length} text pieces from an OpenAI-compatible upstream at c=8: main-thread CPU.\n`);
  console.log("| route | streams (bad, failed) | events read | CPU ms | µs per event | µs per text piece |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const r of cpu) {
    if (!r) continue;
    const f = r.figures;
    console.log(`| ${r.name} | ${f.streams} (${f.bad}, ${f.failed}) | ${f.events} | ${r.cpuMs.toFixed(0)} | ${((1000 * r.cpuMs) / f.events).toFixed(1)} | ${((1000 * r.cpuMs) / (f.streams * LONG_TEXT.length)).toFixed(1)} |`);
  }
}

async function worker(): Promise<void> {
  const data = workerData as Job | { mode: "fakes" };
  if (data.mode === "fakes") return fakesWorker();
  parentPort!.postMessage(data.mode === "streams" ? await streamsWorker(data) : await loadWorker(data));
}

if (isMainThread) {
  main().then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
} else {
  void worker();
}
