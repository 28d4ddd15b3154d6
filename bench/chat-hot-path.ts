/**
 * Chat completions hot path (issue 24): the cost of Portico's own work per request, beside a bare `node:http`
 * relay (the floor) and a minimal Fastify + fetch relay, every server in a process of its own, against the same
 * fake provider (also a process of its own). Load from a worker thread of this process over keep-alive HTTP/1.1.
 *
 *   npm run -s build && node bin/run-ts.mjs bench/chat-hot-path.ts [--seconds 5] [--warmup 1] [--rounds 3]
 *       [--rss-seconds 60] [--targets direct,bare,fastify,serve1,serve2,split] [--profile <dir>]
 *       [--phase c32|streams]
 *
 * Targets: direct (the fake provider), bare (`node:http` relay: parse nothing, pipe the body both ways over a
 * keep-alive agent), fastify (the minimal relay of bench/chat-relay.ts), serve1 / serve2 (`portico serve` with
 * PORTICO_WORKERS=1 / 2, compiled dist/, default log level, fresh SQLite, BYOK credentials stored through the
 * API), split (`portico core` + `portico gateway` over gRPC on loopback, same data folder).
 *
 * Figures per target:
 * - c=1 p50 of non-streaming requests and time to first chunk (first `data:` bytes) of streaming ones: the
 *   median of `--rounds` rounds, the targets taking turns in each round;
 * - c=32 non-streaming req/s and p99, and CPU per request: utime + stime of the serving process(es)
 *   (/proc/<pid>/stat, all threads; for serve2 the primary and both workers; for split both processes) over
 *   the measured window, divided by the requests completed in it;
 * - CPU per relayed chunk: the same CPU reading over streams of 100 content chunks (102 chunk events) at c=8,
 *   divided by the chunk events the client received;
 * - RSS (serve1 only, `--rss-seconds` > 0): VmRSS of the serving process after that many seconds at c=32.
 * `--profile <dir>` starts the serve1 process with `--cpu-prof --cpu-prof-dir=<dir>` (written at exit); with `--base`, the
 * base's serve1 too, into `<dir>/base`; the split target's core and gateway into `<dir>/split` (the base's into `<dir>/split-base`).
 *
 * Before/after in one run: `--base <checkout>` adds the target "serve1 (base)", `portico serve` (1 worker) of another
 * checkout with its own `dist/` built (e.g. a `git worktree` of an older commit, `npm run -s build` there), on a data
 * folder of its own, measured the same way right after serve1; with the split target, "split (base)" too. `--serve-model` / `--serve-long-model` name the
 * models the Portico targets request (default `groq/llama-3.3-70b` and `together/llama-3.3-70b`, which the catalog
 * does not list; `groq/llama-3.3-70b-versatile` and `together/meta-llama/Llama-3.3-70B-Instruct-Turbo` are catalog
 * endpoints, so the request is routed through the catalog and priced).
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type net from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { runInWorker } from "./lib/worker.js";
import { percentile } from "./lib/closed-loop.js";
import { freePort, processCpuMs, processTree, rssMb, serveReady, spawnUntil, stop } from "./lib/processes.js";

const argOf = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const numArg = (name: string, fallback: number) => Number(argOf(name) ?? fallback);
const root = resolve(import.meta.dirname, "..");
const LONG_TEXT = Array.from({ length: 100 }, (_, i) => `w${i} `);
interface Target {
  name: string;
  url: string;
  longUrl: string;
  key: string;
  model: string;
  longModel: string;
  /** The serving processes whose CPU is counted (empty: not measured). */
  pids: () => number[];
  /** The process whose RSS is read (serve1). */
  rssPid?: number;
}

interface Job {
  mode: "load" | "streams";
  url: string;
  key: string;
  model: string;
  stream: boolean;
  concurrency: number;
  seconds: number;
  warmup: number;
  pids: number[];
}

