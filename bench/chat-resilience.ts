/**
 * Chat resilience (issue 29): (a) throughput and p99 when one of a provider's three credentials fails half its
 * calls, beside the all-healthy run; (b) the CPU cost of tracing (OTLP export on vs off).
 *
 *   npm run -s build && node bin/run-ts.mjs bench/chat-resilience.ts [--seconds 10] [--warmup 2] [--rounds 2]
 *       [--concurrency 32] [--fail-status 500] [--only tracing] [--protocol http/protobuf|http/json] [--base <checkout>] [--profile <dir>]
 *
 * `--only tracing` skips the failing-credential phase; `--base <checkout>` adds `portico serve` of another checkout
 * (its dist/ built), tracing off and on, measured in the same rounds (before/after in one run); `--profile <dir>`
 * starts every serve process with `--cpu-prof` (profiles written there, named after the process, when it stops).
 *
 * One fake OpenAI-compatible provider (a process of its own; the wire format of
 * test/helpers/fake-upstreams/openai.ts) answers "Hello, world!" to every key except `gsk-flaky`, which, while
 * the fake is in its flaky mode, gets `--fail-status` (500 by default; 429 to exercise the credential cool-down
 * instead) with OpenAI's error body on every other call. Portico has one base URL per provider, so the three
 * "providers" are three BYOK credentials of groq (`gsk-bench-1`, `gsk-bench-2`, `gsk-flaky`, weight 1 each, the
 * default balanced draw) behind the same fake port; the fake keys its behaviour on the Authorization header.
 *
 * Two `portico serve` processes (compiled dist/, 1 worker, fresh SQLite each, the credentials stored through the
 * API), started together and measured one at a time from a worker thread of this process (closed loop,
 * keep-alive HTTP/1.1, `--concurrency` loops, non-streaming `groq/llama-3.3-70b`):
 * - "tracing off": no OTEL_* variable (the SDK is never loaded);
 * - "tracing on": OTEL_EXPORTER_OTLP_TRACES_ENDPOINT at a sink in the fake's process that accepts and discards
 *   POST /v1/traces/<process> (answers 200); the batches and bytes each process sent are reported;
 * - "tracing on, 1 in 10": the same with OTEL_TRACES_SAMPLER=parentbased_traceidratio, OTEL_TRACES_SAMPLER_ARG=0.1.
 * Each round measures: tracing off with the fake healthy; tracing off with the fake flaky; tracing on, all and one
 * in ten, with the fake healthy (then the base's off and on). Per phase: req/s, p50/p99, errors that reached the caller (non-200: goal 0), CPU per request
 * (utime + stime of the serve process tree from /proc over the measured window / requests completed), and the
 * failures the fake injected. Figures are summed (counts) or the median of the rounds (rates, latencies).
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type net from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { runInWorker } from "./lib/worker.js";
import { closedLoop, type LoadFigures } from "./lib/closed-loop.js";
import { createByok, logPath, processCpuMs, spawnUntil, startServe, stop } from "./lib/processes.js";
import { flag, num } from "./lib/args.js";

const KEYS = ["gsk-bench-1", "gsk-bench-2", "gsk-flaky"];

interface Job {
  url: string;
  key: string;
  concurrency: number;
  seconds: number;
  warmup: number;
  pids: number[];
}
interface Figures extends LoadFigures {
  cpuMs: number;
  /** Status codes of the measured window's answers (0: connection error). */
  statuses: Record<string, number>;
}
interface FakeStats {
  calls: Record<string, number>;
  failed: number;
  traceBatches: number;
  traceBytes: number;
  /** Per serve process (the sink path's last part): export requests and bytes received over the whole run. */
  sinks: Record<string, { batches: number; bytes: number }>;
}

