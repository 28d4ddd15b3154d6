/**
 * The Anthropic Messages and OpenAI Responses dialects' added cost (issue 28, "Speed"): in one run, Portico (core +
 * gateway in this process over the in-memory transport, as `portico serve` runs one worker; fresh SQLite; BYOK
 * credentials stored through the API) answers the same prompt through `POST /api/v1/chat/completions`,
 * `POST /api/v1/messages` and `POST /api/v1/responses`, against the same fake upstreams (OpenAI-compatible chat and
 * Anthropic Messages wire, in a worker thread of their own), side by side:
 *
 * - OpenAI-compatible chat upstream: chat completions (same dialect), /messages and /responses (translated);
 * - Anthropic upstream: /messages (same dialect; the body still goes through the canonical request), chat
 *   completions and /responses (translated). There is no OpenAI Responses upstream adapter: /responses is always
 *   translated to chat completions' canonical request.
 *
 * Load from worker threads over keep-alive HTTP/1.1.
 *
 *   node bin/run-ts.mjs bench/messages-dialect.ts [--seconds 2] [--warmup 1] [--rounds 3] [--streams 160]
 *       [--requests 400] [--phase latency|cpu] [--only <regexp over target names>]
 *
 * Reports, per (route, upstream), each figure the median of `--rounds` interleaved rounds (the targets taking
 * turns) with the rounds' range, and its difference from chat completions against the same upstream, of the medians
 * and of the best rounds (on a shared machine other work only adds time, so the best rounds are the least disturbed):
 *
 * - latency phase, c=1: non-streaming p50 (end to end) and Portico's added latency p50 (the `x-portico-overhead-ms`
 *   header: time in Portico minus the wait on the provider); streaming time to first event p50 (first body bytes)
 *   and added time to first chunk p50 (the header at stream open);
 * - cpu phase: the main thread's CPU (schedstat; the fakes and the load run in other threads, and each load worker
 *   opens the window after its own start-up and one request per connection) per non-streaming request (`--requests` at c=4) and per relayed event over streams of 100 text pieces
 *   (`--streams` at c=8; every stream's text checked). Events are SSE `data:` frames the client read: /messages
 *   also sends message_start, ping, block start/stop, message_delta and message_stop, /responses created,
 *   in_progress, item and part events and completed, so the per-text-piece figure is given too.
 *
 * For a profile: `node --cpu-prof --cpu-prof-dir=<dir> bin/run-ts.mjs bench/messages-dialect.ts --phase cpu
 * --only '^messages'`, then `node bench/lib/profile-summary.mjs <dir>/<main thread's file>`.
 */
import http from "node:http";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { runInWorker, startWorker } from "./lib/worker.js";
import { closedLoop, type LoadFigures } from "./lib/closed-loop.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const argText = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const LONG_TEXT = Array.from({ length: 100 }, (_, i) => `w${i} `);
const CLOCK_TICKS = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
const median = (xs: number[]) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** The main thread's CPU time in ms: schedstat's nanoseconds on a CPU when the kernel has them, else stat's ticks. */
function mainThreadCpuMs(): number {
  try {
    return Number(readFileSync(`/proc/${process.pid}/task/${process.pid}/schedstat`, "utf8").split(" ")[0]) / 1e6;
  } catch {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  }
}

interface Job {
  mode: "load" | "streams";
  url: string;
  key: string;
  body: Record<string, unknown>;
  concurrency: number;
  seconds: number;
  warmup: number;
  /** streams mode: requests per connection. */
  rounds?: number;
  /** Resolve at the first body bytes (time to first event) instead of the end. */
  firstByte?: boolean;
}

/** Closed-loop figures and the p50 of the `x-portico-overhead-ms` header over the measured window. */
interface LatencyFigures extends LoadFigures {
  overheadP50: number;
}

