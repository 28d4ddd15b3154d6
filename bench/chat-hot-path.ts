/**
 * Chat completions hot path (issue 24): the cost of Portico's own work per request, beside a bare `node:http`
 * relay (the floor) and a minimal Fastify + fetch relay, every server in a process of its own, against the same
 * fake provider (also a process of its own). Load from a worker thread of this process over keep-alive HTTP/1.1.
 *
 *   npm run -s build && node bin/run-ts.mjs bench/chat-hot-path.ts [--seconds 5] [--warmup 1] [--rounds 3] [--c1-seconds <s>]
 *       [--windows 6] [--window-warmup 0.25] [--warm-seconds 2] [--verbose]
 *       [--rss-seconds 60] [--targets direct,bare,fastify,serve1,serve2,split] [--profile <dir>]
 *       [--phase c32|streams] [--one-group] [--base <checkout>] [--route chat|messages] [--body-kb 60] [--stream-chunks 100]
 *
 * Targets: direct (the fake provider), bare (`node:http` relay: parse nothing, pipe the body both ways over a
 * keep-alive agent), fastify (the minimal relay of bench/chat-relay.ts), serve1 / serve2 (`portico serve` with
 * PORTICO_WORKERS=1 / 2, compiled dist/, default log level, fresh SQLite, BYOK credentials stored through the
 * API), split (`portico core` + `portico gateway` over gRPC on loopback, same data folder).
 *
 * Targets are measured in groups, a group's processes all up at once: the relays with the fake (direct, bare,
 * fastify), then each Portico target with its base (`--base`), started, measured and stopped one group at a time.
 * In a group the targets take turns, and the first of each round rotates (two targets: A B, B A, A B, B A), so no
 * target is always measured first or right after another. One load-generator thread serves the whole run.
 * `--one-group`: every target in one group (the relays and each Portico target up at once, taking turns), so that a
 * Portico target's windows and c=1 rounds sit next to the bare relay's and to each other's (what `npm run
 * bench:quick` reads: the per-round ratios and differences below, steadier than one target's median against
 * another's measured a minute apart).
 * Before anything is measured, `--warm-seconds` (default 2) of uncounted load at c=32 and of streams at c=8 go
 * to the fake provider directly (warming the fake and the load generator); half as long at c=32 to each target
 * once its group is up (its JIT, before the c=1 rounds), then a quarter as long of streams; and half as long
 * again to each target before the measured windows of each of the c=32 and streams phases (right after the c=1
 * rounds a target's first c=32 window read 0.46 ms CPU per request against 0.23–0.29 for its next five).
 *
 * Figures per target:
 * - c=1 p50 of non-streaming requests and time to first chunk (first `data:` bytes) of streaming ones: the
 *   median of `--rounds` rounds of `--c1-seconds` (default `--seconds`) each (after `--warmup`), the group's targets
 *   taking turns; below the table, for each pair of a group, the later's p50 minus the earlier's round by round and
 *   their median (against direct: the added latency of each round);
 * - c=32 non-streaming req/s and p99, and CPU per request: utime + stime of the serving process(es)
 *   (/proc/<pid>/stat, all threads; for serve2 the primary and both workers; for split both processes) over
 *   a measured window, divided by the requests completed in it. Each target gets `--windows` (default 6)
 *   windows of `--seconds` / `--windows` each (so `--seconds` stays the measured time per target and phase),
 *   each after `--window-warmup` (default 0.25) uncounted seconds on fresh connections; the table shows the
 *   median of the windows' figures, and the lines below it every window's, in the order measured, and, for a
 *   group of two or more, each target's c=32 req/s and CPU per request / chunk over each earlier target's of the
 *   group (the first is the tree under test with `--base`; direct is left out) in the same round (windows next
 *   to each other in time, so under the same load of the shared machine) and their median (`--verbose`: each
 *   window on stderr as it ends, with the load average);
 * - CPU per relayed chunk: the same CPU reading over streams of 100 content chunks (102 chunk events) at c=8,
 *   divided by the chunk events the client received (`--route messages`: the 100 content_block_delta events);
 *   windows and medians as for c=32;
 * - RSS (serve1 only, `--rss-seconds` > 0): VmRSS of the serving process after that many seconds at c=32 (with
 *   `--base`, each serve1 in turn, the other one idle).
 * Before 2026-11-27 each target had one c=32 window and one streams window, and the base was always measured
 * right after the tree under test: an A/A run read 0.421 ms CPU per request first against 0.255 second
 * (bench/README.md, stop 37). The idle partner in a group costs a little CPU to the machine, equally to both.
 * `--profile <dir>` starts the serve1 process with `--cpu-prof --cpu-prof-dir=<dir>` (written at exit; `--profile-interval <µs>`,
 * `--profile-node-flags "<flags>"` add to its node flags, e.g. `"--no-turbo-inlining"`); with `--base`, the
 * base's serve1 too, into `<dir>/base`; the split target's core and gateway into `<dir>/split` (the base's into `<dir>/split-base`).
 *
 * `--route messages` (Portico targets only: serve1, serve2, split): every request is `POST /api/v1/messages` (what
 * Claude Code calls) with a coding agent's body of `--body-kb` kB (default 60; the deterministic body of
 * bench/lib/coding-agent-body.ts, as bench/dialect-body.ts uses; its floor, any `--body-kb` up to 35, is 36.6 kB:
 * the system prompt, 20 tools and one user turn), model `--serve-model` (default `anthropic/claude-sonnet-4`), answered by a fake
 * Anthropic Messages upstream (a process of the fakes, PORTICO_PROVIDER_ANTHROPIC_BASE_URL, an `anthropic` BYOK
 * credential): the Anthropic adapter, no translation between dialects. The streamed requests (the c=1 first-chunk
 * rounds and the streams phase) are the same body with `"stream": true` (coding agents stream), same model; the
 * fake answers with an Anthropic SSE stream (`event:` + `data:` frames: message_start, ping, content_block_start,
 * one content_block_delta per text piece, content_block_stop, message_delta with usage, message_stop): "Hello,
 * world!" in 4 deltas for the first-chunk rounds, and in the streams phase, whose last user text is "Count.",
 * 100 text deltas (as the chat route's 100 content chunks). CPU per chunk on this route = CPU over the
 * content_block_delta events the client received (100 a stream; the 6 other events are not counted, where the
 * chat route counts all 102 chunk events); a stream is bad unless it runs message_start … message_stop with a
 * message_delta and its text deltas join to w0 … w99.
 * Before/after in one run: `--base <checkout>` adds, with the target serve1, "serve1 (base)", `portico serve` (1 worker) of another
 * checkout with its own `dist/` built (e.g. a `git worktree` of an older commit, `npm run -s build` there), on a data
 * folder of its own, up at the same time as serve1 and taking turns with it; with the split target, "split (base)" too
 * (until 2026-11-27 "serve1 (base)" came with any `--targets`). `--serve-model` / `--serve-long-model` name the
 * models the Portico targets request (default `groq/llama-3.3-70b` and `together/llama-3.3-70b`, which the catalog
 * does not list; `groq/llama-3.3-70b-versatile` and `together/meta-llama/Llama-3.3-70B-Instruct-Turbo` are catalog
 * endpoints, so the request is routed through the catalog and priced). `--serve-env K=V[,K=V…]` and `--base-env …` add to the
 * environment of this checkout's and of the base's Portico processes (e.g. tracing on for one of them: `--serve-env
 * OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:<port>`; with `--base` naming a build of the same commit, an on/off pair).
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type net from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { startJobWorker } from "./lib/worker.js";
import { percentile } from "./lib/closed-loop.js";
import { codingAgentBody } from "./lib/coding-agent-body.js";
import type { Script } from "../test/helpers/fake-upstreams/server.js";
import { freePort, processCpuMs, processTree, rssMb, serveReady, spawnUntil, stop } from "./lib/processes.js";
import { flag, num } from "./lib/args.js";

const root = resolve(import.meta.dirname, "..");
// `--stream-chunks N` (default 100): the streams phase's content chunks per stream, through the environment to the
// fakes' process and the load generator's thread (per-stream against per-chunk costs: two runs at two lengths).
if (flag("stream-chunks") !== undefined) process.env.PORTICO_BENCH_STREAM_CHUNKS = String(num("stream-chunks", 100));
const LONG_TEXT = Array.from({ length: Number(process.env.PORTICO_BENCH_STREAM_CHUNKS ?? 100) }, (_, i) => `w${i} `);
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
  /** What the non-streamed requests post (Portico targets: `--route`). */
  route?: Job["route"];
}