interface Figures {
  requests: number;
  errors: number;
  rps: number;
  p50: number;
  p99: number;
  cpuMs: number;
  /** streams mode: chunk events received, and streams not exactly w0 … w99 + [DONE]. */
  chunks: number;
  bad: number;
}

async function main(): Promise<void> {
  const seconds = numArg("seconds", 5);
  const warmup = numArg("warmup", 1);
  const rounds = numArg("rounds", 3);
  const rssSeconds = numArg("rss-seconds", 0);
  const profileDir = argOf("profile");
  /** `--phase c32|streams`: only that heavy phase (for a profile of one kind of load). */
  const onlyPhase = argOf("phase");
  const wanted = (argOf("targets") ?? "direct,bare,fastify,serve1,serve2,split").split(",");
  const base = argOf("base");
  const serveModel = argOf("serve-model") ?? "groq/llama-3.3-70b";
  const serveLongModel = argOf("serve-long-model") ?? "together/llama-3.3-70b";
  const dir = mkdtempSync(join(tmpdir(), "portico-bench-hot-"));
  const children: ChildProcess[] = [];
  const loadStart = loadavg().map((l) => l.toFixed(2)).join(" ");
  try {
    const self = resolve(import.meta.dirname, "chat-hot-path.ts");
    const fakes = await spawnUntil(["bin/run-ts.mjs", self, "--role", "fakes"], {}, join(dir, "fakes.log"), (out) => {
      const m = /FAKES (\S+) (\S+)/.exec(out);
      return m ? { fake: m[1]!, long: m[2]! } : undefined;
    });
    children.push(fakes.child);
    const relays = await spawnUntil(["bin/run-ts.mjs", self, "--role", "relays", fakes.value.fake, fakes.value.long], {}, join(dir, "relays.log"), (out) => {
      const m = /RELAYS (\S+) (\S+)/.exec(out);
      return m ? { bare: m[1]!, fastify: m[2]! } : undefined;
    });
    children.push(relays.child);
    const relayPid = relays.child.pid!;
    const targets: Target[] = [];
    if (wanted.includes("direct"))
      targets.push({ name: "direct to the fake provider", url: `${fakes.value.fake}/v1/chat/completions`, longUrl: `${fakes.value.long}/v1/chat/completions`, key: "k", model: "llama-3.3-70b", longModel: "llama-3.3-70b", pids: () => [] });
    if (wanted.includes("bare"))
      targets.push({ name: "bare node:http relay", url: `${relays.value.bare}/v1/chat/completions`, longUrl: `${relays.value.bare}/long/v1/chat/completions`, key: "k", model: "llama-3.3-70b", longModel: "llama-3.3-70b", pids: () => [relayPid] });
    if (wanted.includes("fastify"))
      targets.push({ name: "minimal Fastify + fetch relay", url: `${relays.value.fastify}/v1/chat/completions`, longUrl: `${relays.value.fastify}/long/v1/chat/completions`, key: "k", model: "llama-3.3-70b", longModel: "llama-3.3-70b", pids: () => [relayPid] });

    const dataDir = join(dir, "data");
    const providerEnv = {
      PORTICO_DATA_DIR: dataDir,
      PORTICO_EMBEDDED_HOST: "false",
      PORTICO_PROVIDER_GROQ_BASE_URL: `${fakes.value.fake}/v1`,
      PORTICO_PROVIDER_TOGETHER_BASE_URL: `${fakes.value.long}/v1`,
    };
    let keys: { management: string; api: string } | undefined;
    let baseKeys: { management: string; api: string } | undefined;
    const serveTargets: Array<{ name: string; start: () => Promise<Target & { children: ChildProcess[] }> }> = [];
    const startServe = async (workers: number, name: string, checkout = root) => {
      const isBase = checkout !== root;
      // The base checkout's profile goes to <dir>/base, so one run profiles both builds under the same load.
      const args = [...(profileDir && workers === 1 ? ["--cpu-prof", `--cpu-prof-dir=${isBase ? join(profileDir, "base") : profileDir}`] : []), "bin/portico.mjs", "serve"];
      const env = { ...providerEnv, ...(isBase ? { PORTICO_DATA_DIR: join(dir, "data-base") } : {}), PORT: "0", PORTICO_GRPC_PORT: "0", PORTICO_WORKERS: String(workers) };
      const s = await spawnUntil(args, env, join(dir, `${name}.log`), serveReady(workers), 60_000, checkout);
      let own = isBase ? baseKeys : keys;
      if (!own) {
        if (!s.value.mk || !s.value.ak) throw new Error("serve printed no keys");
        own = { management: s.value.mk, api: s.value.ak };
        if (isBase) baseKeys = own;
        else keys = own;
        for (const [provider, key] of [["groq", "gsk-bench"], ["together", "tg-bench"]]) {
          const r = await fetch(`${s.value.api}/byok`, { method: "POST", headers: { authorization: `Bearer ${own.management}`, "content-type": "application/json" }, body: JSON.stringify({ provider, key }) });
          if (r.status !== 200) throw new Error(`BYOK create ${provider}: ${r.status} ${await r.text()}`);
        }
      }
      const pid = s.child.pid!;
      const tree = processTree(pid);
      return { ...porticoTarget(name, s.value.api, own.api), pids: () => tree, rssPid: workers === 1 ? pid : undefined, children: [s.child] };
    };
    const porticoTarget = (name: string, api: string, key: string) => ({
      name,
      url: `${api}/chat/completions`,
      longUrl: `${api}/chat/completions`,
      key,
      model: serveModel,
      longModel: serveLongModel,
    });
    if (wanted.includes("serve1")) serveTargets.push({ name: "Portico serve, 1 worker", start: () => startServe(1, "Portico serve, 1 worker") });
    if (base) serveTargets.push({ name: "Portico serve, 1 worker (base)", start: () => startServe(1, "Portico serve, 1 worker (base)", resolve(base)) });
    if (wanted.includes("serve2")) serveTargets.push({ name: "Portico serve, 2 workers", start: () => startServe(2, "Portico serve, 2 workers") });
    // The split pair of a checkout (with `--base`, the base's too, on the base's data folder and keys, right after).
    const startSplit = async (name: string, checkout = root) => {
      const isBase = checkout !== root;
      if (!(isBase ? baseKeys : keys)) await stop((await startServe(1, isBase ? "bootstrap (base)" : "bootstrap", checkout)).children[0]!);
      const own = (isBase ? baseKeys : keys)!;
      const env = { ...providerEnv, ...(isBase ? { PORTICO_DATA_DIR: join(dir, "data-base") } : {}) };
      const grpcPort = await freePort();
      const prof = profileDir ? ["--cpu-prof", `--cpu-prof-dir=${join(profileDir, isBase ? "split-base" : "split")}`] : [];
      const core = await spawnUntil([...prof, "bin/portico.mjs", "core"], { ...env, PORTICO_GRPC_PORT: String(grpcPort) }, join(dir, `${name}-core.log`), (out) => (/core listening/.test(out) ? true : undefined), 60_000, checkout);
      const gateway = await spawnUntil([...prof, "bin/portico.mjs", "gateway"], { ...env, PORT: "0", PORTICO_CORE_URL: `http://127.0.0.1:${grpcPort}` }, join(dir, `${name}-gateway.log`), (out) => /"url":"(http:\/\/127\.0\.0\.1:\d+\/api\/v1)","msg":"gateway listening/.exec(out)?.[1], 60_000, checkout);
      const pids = [core.child.pid!, gateway.child.pid!];
      return { ...porticoTarget(name, gateway.value, own.api), pids: () => pids, children: [core.child, gateway.child] };
    };
    if (wanted.includes("split")) serveTargets.push({ name: "Portico core + gateway over gRPC", start: () => startSplit("Portico core + gateway over gRPC") });
    if (wanted.includes("split") && base) serveTargets.push({ name: "Portico core + gateway over gRPC (base)", start: () => startSplit("Portico core + gateway over gRPC (base)", resolve(base)) });

    const job = (t: Target, stream: boolean, concurrency: number, mode: Job["mode"] = "load"): Job => ({
      mode,
      url: mode === "streams" ? t.longUrl : t.url,
      key: t.key,
      model: mode === "streams" ? t.longModel : t.model,
      stream,
      concurrency,
      seconds,
      warmup,
      pids: t.pids(),
    });
    interface Row {
      name: string;
      c1: number[];
      ttfc: number[];
      c32?: Figures;
      streams?: Figures;
      rss?: number;
      load: string;
    }
    const rows: Row[] = [];
    const measure = async (t: Target, row: Row, withRounds: boolean) => {
      if (withRounds) {
        const c1 = await runInWorker<Figures>(import.meta.url, job(t, false, 1));
        const ttfc = await runInWorker<Figures>(import.meta.url, job(t, true, 1));
        row.c1.push(c1.p50);
        row.ttfc.push(ttfc.p50);
      }
    };
    // The relays and the fake stay up: their c=1 rounds interleave; each Portico target is started, measured
    // (its rounds, c=32, streams) and stopped, one at a time, so no idle Portico process shares the machine.
    for (const t of targets) rows.push({ name: t.name, c1: [], ttfc: [], load: "" });
    for (let round = 0; round < rounds; round++) for (const [i, t] of targets.entries()) await measure(t, rows[i]!, true);
    for (const [i, t] of targets.entries()) await heavy(t, rows[i]!);
    for (const s of serveTargets) {
      const t = await s.start();
      children.push(...t.children);
      const row: Row = { name: t.name, c1: [], ttfc: [], load: "" };
      rows.push(row);
      // Warm up the JIT on both paths before the first timed round.
      await runInWorker<Figures>(import.meta.url, { ...job(t, false, 4), seconds: 1, warmup: 0 });
      for (let round = 0; round < rounds; round++) await measure(t, row, true);
      await heavy(t, row);
      if (t.rssPid !== undefined && rssSeconds > 0) {
        await runInWorker<Figures>(import.meta.url, { ...job(t, false, 32), seconds: rssSeconds, warmup: 0 });
        row.rss = rssMb(t.rssPid);
      }
      for (const c of t.children) await stop(c);
    }
    async function heavy(t: Target, row: Row) {
      row.load = loadavg()[0]!.toFixed(2);
      const none: Figures = { requests: 0, errors: 0, rps: NaN, p50: NaN, p99: NaN, cpuMs: NaN, chunks: 0, bad: 0 };
      row.c32 = onlyPhase === "streams" ? none : await runInWorker<Figures>(import.meta.url, job(t, false, 32));
      row.streams = onlyPhase === "c32" ? none : await runInWorker<Figures>(import.meta.url, job(t, true, 8, "streams"));
      console.error(
        `${t.name}: c=1 ${row.c1.map((v) => v.toFixed(3)).join("/")} ms, ttfc ${row.ttfc.map((v) => v.toFixed(3)).join("/")} ms, c=32 ${row.c32.rps.toFixed(0)} req/s ${(row.c32.cpuMs / row.c32.requests).toFixed(3)} ms CPU/req, ${((1000 * row.streams.cpuMs) / row.streams.chunks).toFixed(1)} µs CPU/chunk, load ${row.load}`,
      );
    }

    const median = (xs: number[]) => {
      const s = [...xs].sort((a, b) => a - b);
      return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
    };
    const direct = rows.find((r) => r.name.startsWith("direct"));
    const bare = rows.find((r) => r.name.startsWith("bare"));
    const added = (v: number, d: number | undefined) => (d === undefined || Number.isNaN(d) ? v.toFixed(3) : `${v.toFixed(3)} (+${(v - d).toFixed(3)})`);
    console.log(`\nNode ${process.version}, ${cpus().length} CPU(s); ${seconds}s per phase after ${warmup}s warm-up; c=1 figures: median of ${rounds} rounds; load average at start ${loadStart}, at end ${loadavg().map((l) => l.toFixed(2)).join(" ")}.\n`);
    console.log("| target | c=1 p50 ms (added) | first chunk p50 ms (added) | c=32 req/s | c=32 % of bare | c=32 p99 ms | CPU per request ms | CPU per chunk µs | bad streams | errors | RSS MB | load |");
    console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (const r of rows) {
      const c1 = median(r.c1);
      const ttfc = median(r.ttfc);
      const c32 = r.c32!;
      const st = r.streams!;
      const measured = r !== direct;
      console.log(
        `| ${r.name} | ${r === direct ? c1.toFixed(3) : added(c1, direct && median(direct.c1))} | ${r === direct ? ttfc.toFixed(3) : added(ttfc, direct && median(direct.ttfc))} | ${c32.rps.toFixed(0)} | ${bare?.c32 ? ((100 * c32.rps) / bare.c32.rps).toFixed(1) : "—"} | ${c32.p99.toFixed(2)} | ${measured ? (c32.cpuMs / c32.requests).toFixed(3) : "—"} | ${measured ? ((1000 * st.cpuMs) / st.chunks).toFixed(1) : "—"} | ${st.bad} | ${c32.errors + st.errors} | ${r.rss?.toFixed(0) ?? "—"} | ${r.load} |`,
      );
    }
  } finally {
    for (const c of children.reverse()) await stop(c);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The fake provider: one that answers "Hello, world!" and one that streams 100 numbered chunks. */
async function fakesRole(): Promise<void> {
  const { startFakeOpenAI } = await import("../test/helpers/fake-upstreams/openai.js");
  const fake = await startFakeOpenAI({ text: ["Hello", ", ", "world", "!"], finish: "stop", usage: { input: 12, output: 4 } });
  const long = await startFakeOpenAI({ text: LONG_TEXT, finish: "stop", usage: { input: 12, output: LONG_TEXT.length } });
  console.log(`FAKES ${fake.url} ${long.url}`);
  process.once("SIGTERM", () => void Promise.all([fake.close(), long.close()]).then(() => process.exit(0)));
}

/** The bare node:http relay and the minimal Fastify + fetch relay, in one process (measured one at a time). */
async function relaysRole(fakeUrl: string, longUrl: string): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const bare = http.createServer((req, res) => {
    const upstream = new URL(req.url!.startsWith("/long/") ? `${longUrl}/v1/chat/completions` : `${fakeUrl}/v1/chat/completions`);
    const out = http.request(
      { agent, host: upstream.hostname, port: upstream.port, path: upstream.pathname, method: "POST", headers: { "content-type": "application/json", authorization: "Bearer relay-key", ...(req.headers["content-length"] ? { "content-length": req.headers["content-length"] } : {}) } },
      (up) => {
        res.writeHead(up.statusCode ?? 502, { "content-type": up.headers["content-type"] ?? "application/json" });
        up.pipe(res);
      },
    );
    out.on("error", () => {
      res.writeHead(502).end();
    });
    req.pipe(out);
  });
  bare.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => bare.listen(0, "127.0.0.1", r));
  const { Readable } = await import("node:stream");
  const { fastify } = await import("fastify");
  const relay = fastify();
  for (const [path, base] of [["/v1/chat/completions", fakeUrl], ["/long/v1/chat/completions", longUrl]] as const) {
    relay.post(path, async (req, reply) => {
      const upstream = await fetch(`${base}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer relay-key" }, body: JSON.stringify(req.body) });
      reply.code(upstream.status).header("content-type", upstream.headers.get("content-type") ?? "application/json");
      return reply.send(Readable.fromWeb(upstream.body as never));
    });
  }
  await relay.listen({ host: "127.0.0.1", port: 0 });
  console.log(`RELAYS http://127.0.0.1:${(bare.address() as net.AddressInfo).port} http://127.0.0.1:${(relay.server.address() as net.AddressInfo).port}`);
  process.once("SIGTERM", () => process.exit(0));
}

/** POSTs a JSON body with the job's key on a keep-alive agent. */
function post(target: URL, key: string, agent: http.Agent, payload: string, onResponse: (res: http.IncomingMessage) => void, onError: () => void): void {
  const req = http.request(
    { agent, host: target.hostname, port: target.port, path: target.pathname, method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "content-length": Buffer.byteLength(payload) } },
    onResponse,
  );
  req.on("error", onError);
  req.end(payload);
}

/** Load worker: a closed loop; the serving processes' CPU is read at the start and end of the measured window. */
async function worker(): Promise<void> {
  const job = workerData as Job;
  const target = new URL(job.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.concurrency });
  const payload = JSON.stringify({ model: job.model, messages: [{ role: "user", content: job.mode === "streams" ? "Count." : "Say hello." }], stream: job.stream });
  const expected = LONG_TEXT.join("");
  const send = () =>
    new Promise<{ ok: boolean; firstMs?: number; chunks: number; bad: boolean }>((done) => {
      const t0 = process.hrtime.bigint();
      post(
        target,
        job.key,
        agent,
        payload,
        (res) => {
          let first: number | undefined;
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => {
            first ??= Number(process.hrtime.bigint() - t0) / 1e6;
            if (job.mode === "streams") body += d;
          });
          res.on("end", () => {
            if (job.mode !== "streams") return done({ ok: res.statusCode === 200, firstMs: first, chunks: 0, bad: false });
            let content = "";
            let chunks = 0;
            let sawDone = false;
            for (const event of body.split("\n\n")) {
              const data = event.split("\n").find((l) => l.startsWith("data: "))?.slice(6);
              if (data === undefined) continue;
              if (data === "[DONE]") {
                sawDone = true;
                continue;
              }
              chunks++;
              content += JSON.parse(data).choices?.[0]?.delta?.content ?? "";
            }
            done({ ok: res.statusCode === 200, chunks, bad: content !== expected || !sawDone });
          });
        },
        () => done({ ok: false, chunks: 0, bad: false }),
      );
    });
  const latencies: number[] = [];
  const figures: Figures = { requests: 0, errors: 0, rps: 0, p50: NaN, p99: NaN, cpuMs: 0, chunks: 0, bad: 0 };
  let measuring = false;
  let stopping = false;
  const loops = Array.from({ length: job.concurrency }, async () => {
    while (!stopping) {
      const t0 = process.hrtime.bigint();
      const r = await send();
      if (!measuring) continue;
      figures.requests++;
      if (!r.ok) figures.errors++;
      figures.chunks += r.chunks;
      if (r.bad) figures.bad++;
      latencies.push(job.stream ? (r.firstMs ?? NaN) : Number(process.hrtime.bigint() - t0) / 1e6);
    }
  });
  await new Promise((r) => setTimeout(r, job.warmup * 1000));
  measuring = true;
  const cpu0 = processCpuMs(job.pids);
  const t0 = process.hrtime.bigint();
  await new Promise((r) => setTimeout(r, job.seconds * 1000));
  measuring = false;
  const cpu1 = processCpuMs(job.pids);
  const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
  stopping = true;
  await Promise.all(loops);
  agent.destroy();
  latencies.sort((a, b) => a - b);
  figures.rps = figures.requests / elapsed;
  figures.p50 = percentile(latencies, 50);
  figures.p99 = percentile(latencies, 99);
  figures.cpuMs = cpu1 - cpu0;
  parentPort!.postMessage(figures);
}

const role = argOf("role");
if (!isMainThread) await worker();
else if (role === "fakes") await fakesRole();
else if (role === "relays") await relaysRole(process.argv[process.argv.indexOf("relays") + 1]!, process.argv[process.argv.indexOf("relays") + 2]!);
else await main();