interface StreamFigures {
  streams: number;
  events: number;
  /** Streams whose text was not exactly w0 … w99 (non-streaming: bodies without the expected text). */
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

async function loadWorker(job: Job): Promise<LatencyFigures> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.concurrency });
  const overheads: number[] = [];
  let measuring = false;
  const figures = await closedLoop({
    concurrency: job.concurrency,
    warmupSeconds: job.warmup,
    seconds: job.seconds,
    onWindow: (edge) => (measuring = edge === "start"),
    send: () =>
      new Promise<boolean>((resolve) => {
        post(
          job,
          agent,
          (res) => {
            const o = Number(res.headers["x-portico-overhead-ms"]);
            if (measuring && Number.isFinite(o)) overheads.push(o);
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
  return { ...figures, overheadP50: median(overheads) };
}

/** `rounds` requests per connection at `concurrency`; streams are read to the end and their text checked. */
async function streamsWorker(job: Job): Promise<StreamFigures> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.concurrency });
  const figures: StreamFigures = { streams: 0, events: 0, bad: 0, failed: 0 };
  const streaming = job.body.stream === true;
  const expected = streaming ? LONG_TEXT.join("") : "Hello, world!";
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
            if (!streaming) {
              if (!body.includes(expected)) figures.bad++;
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
  // One request per connection first (connections open, the worker's code warm), then the measured window: the
  // main thread reads its CPU when told it starts, so the worker's own start-up is not counted.
  await Promise.all(Array.from({ length: job.concurrency }, () => one()));
  Object.assign(figures, { streams: 0, events: 0, bad: 0, failed: 0 });
  parentPort?.postMessage({ window: "start" });
  await Promise.all(
    Array.from({ length: job.concurrency }, async () => {
      for (let i = 0; i < (job.rounds ?? 1); i++) await one();
    }),
  );
  agent.destroy();
  return figures;
}

/**
 * Runs a streams job in a worker thread; the main thread's CPU (ms) from the worker's "start" message (after its
 * start-up and first requests) to its answer.
 */
function measuredStreams(job: Job): Promise<{ figures: StreamFigures; cpuMs: number }> {
  return new Promise((resolve, reject) => {
    const boot = `import { register } from ${JSON.stringify(import.meta.resolve("tsx/esm/api"))}; register(); await import(${JSON.stringify(import.meta.url)});`;
    const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(boot)}`), { workerData: job });
    let start: number | undefined;
    worker.on("message", (m: StreamFigures | { window: "start" }) => {
      if ("window" in m) start = mainThreadCpuMs();
      else resolve({ figures: m, cpuMs: mainThreadCpuMs() - (start ?? NaN) });
    });
    worker.once("error", reject);
    worker.once("exit", (code) => code !== 0 && reject(new Error(`worker exited with ${code}`)));
  });
}

/** Models whose name contains this get the 100-piece script from the Anthropic fake (one Anthropic provider). */
const LONG_MARK = "long";

async function fakesWorker(): Promise<void> {
  const { startFakeOpenAI } = await import("../test/helpers/fake-upstreams/openai.js");
  const { anthropicWire } = await import("../test/helpers/fake-upstreams/anthropic.js");
  const { startFake } = await import("../test/helpers/fake-upstreams/server.js");
  const short = { text: ["Hello", ", ", "world", "!"], usage: { input: 12, output: 4 } };
  const long = { text: LONG_TEXT, usage: { input: 12, output: LONG_TEXT.length } };
  const anShort = { ...short, finish: "end_turn" };
  const anLong = { ...long, finish: "end_turn" };
  const pick = (req: { body?: { model?: unknown } }) => (String(req.body?.model ?? "").includes(LONG_MARK) ? anLong : anShort);
  const fakes = [
    await startFakeOpenAI({ ...short, finish: "stop" }),
    await startFakeOpenAI({ ...long, finish: "stop" }),
    await startFake(
      { ...anthropicWire, completion: (_s, req) => anthropicWire.completion(pick(req), req), streamEvents: (_s, req) => anthropicWire.streamEvents(pick(req), req) },
      anShort,
    ),
  ];
  // The fakes record every request; a long run would keep them all.
  const trim = setInterval(() => fakes.forEach((f) => f.requests.splice(0)), 1000);
  parentPort!.once("message", () => {
    clearInterval(trim);
    void Promise.all(fakes.map((f) => f.close())).then(() => process.exit(0));
  });
  parentPort!.postMessage(fakes.map((f) => f.url));
}

interface Target {
  name: string;
  /** The index of the chat/completions target against the same upstream (itself for a base). */
  base: number;
  url: string;
  body: Record<string, unknown>;
  long: { url: string; body: Record<string, unknown> };
}

async function main(): Promise<void> {
  const seconds = arg("seconds", 2);
  const warmup = arg("warmup", 1);
  const rounds = arg("rounds", 3);
  const streamsPerRound = arg("streams", 160);
  const requestsPerRound = arg("requests", 400);
  const phase = argText("phase");
  const only = argText("only");
  const fakes = await startWorker<string[]>(import.meta.url, { mode: "fakes" });
  const [oaShort, oaLong, an] = fakes.ready as [string, string, string];

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
    PORTICO_PROVIDER_ANTHROPIC_BASE_URL: an,
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
  const OA = "groq/llama-3.3-70b";
  const OA_LONG = "together/llama-3.3-70b";
  const AN = "anthropic/claude-sonnet-4";
  const AN_LONG = `anthropic/claude-sonnet-4-${LONG_MARK}`;
  const all: Target[] = [
    { name: "chat/completions → OpenAI-compatible (same dialect)", base: 0, ...chat(OA), long: chat(OA_LONG) },
    { name: "messages → OpenAI-compatible (translated)", base: 0, ...messages(OA), long: messages(OA_LONG) },
    { name: "responses → OpenAI-compatible (translated)", base: 0, ...responses(OA), long: responses(OA_LONG) },
    { name: "chat/completions → Anthropic (translated)", base: 3, ...chat(AN), long: chat(AN_LONG) },
    { name: "messages → Anthropic (same dialect)", base: 3, ...messages(AN), long: messages(AN_LONG) },
    { name: "responses → Anthropic (translated)", base: 3, ...responses(AN), long: responses(AN_LONG) },
  ];
  const pattern = only ? new RegExp(only) : undefined;
  const targets = all.filter((t) => !pattern || pattern.test(t.name));
  const baseOf = (t: Target) => targets.indexOf(all[t.base]!);
  const load = loadavg().map((v) => v.toFixed(2)).join(" ");

  const c1: number[][] = targets.map(() => []);
  const c1Over: number[][] = targets.map(() => []);
  const ttfe: number[][] = targets.map(() => []);
  const ttfeOver: number[][] = targets.map(() => []);
  let errors = 0;
  if (phase === undefined || phase === "latency") {
    for (let round = 0; round < rounds; round++) {
      for (const [i, t] of targets.entries()) {
        const a = await runInWorker<LatencyFigures>(import.meta.url, { mode: "load", url: t.url, key, body: t.body, concurrency: 1, seconds, warmup } satisfies Job);
        const b = await runInWorker<LatencyFigures>(import.meta.url, { mode: "load", url: t.url, key, body: { ...t.body, stream: true }, concurrency: 1, seconds, warmup, firstByte: true } satisfies Job);
        c1[i]!.push(a.p50);
        c1Over[i]!.push(a.overheadP50);
        ttfe[i]!.push(b.p50);
        ttfeOver[i]!.push(b.overheadP50);
        errors += a.errors + b.errors;
      }
    }
  }
  const loadMid = loadavg().map((v) => v.toFixed(2)).join(" ");

  // CPU: per round, each target's non-streaming requests then its long streams, the targets taking turns.
  const perRequest: number[][] = targets.map(() => []);
  const perEvent: number[][] = targets.map(() => []);
  const perPiece: number[][] = targets.map(() => []);
  const checks = targets.map(() => ({ requests: 0, streams: 0, events: 0, bad: 0, failed: 0 }));
  if (phase === undefined || phase === "cpu") {
    const unary = (t: Target, n: number): Job => ({ mode: "streams", url: t.url, key, body: t.body, concurrency: 4, seconds, warmup, rounds: Math.ceil(n / 4) });
    const streams = (t: Target, n: number): Job => ({ mode: "streams", url: t.long.url, key, body: { ...t.long.body, stream: true }, concurrency: 8, seconds, warmup, rounds: Math.ceil(n / 8) });
    for (const t of targets) {
      await measuredStreams(unary(t, 100));
      await measuredStreams(streams(t, 40));
    }
    for (let round = 0; round < rounds; round++) {
      for (const [i, t] of targets.entries()) {
        const { figures: u, cpuMs: unaryMs } = await measuredStreams(unary(t, requestsPerRound));
        perRequest[i]!.push(unaryMs / u.streams);
        const { figures: s, cpuMs } = await measuredStreams(streams(t, streamsPerRound));
        perEvent[i]!.push((1000 * cpuMs) / s.events);
        perPiece[i]!.push((1000 * cpuMs) / (s.streams * LONG_TEXT.length));
        const c = checks[i]!;
        c.requests += u.streams;
        c.streams += s.streams;
        c.events += s.events;
        c.bad += u.bad + s.bad;
        c.failed += u.failed + s.failed;
      }
    }
  }
  const loadEnd = loadavg().map((v) => v.toFixed(2)).join(" ");
  await gateway.close();
  await core.close();
  await database.close();
  await fakes.stop();
  rmSync(dir, { recursive: true, force: true });

  /** The rounds' range, when there are several. */
  const spread = (xs: number[], digits: number) => (xs.length > 1 ? `(${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)})` : "");
  const pct = (v: number, b: number) => `${v >= b ? "+" : ""}${((100 * (v - b)) / b).toFixed(0)} %`;
  /** The difference from chat completions against the same upstream: of the medians, then of the best rounds. */
  const diff = (xs: number[][], i: number, t: Target, unit: "ms" | "%", digits = 3) => {
    const b = baseOf(t);
    if (b === i || b < 0) return "—";
    const one = (v: number, base: number) => (unit === "%" ? pct(v, base) : `${v - base >= 0 ? "+" : ""}${(v - base).toFixed(digits)}`);
    return `${one(median(xs[i]!), median(xs[b]!))} / ${one(Math.min(...xs[i]!), Math.min(...xs[b]!))}`;
  };
  console.log(
    `\nNode ${process.version}, ${cpus().length} CPU(s), one process; figures are the median of ${rounds} interleaved rounds; load average at start ${load}, ` +
      `after the latency phase ${loadMid}, at end ${loadEnd}.`,
  );
  if (phase === undefined || phase === "latency") {
    console.log(`\nc=1, ${seconds}s per scenario after ${warmup}s warm-up; "added" is the x-portico-overhead-ms header (Portico's time minus the wait on the provider); errors ${errors}.\n`);
    console.log("| route → upstream | p50 ms | added p50 ms (rounds' range) | added vs chat (median / best round) | first event p50 ms | added to first chunk p50 ms (range) | vs chat (median / best) |");
    console.log("|---|---:|---:|---:|---:|---:|---:|");
    for (const [i, t] of targets.entries()) {
      console.log(
        `| ${t.name} | ${median(c1[i]!).toFixed(3)} | ${median(c1Over[i]!).toFixed(3)} ${spread(c1Over[i]!, 3)} | ${diff(c1Over, i, t, "ms")} | ${median(ttfe[i]!).toFixed(3)} | ${median(ttfeOver[i]!).toFixed(3)} ${spread(ttfeOver[i]!, 3)} | ${diff(ttfeOver, i, t, "ms")} |`,
      );
    }
  }
  if (phase === undefined || phase === "cpu") {
    console.log(
      `\nMain-thread CPU: ${requestsPerRound} non-streaming requests at c=4 and ${streamsPerRound} streams of ${LONG_TEXT.length} text pieces at c=8 per target and round.\n`,
    );
    console.log("| route → upstream | requests, streams (bad, failed) | events per stream | µs per request (rounds' range) | vs chat (median / best round) | µs per event (range) | vs chat (median / best) | µs per text piece | vs chat (median / best) |");
    console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (const [i, t] of targets.entries()) {
      const c = checks[i]!;
      console.log(
        `| ${t.name} | ${c.requests}, ${c.streams} (${c.bad}, ${c.failed}) | ${(c.events / c.streams).toFixed(0)} | ${(1000 * median(perRequest[i]!)).toFixed(0)} ${spread(perRequest[i]!.map((x) => 1000 * x), 0)} | ${diff(perRequest, i, t, "%")} | ${median(perEvent[i]!).toFixed(1)} ${spread(perEvent[i]!, 1)} | ${diff(perEvent, i, t, "%")} | ${median(perPiece[i]!).toFixed(1)} | ${diff(perPiece, i, t, "%")} |`,
      );
    }
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