async function main(): Promise<void> {
  const seconds = num("seconds", 10);
  const warmup = num("warmup", 2);
  const rounds = num("rounds", 2);
  const concurrency = num("concurrency", 32);
  const failStatus = num("fail-status", 500);
  const dir = mkdtempSync(join(tmpdir(), "portico-bench-resilience-"));
  const children: ChildProcess[] = [];
  const loadStart = loadavg().map((l) => l.toFixed(2)).join(" ");
  try {
    const fake = await spawnUntil(["bin/run-ts.mjs", resolve(import.meta.dirname, "chat-resilience.ts"), "--role", "fake"], {}, logPath(dir, "fake"), (out) => {
      const m = /FAKE (\S+) SINK (\S+)/.exec(out);
      return m ? { url: m[1]!, sink: m[2]! } : undefined;
    });
    children.push(fake.child);
    const control = async (body?: { flaky: boolean; status: number }): Promise<FakeStats> => {
      const r = await fetch(`${fake.value.url}/__control`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body ?? {}) });
      return (await r.json()) as FakeStats;
    };
    const env = { PORTICO_PROVIDER_GROQ_BASE_URL: `${fake.value.url}/v1` };
    const profile = flag("profile");
    const base = flag("base");
    const tracingOnly = flag("only") === "tracing";
    const nodeArgs = (name: string) => (profile ? ["--cpu-prof", "--cpu-prof-dir", resolve(profile), "--cpu-prof-name", `${name}.cpuprofile`] : []);
    const serve = async (name: string, extra: NodeJS.ProcessEnv = {}, checkout?: string) => {
      const s = await startServe({ dataDir: join(dir, `data-${name}`), logFile: logPath(dir, `serve-${name}`), env: { ...env, ...extra }, nodeArgs: nodeArgs(name), ...(checkout ? { checkout: resolve(checkout) } : {}) });
      children.push(s.child);
      for (const key of KEYS) await createByok(s.api, s.management, { provider: "groq", key, name: key });
      return s;
    };
    // Each traced process exports to a path of its own, so the sink counts what each sent over the run.
    const protocol = flag("protocol");
    const traced = (name: string) => ({
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${fake.value.sink}/v1/traces/${name}`,
      ...(protocol ? { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: protocol } : {}),
    });
    const off = await serve("off");
    const on = await serve("on", traced("on"));
    // One new trace in ten recorded (the documented sampler setting).
    const sampled = await serve("on-10pct", { ...traced("on-10pct"), OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.1" });
    const baseOff = base ? await serve("base-off", {}, base) : undefined;
    const baseOn = base ? await serve("base-on", traced("base-on"), base) : undefined;
    const sinkOf = new Map<unknown, string>([[on, "on"], [sampled, "on-10pct"], [baseOn, "base-on"]]);

    type Serve = typeof off;
    const phases: Array<{ name: string; serve: Serve; flaky: boolean; tracing?: string }> = [
      { name: "tracing off, 3 healthy credentials", serve: off, flaky: false, tracing: "tracing off" },
      ...(tracingOnly ? [] : [{ name: `tracing off, 1 of 3 credentials failing half its calls (${failStatus})`, serve: off, flaky: true }]),
      { name: "tracing on (OTLP to a local sink), 3 healthy credentials", serve: on, flaky: false, tracing: `tracing on (OTLP ${flag("protocol") ?? "http/protobuf"} to a local sink)` },
      { name: "tracing on, 1 trace in 10 sampled", serve: sampled, flaky: false, tracing: "tracing on, `parentbased_traceidratio` 0.1" },
      ...(baseOff && baseOn
        ? [
            { name: "base: tracing off", serve: baseOff, flaky: false, tracing: "base: tracing off" },
            { name: "base: tracing on", serve: baseOn, flaky: false, tracing: "base: tracing on" },
          ]
        : []),
    ];
    const results = phases.map(() => [] as Array<Figures & { injected: number; calls: Record<string, number>; traceBatches: number; traceBytes: number }>);
    const job = (s: Serve, secs = seconds, warm = warmup): Job => ({ url: `${s.api}/chat/completions`, key: s.apiKey, concurrency, seconds: secs, warmup: warm, pids: s.pids });
    // JIT warm-up of every process.
    for (const s of new Set(phases.map((p) => p.serve))) await runInWorker<Figures>(import.meta.url, job(s, 1, 0));
    for (let round = 0; round < rounds; round++) {
      for (const [i, ph] of phases.entries()) {
        await control({ flaky: ph.flaky, status: failStatus });
        const before = await control();
        const f = await runInWorker<Figures>(import.meta.url, job(ph.serve));
        const after = await control({ flaky: false, status: failStatus });
        const calls = Object.fromEntries(KEYS.map((k) => [k, (after.calls[k] ?? 0) - (before.calls[k] ?? 0)]));
        results[i]!.push({ ...f, injected: after.failed - before.failed, calls, traceBatches: after.traceBatches - before.traceBatches, traceBytes: after.traceBytes - before.traceBytes });
        console.error(`round ${round + 1}, ${ph.name}: ${f.rps.toFixed(0)} req/s, p99 ${f.p99.toFixed(2)} ms, ${(f.cpuMs / f.requests).toFixed(3)} ms CPU/req, errors ${f.errors}, load ${loadavg()[0]!.toFixed(2)}`);
      }
    }

    const median = (xs: number[]) => {
      const s = [...xs].sort((a, b) => a - b);
      return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
    };
    const row = (i: number) => {
      const rs = results[i]!;
      const sum = (pick: (r: (typeof rs)[number]) => number) => rs.reduce((a, r) => a + pick(r), 0);
      const statuses: Record<string, number> = {};
      for (const r of rs) for (const [k, v] of Object.entries(r.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
      return {
        requests: sum((r) => r.requests),
        errors: sum((r) => r.errors),
        rps: median(rs.map((r) => r.rps)),
        p50: median(rs.map((r) => r.p50)),
        p99: median(rs.map((r) => r.p99)),
        cpuPerReq: sum((r) => r.cpuMs) / sum((r) => r.requests),
        injected: sum((r) => r.injected),
        calls: KEYS.map((k) => sum((r) => r.calls[k] ?? 0)).join(" / "),
        statuses: Object.entries(statuses).filter(([k]) => k !== "200").map(([k, v]) => `${k}×${v}`).join(", ") || "—",
        traceBatches: sum((r) => r.traceBatches),
        traceBytes: sum((r) => r.traceBytes),
      };
    };
    const rowOf = (ph: (typeof phases)[number]) => row(phases.indexOf(ph));
    const healthy = rowOf(phases[0]!);
    console.log(`\nNode ${process.version}, ${cpus().length} CPU(s); c=${concurrency}, non-streaming; ${seconds}s per phase after ${warmup}s warm-up, ${rounds} round(s) (rates and latencies: median of rounds; counts: summed); load average at start ${loadStart}, at end ${loadavg().map((l) => l.toFixed(2)).join(" ")}.\n`);
    const flakyPhase = phases.find((p) => p.flaky);
    if (flakyPhase) {
      const flaky = rowOf(flakyPhase);
      console.log(`(a) one credential of three failing half its calls with ${failStatus}\n`);
      console.log(`| run | requests | req/s | p50 ms | p99 ms | errors to the caller (goal 0) | non-200 statuses | failures injected (warm-up incl.) | upstream calls ${KEYS.join(" / ")} (warm-up incl.) |`);
      console.log("|---|---:|---:|---:|---:|---:|---|---:|---|");
      for (const [name, r] of [["all healthy", healthy], ["one failing", flaky]] as const)
        console.log(`| ${name} | ${r.requests} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.errors} | ${r.statuses} | ${r.injected} | ${r.calls} |`);
      console.log(`\np99 ratio failing / healthy: ${(flaky.p99 / healthy.p99).toFixed(2)}× (goal ≤ 2×); throughput ratio ${(flaky.rps / healthy.rps).toFixed(2)}.\n`);
    }
    console.log("(b) tracing (CPU per request: the serve process's, over the measured windows of every round)\n");
    console.log("| run | requests | req/s | p99 ms | CPU per request ms | vs its tracing off | errors | trace batches / KB received |");
    console.log("|---|---:|---:|---:|---:|---:|---:|---|");
    const baseOffRow = baseOff ? rowOf(phases.find((p) => p.serve === baseOff)!) : undefined;
    const sinks = (await control()).sinks;
    for (const ph of phases.filter((p) => p.tracing)) {
      const r = rowOf(ph);
      const ref = ph.serve === baseOn || ph.serve === baseOff ? baseOffRow! : healthy;
      const added = r === ref ? "—" : `${r.cpuPerReq - ref.cpuPerReq >= 0 ? "+" : ""}${(r.cpuPerReq - ref.cpuPerReq).toFixed(3)} ms (${((100 * (r.cpuPerReq - ref.cpuPerReq)) / ref.cpuPerReq).toFixed(1)} %)`;
      const sink = sinks[sinkOf.get(ph.serve) ?? ""];
      console.log(`| ${ph.tracing} | ${r.requests} | ${r.rps.toFixed(0)} | ${r.p99.toFixed(2)} | ${r.cpuPerReq.toFixed(3)} | ${added} | ${r.errors} | ${sink ? `${sink.batches} / ${(sink.bytes / 1024).toFixed(0)}` : "—"} |`);
    }
    for (const [serve, name] of sinkOf) if (serve && !sinks[name]) console.log(`WARNING: the sink received no trace batch from "${name}": tracing was not on (check its log).`);
    console.log("\nTrace batches / KB: everything each process exported over the run (warm-ups included; spans still queued when a window closes are exported, and their CPU counted, in a later window).");
  } finally {
    for (const c of children.reverse()) await stop(c);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The fake provider (OpenAI wire format; `gsk-flaky` fails every other call in flaky mode) and the OTLP sink. */
async function fakeRole(): Promise<void> {
  const { openAiWire } = await import("../test/helpers/fake-upstreams/openai.js");
  const script = { text: ["Hello", ", ", "world", "!"], finish: "stop", usage: { input: 12, output: 4 } };
  const stats: FakeStats = { calls: {}, failed: 0, traceBatches: 0, traceBytes: 0, sinks: {} };
  let mode = { flaky: false, status: 500 };
  const readBody = (req: http.IncomingMessage) =>
    new Promise<string>((done) => {
      let body = "";
      req.setEncoding("utf8");
      req.on("data", (d: string) => (body += d));
      req.on("end", () => done(body));
    });
  const server = http.createServer(async (req, res) => {
    const raw = await readBody(req);
    if (req.url === "/__control") {
      const next = raw ? (JSON.parse(raw) as Partial<typeof mode>) : {};
      if (typeof next.flaky === "boolean") mode = { flaky: next.flaky, status: next.status ?? mode.status };
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(stats));
      return;
    }
    const key = (req.headers.authorization ?? "").replace(/^Bearer /, "");
    const n = (stats.calls[key] = (stats.calls[key] ?? 0) + 1);
    const json = (status: number, body: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    if (mode.flaky && key === "gsk-flaky" && n % 2 === 1) {
      stats.failed++;
      return json(mode.status, openAiWire.errorBody(mode.status, "injected failure"));
    }
    const body = raw ? JSON.parse(raw) : {};
    json(200, openAiWire.completion(script as never, { method: req.method ?? "POST", url: req.url ?? "", headers: req.headers, body }));
  });
  server.keepAliveTimeout = 60_000;
  const sink = http.createServer((req, res) => {
    const name = req.url?.startsWith("/v1/traces/") ? req.url.slice("/v1/traces/".length) : "";
    const per = (stats.sinks[name] ??= { batches: 0, bytes: 0 });
    req.on("data", (d: Buffer) => ((stats.traceBytes += d.length), (per.bytes += d.length)));
    req.on("end", () => {
      if (req.method === "POST" && req.url?.startsWith("/v1/traces")) (stats.traceBatches++, per.batches++);
      res.writeHead(200, { "content-type": req.headers["content-type"] ?? "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  await new Promise<void>((r) => sink.listen(0, "127.0.0.1", r));
  console.log(`FAKE http://127.0.0.1:${(server.address() as net.AddressInfo).port} SINK http://127.0.0.1:${(sink.address() as net.AddressInfo).port}`);
  process.once("SIGTERM", () => process.exit(0));
}