interface Job {
  mode: "load" | "streams";
  /**
   * `messages`: a coding agent's Messages body of `bodyKb` kB, `"stream": true` for streamed jobs, its last user
   * text "Count." in streams mode (the fake Anthropic answers it with 100 text deltas); `chat` (default): the small chat body.
   */
  route: "chat" | "messages";
  bodyKb: number;
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

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
/** CPU ms of the serving processes per request completed in a window, and µs per chunk event received. */
const perRequest = (f: Figures) => f.cpuMs / f.requests;
const perChunk = (f: Figures) => (1000 * f.cpuMs) / f.chunks;
/** A target's figure for a phase: the median of its windows' figures (each a ratio of its own window); counts summed. */
function summary(windows: Figures[]) {
  return {
    rps: median(windows.map((f) => f.rps)),
    p99: median(windows.map((f) => f.p99)),
    cpuPerRequest: median(windows.map(perRequest)),
    cpuPerChunk: median(windows.map(perChunk)),
    errors: windows.reduce((n, f) => n + f.errors, 0),
    bad: windows.reduce((n, f) => n + f.bad, 0),
  };
}

async function main(): Promise<void> {
  const seconds = num("seconds", 5);
  const warmup = num("warmup", 1);
  const rounds = num("rounds", 3);
  const c1Seconds = num("c1-seconds", seconds);
  const oneGroup = process.argv.includes("--one-group");
  const windows = Math.max(1, Math.round(num("windows", 6)));
  const windowWarmup = num("window-warmup", 0.25);
  const warmSeconds = num("warm-seconds", 2);
  const verbose = process.argv.includes("--verbose");
  const rssSeconds = num("rss-seconds", 0);
  const profileDir = flag("profile");
  /** `--phase c32|streams`: only that heavy phase (for a profile of one kind of load). */
  const onlyPhase = flag("phase");
  const wanted = (flag("targets") ?? "direct,bare,fastify,serve1,serve2,split").split(",");
  const base = flag("base");
  const route: Job["route"] = flag("route") === "messages" ? "messages" : "chat";
  const bodyKb = num("body-kb", 60);
  if (route === "messages" && wanted.some((t) => ["direct", "bare", "fastify"].includes(t))) throw new Error("--route messages: Portico targets only (serve1, serve2, split)");
  const serveModel = flag("serve-model") ?? (route === "messages" ? "anthropic/claude-sonnet-4" : "groq/llama-3.3-70b");
  // Extra environment for this checkout's Portico processes and for the base's (`--serve-env` / `--base-env` K=V,…).
  const envOf = (name: string): Record<string, string> => Object.fromEntries((flag(name) ?? "").split(",").filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]));
  const serveEnv = envOf("serve-env");
  // With `--profile`: `--profile-interval <µs>` (V8's sampling interval) and `--profile-node-flags "<flags>"` (e.g. `--no-turbo-inlining`) for the profiled processes.
  const profileFlags = [...(flag("profile-interval") ? [`--cpu-prof-interval=${flag("profile-interval")}`] : []), ...(flag("profile-node-flags")?.split(" ").filter(Boolean) ?? [])];
  const baseEnv = envOf("base-env");
  const serveLongModel = flag("serve-long-model") ?? "together/llama-3.3-70b";
  const dir = mkdtempSync(join(tmpdir(), "portico-bench-hot-"));
  const children: ChildProcess[] = [];
  const loadStart = loadavg().map((l) => l.toFixed(2)).join(" ");
  let load: ReturnType<typeof startJobWorker<Job, Figures>> | undefined;
  try {
    const self = resolve(import.meta.dirname, "chat-hot-path.ts");
    const fakes = await spawnUntil(["bin/run-ts.mjs", self, "--role", "fakes", ...(route === "messages" ? ["--anthropic"] : [])], {}, join(dir, "fakes.log"), (out) => {
      const m = /FAKES (\S+) (\S+)( \S+)?\n/.exec(out);
      return m ? { fake: m[1]!, long: m[2]!, anthropic: m[3]?.trim() } : undefined;
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
      ...(fakes.value.anthropic ? { PORTICO_PROVIDER_ANTHROPIC_BASE_URL: fakes.value.anthropic } : {}),
    };
    let keys: { management: string; api: string } | undefined;
    let baseKeys: { management: string; api: string } | undefined;
    const serveGroups: Array<Array<() => Promise<Target & { children: ChildProcess[] }>>> = [];
    const startServe = async (workers: number, name: string, checkout = root) => {
      const isBase = checkout !== root;
      // The base checkout's profile goes to <dir>/base, so one run profiles both builds under the same load.
      const args = [...(profileDir && workers === 1 ? ["--cpu-prof", `--cpu-prof-dir=${isBase ? join(profileDir, "base") : profileDir}`, ...profileFlags] : []), "bin/portico.mjs", "serve"];
      const env = { ...providerEnv, ...(isBase ? { PORTICO_DATA_DIR: join(dir, "data-base"), ...baseEnv } : serveEnv), PORT: "0", PORTICO_GRPC_PORT: "0", PORTICO_WORKERS: String(workers) };
      const s = await spawnUntil(args, env, join(dir, `${name}.log`), serveReady(workers), 60_000, checkout);
      let own = isBase ? baseKeys : keys;
      if (!own) {
        if (!s.value.mk || !s.value.ak) throw new Error("serve printed no keys");
        own = { management: s.value.mk, api: s.value.ak };
        if (isBase) baseKeys = own;
        else keys = own;
        for (const [provider, key] of [["groq", "gsk-bench"], ["together", "tg-bench"], ...(route === "messages" ? [["anthropic", "sk-ant-bench"]] : [])]) {
          const r = await fetch(`${s.value.api}/byok`, { method: "POST", headers: { authorization: `Bearer ${own.management}`, "content-type": "application/json" }, body: JSON.stringify({ provider, key }) });
          if (r.status !== 200) throw new Error(`BYOK create ${provider}: ${r.status} ${await r.text()}`);
        }
      }
      const pid = s.child.pid!;
      const tree = processTree(pid);
      return { ...porticoTarget(name, s.value.api, own.api), pids: () => tree, rssPid: workers === 1 ? pid : undefined, children: [s.child] };
    };
    // With `--route messages` the streams phase posts to /messages too, with the same model (the fake Anthropic
    // picks the 100-delta answer by the last user text, as the chat route's streams say "Count.").
    const porticoTarget = (name: string, api: string, key: string) => ({
      name,
      url: route === "messages" ? `${api}/messages` : `${api}/chat/completions`,
      longUrl: route === "messages" ? `${api}/messages` : `${api}/chat/completions`,
      key,
      model: serveModel,
      longModel: route === "messages" ? serveModel : serveLongModel,
      route,
    });
    // A group is started together and its targets take turns; a target and its base are one group.
    if (wanted.includes("serve1"))
      serveGroups.push([() => startServe(1, "Portico serve, 1 worker"), ...(base ? [() => startServe(1, "Portico serve, 1 worker (base)", resolve(base))] : [])]);
    if (wanted.includes("serve2")) serveGroups.push([() => startServe(2, "Portico serve, 2 workers")]);
    // The split pair of a checkout (with `--base`, the base's too, on the base's data folder and keys, right after).
    const startSplit = async (name: string, checkout = root) => {
      const isBase = checkout !== root;
      if (!(isBase ? baseKeys : keys)) await stop((await startServe(1, isBase ? "bootstrap (base)" : "bootstrap", checkout)).children[0]!);
      const own = (isBase ? baseKeys : keys)!;
      const env = { ...providerEnv, ...(isBase ? { PORTICO_DATA_DIR: join(dir, "data-base"), ...baseEnv } : serveEnv) };
      const grpcPort = await freePort();
      const prof = profileDir ? ["--cpu-prof", `--cpu-prof-dir=${join(profileDir, isBase ? "split-base" : "split")}`, ...profileFlags] : [];
      const core = await spawnUntil([...prof, "bin/portico.mjs", "core"], { ...env, PORTICO_GRPC_PORT: String(grpcPort) }, join(dir, `${name}-core.log`), (out) => (/core listening/.test(out) ? true : undefined), 60_000, checkout);
      const gateway = await spawnUntil([...prof, "bin/portico.mjs", "gateway"], { ...env, PORT: "0", PORTICO_CORE_URL: `http://127.0.0.1:${grpcPort}` }, join(dir, `${name}-gateway.log`), (out) => /"url":"(http:\/\/127\.0\.0\.1:\d+\/api\/v1)","msg":"gateway listening/.exec(out)?.[1], 60_000, checkout);
      const pids = [core.child.pid!, gateway.child.pid!];
      return { ...porticoTarget(name, gateway.value, own.api), pids: () => pids, children: [core.child, gateway.child] };
    };
    if (wanted.includes("split"))
      serveGroups.push([() => startSplit("Portico core + gateway over gRPC"), ...(base ? [() => startSplit("Portico core + gateway over gRPC (base)", resolve(base))] : [])]);

    const gen = startJobWorker<Job, Figures>(import.meta.url);
    load = gen;
    const job = (t: Target, stream: boolean, concurrency: number, mode: Job["mode"] = "load"): Job => ({
      mode,
      route: t.route ?? "chat",
      bodyKb,
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
      /** The measured windows, in the order they ran. */
      c32: Figures[];
      streams: Figures[];
      rss?: number;
      load: string;
    }
    const rows: Row[] = [];
    /** The groups (rows measured taking turns), for the paired ratios. */
    const groups: Row[][] = [];
    const newRow = (name: string): Row => ({ name, c1: [], ttfc: [], c32: [], streams: [], load: "" });
    /** The group's order in round `r`: rotated by r (two targets: A B, B A, A B, …). */
    const turn = <T>(xs: readonly T[], r: number) => xs.map((_, i) => xs[(i + r) % xs.length]!);
    const phases = (["c32", "streams"] as const).filter((p) => !onlyPhase || onlyPhase === p);
    const windowJob = (t: Target, phase: "c32" | "streams", secs: number, warm: number): Job => ({
      ...(phase === "c32" ? job(t, false, 32) : job(t, true, 8, "streams")),
      seconds: secs,
      warmup: warm,
    });
    /**
     * One group of targets, all up: an uncounted c=32 window for each, then the c=1 rounds, then per phase an
     * uncounted window for each and `windows` measured windows per target, the targets taking turns, the first
     * of each round rotating.
     */
    const measureGroup = async (group: Target[], groupRows: Row[]) => {
      for (const t of group) await gen.run(windowJob(t, "c32", warmSeconds / 2, 0));
      // …and streams (at c=1 a serve's first first-chunk round read 2.3 ms against 0.4–0.6 for its next two).
      for (const t of group) await gen.run(windowJob(t, "streams", warmSeconds / 4, 0));
      for (let round = 0; round < rounds; round++)
        for (const i of turn([...group.keys()], round)) {
          const c1 = await gen.run({ ...job(group[i]!, false, 1), seconds: c1Seconds });
          groupRows[i]!.c1.push(c1.p50);
          const ttfc = await gen.run({ ...job(group[i]!, true, 1), seconds: c1Seconds });
          groupRows[i]!.ttfc.push(ttfc.p50);
        }
      for (const phase of phases) {
        // After the c=1 rounds (or the c=32 windows) the first window of a target was slow (0.46 ms CPU per
        // request against 0.23–0.29 for its next five in one run): each gets an uncounted one first.
        for (const t of group) await gen.run(windowJob(t, phase, warmSeconds / 2, 0));
        for (let w = 0; w < windows; w++)
          for (const i of turn([...group.keys()], w)) {
            const row = groupRows[i]!;
            if (row.load === "") row.load = loadavg()[0]!.toFixed(2);
            const f = await gen.run(windowJob(group[i]!, phase, seconds / windows, windowWarmup));
            row[phase].push(f);
            if (verbose) console.error(`  ${phase} window ${w + 1}/${windows} ${row.name}: ${f.rps.toFixed(0)} req/s, p99 ${f.p99.toFixed(2)} ms, ${phase === "c32" ? `${perRequest(f).toFixed(3)} ms CPU/req` : `${perChunk(f).toFixed(1)} µs CPU/chunk`}, load ${loadavg()[0]!.toFixed(2)}`);
          }
      }
      for (const row of groupRows) {
        const c32 = summary(row.c32);
        const st = summary(row.streams);
        console.error(
          `${row.name}: c=1 ${row.c1.map((v) => v.toFixed(3)).join("/")} ms, ttfc ${row.ttfc.map((v) => v.toFixed(3)).join("/")} ms, c=32 ${c32.rps.toFixed(0)} req/s ${c32.cpuPerRequest.toFixed(3)} ms CPU/req (windows ${row.c32.map((f) => perRequest(f).toFixed(3)).join("/")}), ${st.cpuPerChunk.toFixed(1)} µs CPU/chunk, load ${row.load}`,
        );
      }
    };

    // The load generator (one worker thread for the whole run) and the fake provider warm up at c=32 (and with
    // streams at c=8) before anything is measured.
    const fakeTarget: Target = { name: "fake", url: `${fakes.value.fake}/v1/chat/completions`, longUrl: `${fakes.value.long}/v1/chat/completions`, key: "k", model: "llama-3.3-70b", longModel: "llama-3.3-70b", pids: () => [] };
    for (const phase of ["c32", "streams"] as const) await gen.run(windowJob(fakeTarget, phase, warmSeconds, 0));
    // The relays and the fake stay up and are one group; each group of Portico targets (a target and its base) is
    // started, measured and stopped, one group at a time, so no idle Portico process of another group shares the machine.
    // `--one-group`: the relays and every Portico target are one group, all up at once.
    if (!oneGroup) {
      const relayRows = targets.map((t) => newRow(t.name));
      rows.push(...relayRows);
      groups.push(relayRows);
      if (targets.length > 0) await measureGroup(targets, relayRows);
    }
    for (const starts of oneGroup ? [serveGroups.flat()] : serveGroups) {
      const group: Array<Target & { children: ChildProcess[] }> = oneGroup ? targets.map((t) => ({ ...t, children: [] })) : [];
      for (const start of starts) {
        const t = await start();
        children.push(...t.children);
        group.push(t);
      }
      const groupRows = group.map((t) => newRow(t.name));
      rows.push(...groupRows);
      groups.push(groupRows);
      await measureGroup(group, groupRows);
      for (const [i, t] of group.entries()) {
        if (t.rssPid === undefined || rssSeconds <= 0) continue;
        await gen.run({ ...job(t, false, 32), seconds: rssSeconds, warmup: 0 });
        groupRows[i]!.rss = rssMb(t.rssPid);
      }
      for (const t of group) for (const c of t.children) await stop(c);
    }

    const direct = rows.find((r) => r.name.startsWith("direct"));
    const bare = rows.find((r) => r.name.startsWith("bare"));
    const bareRps = bare ? summary(bare.c32).rps : NaN;
    const added = (v: number, d: number | undefined) => (d === undefined || Number.isNaN(d) ? v.toFixed(3) : `${v.toFixed(3)} (+${(v - d).toFixed(3)})`);
    console.log(
      `\nNode ${process.version}, ${cpus().length} CPU(s); c=1: ${c1Seconds}s per round after ${warmup}s warm-up, median of ${rounds} rounds; c=32 and streams: median of ${windows} windows of ${(seconds / windows).toFixed(2)}s (after ${windowWarmup}s each) per target, the targets started together taking turns; load average at start ${loadStart}, at end ${loadavg().map((l) => l.toFixed(2)).join(" ")}.\n`,
    );
    console.log("| target | c=1 p50 ms (added) | first chunk p50 ms (added) | c=32 req/s | c=32 % of bare | c=32 p99 ms | CPU per request ms | CPU per chunk µs | bad streams | errors | RSS MB | load |");
    console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (const r of rows) {
      const c1 = median(r.c1);
      const ttfc = median(r.ttfc);
      const c32 = summary(r.c32);
      const st = summary(r.streams);
      const measured = r !== direct;
      console.log(
        `| ${r.name} | ${r === direct ? c1.toFixed(3) : added(c1, direct && median(direct.c1))} | ${r.ttfc.length === 0 ? "—" : r === direct ? ttfc.toFixed(3) : added(ttfc, direct && median(direct.ttfc))} | ${c32.rps.toFixed(0)} | ${bare ? ((100 * c32.rps) / bareRps).toFixed(1) : "—"} | ${c32.p99.toFixed(2)} | ${measured ? c32.cpuPerRequest.toFixed(3) : "—"} | ${measured && r.streams.length ? st.cpuPerChunk.toFixed(1) : "—"} | ${st.bad} | ${c32.errors + st.errors} | ${r.rss?.toFixed(0) ?? "—"} | ${r.load} |`,
      );
    }
    // Every window's figure, in the order measured (the table's figures are their medians).
    console.log("\nWindows, in the order measured:");
    for (const r of rows) {
      const parts = [];
      if (r.c32.length) parts.push(`c=32 req/s ${r.c32.map((f) => f.rps.toFixed(0)).join(" ")}`);
      if (r.c32.length && r !== direct) parts.push(`CPU/req ms ${r.c32.map((f) => perRequest(f).toFixed(3)).join(" ")}`);
      if (r.streams.length && r !== direct) parts.push(`CPU/chunk µs ${r.streams.map((f) => perChunk(f).toFixed(1)).join(" ")}`);
      console.log(`- ${r.name}: ${parts.join("; ")}`);
    }
    // Each target of a group against each one before it (the tree under test first, with --base) round by round:
    // the windows of a round ran next to each other, so a change of the machine's load moves both. CPU as a ratio;
    // c=32 req/s too (a share of the earlier's); the c=1 p50s (non-streamed, and to the first chunk) as a difference,
    // against direct too (the added latency).
    for (const g of groups)
      for (const [j, r] of g.entries())
        for (const first of g.slice(0, j)) {
          if (r === direct) continue;
          if (first !== direct)
            for (const [label, of, per] of [["c=32 req/s", "c32", (f: Figures) => f.rps], ["CPU/req", "c32", perRequest], ["CPU/chunk", "streams", perChunk]] as const) {
              const ratios = r[of].map((f, w) => per(f) / per(first[of][w]!));
              if (ratios.length) console.log(`- ${r.name} / ${first.name}, ${label} per round: ${ratios.map((x) => x.toFixed(3)).join(" ")}; median ${median(ratios).toFixed(3)}`);
            }
          for (const [label, of] of [["c=1 p50 ms", "c1"], ["first chunk p50 ms", "ttfc"]] as const) {
            const diffs = r[of].map((v, k) => v - first[of][k]!);
            if (diffs.length) console.log(`- ${r.name} − ${first.name}, ${label} per round: ${diffs.map((x) => x.toFixed(3)).join(" ")}; median ${median(diffs).toFixed(3)}`);
          }
        }
  } finally {
    await load?.stop();
    for (const c of children.reverse()) await stop(c);
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The fake provider: one that answers "Hello, world!" and one that streams 100 numbered chunks; with `--anthropic`
 * (`--route messages`) a fake Anthropic Messages upstream too (test/helpers/fake-upstreams/anthropic.ts: a streamed
 * request gets `event:` + `data:` frames as Anthropic writes them, message_start, ping, content_block_start, a
 * content_block_delta per text piece, content_block_stop, message_delta with usage, message_stop), answering
 * "Hello, world!" (4 deltas when streamed), or the 100 numbered pieces when the last user text is "Count." (the
 * streams phase).
 */
async function fakesRole(): Promise<void> {
  const { startFakeOpenAI } = await import("../test/helpers/fake-upstreams/openai.js");
  const fake = await startFakeOpenAI({ text: ["Hello", ", ", "world", "!"], finish: "stop", usage: { input: 12, output: 4 } });
  const long = await startFakeOpenAI({ text: LONG_TEXT, finish: "stop", usage: { input: 12, output: LONG_TEXT.length } });
  const fakes = [fake, long];
  if (process.argv.includes("--anthropic")) {
    const { startFakeAnthropic } = await import("../test/helpers/fake-upstreams/anthropic.js");
    const anthropic = await startFakeAnthropic({ text: ["Hello", ", ", "world", "!"], finish: "end_turn", usage: { input: 15000, output: 4 } });
    const count: Script = { text: LONG_TEXT, finish: "end_turn", usage: { input: 15000, output: LONG_TEXT.length } };
    anthropic.scriptFor = (req) => (lastUserText(req.body) === "Count." ? count : undefined);
    fakes.push(anthropic);
  }
  // The fakes record every request (a coding agent's body is tens of kB): keep none.
  setInterval(() => fakes.forEach((f) => f.requests.splice(0)), 1000).unref();
  console.log(`FAKES ${fakes.map((f) => f.url).join(" ")}`);
  process.once("SIGTERM", () => void Promise.all(fakes.map((f) => f.close())).then(() => process.exit(0)));
}

/** The last text block of a Messages body's last message (the fake Anthropic's pick of its answer). */
function lastUserText(body: { messages?: Array<{ content?: unknown }> } | undefined): string | undefined {
  const content = body?.messages?.at(-1)?.content;
  if (!Array.isArray(content)) return typeof content === "string" ? content : undefined;
  const texts = content.filter((b: { type?: string }) => b.type === "text");
  return (texts.at(-1) as { text?: string } | undefined)?.text;
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

/**
 * A coding agent's Messages body of the job's size (the same generator whatever the job; `--body-kb` 0 to 35 give
 * its smallest, 36.6 kB: the system prompt and the 20 tools with one user turn), streamed when the job streams; in streams
 * mode its last user text is "Count." (the fake Anthropic's 100-delta answer).
 */
function messagesBody(job: Job): Record<string, unknown> {
  const body = codingAgentBody(job.bodyKb * 1024, job.model);
  body.stream = job.stream;
  if (job.mode === "streams") {
    const last = (body.messages as Array<{ content: Array<{ type: string; text?: string }> }>).at(-1)!;
    last.content = last.content.map((b) => (b.type === "text" ? { ...b, text: "Count." } : b));
  }
  return body;
}

/**
 * A streamed Messages answer as the client received it: its chunks are the content_block_delta events (100 for
 * the 100 pieces; the other events, message_start, content_block_start/stop, message_delta, message_stop and any
 * ping, are not counted); bad unless the events run message_start … message_stop, every one with a `data:` line
 * whose type is its `event:` name, and the text deltas join to the expected text.
 */
function messagesStream(body: string, expected: string): { chunks: number; bad: boolean } {
  const types: string[] = [];
  let content = "";
  let chunks = 0;
  let consistent = true;
  for (const event of body.split("\n\n")) {
    const lines = event.split("\n");
    const data = lines.find((l) => l.startsWith("data: "))?.slice(6);
    if (data === undefined) continue;
    const parsed = JSON.parse(data) as { type: string; delta?: { type?: string; text?: string } };
    if (lines.find((l) => l.startsWith("event: "))?.slice(7) !== parsed.type) consistent = false;
    types.push(parsed.type);
    if (parsed.type !== "content_block_delta") continue;
    chunks++;
    if (parsed.delta?.type === "text_delta") content += parsed.delta.text ?? "";
  }
  return { chunks, bad: !consistent || types[0] !== "message_start" || types.at(-1) !== "message_stop" || !types.includes("message_delta") || content !== expected };
}

/** Load worker: a closed loop; the serving processes' CPU is read at the start and end of the measured window. */
async function worker(job: Job): Promise<Figures> {
  const target = new URL(job.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.concurrency });
  const payload =
    job.route === "messages"
      ? JSON.stringify(messagesBody(job))
      : JSON.stringify({ model: job.model, messages: [{ role: "user", content: job.mode === "streams" ? "Count." : "Say hello." }], stream: job.stream });
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
            if (job.route === "messages") return done({ ok: res.statusCode === 200, ...messagesStream(body, expected) });
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
  return figures;
}

const role = flag("role");
// In a worker thread: startJobWorker's load generator (jobs posted one at a time), or one job as workerData
// (runInWorker, as bench/serve-memory.ts does).
if (!isMainThread && (workerData as { jobs?: boolean }).jobs) parentPort!.on("message", (job: Job) => void worker(job).then((f) => parentPort!.postMessage(f)));
else if (!isMainThread) parentPort!.postMessage(await worker(workerData as Job));
else if (role === "fakes") await fakesRole();
else if (role === "relays") await relaysRole(process.argv[process.argv.indexOf("relays") + 1]!, process.argv[process.argv.indexOf("relays") + 2]!);
else await main();