/** Load worker: a closed loop; the serve process tree's CPU is read as the measured window opens and closes. */
async function worker(): Promise<void> {
  const job = workerData as Job;
  const target = new URL(job.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.concurrency });
  const payload = JSON.stringify({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "Say hello." }] });
  const statuses: Record<string, number> = {};
  let counting = false;
  let cpu0 = 0;
  let cpuMs = 0;
  const send = () =>
    new Promise<boolean>((done) => {
      const req = http.request(
        { agent, host: target.hostname, port: target.port, path: target.pathname, method: "POST", headers: { authorization: `Bearer ${job.key}`, "content-type": "application/json", "content-length": Buffer.byteLength(payload) } },
        (res) => {
          res.resume();
          res.on("end", () => {
            if (counting) statuses[res.statusCode!] = (statuses[res.statusCode!] ?? 0) + 1;
            done(res.statusCode === 200);
          });
        },
      );
      req.on("error", () => {
        if (counting) statuses["0"] = (statuses["0"] ?? 0) + 1;
        done(false);
      });
      req.end(payload);
    });
  const figures = await closedLoop({
    concurrency: job.concurrency,
    warmupSeconds: job.warmup,
    seconds: job.seconds,
    send,
    onWindow: (edge) => {
      counting = edge === "start";
      if (edge === "start") cpu0 = processCpuMs(job.pids);
      else cpuMs = processCpuMs(job.pids) - cpu0;
    },
  });
  agent.destroy();
  parentPort!.postMessage({ ...figures, cpuMs, statuses } satisfies Figures);
}

const role = flag("role");
if (!isMainThread) await worker();
else if (role === "fake") await fakeRole();
else await main();
