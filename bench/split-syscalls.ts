/**
 * System calls per non-streamed chat request (issue 24, "split ≤ 1.5× in-process"): the bare `node:http` relay,
 * `portico serve` (1 worker) and the split pair (`portico core` + `portico gateway`), each process counted on its
 * own with `perf trace -s -p <pid>` (kernel tracepoints: no ptrace stop per call, unlike strace) over exactly
 * `--requests` requests at c=`--concurrency` on keep-alive connections, after `--warm-seconds` of uncounted load.
 * perf is attached while the target is idle (1.5 s) and detached 0.5 s after the last answer; the idle syscalls
 * of that time (timers, the event loop's wake-ups) are in the counts and small beside thousands of requests.
 *
 *   npm run -s build && node bin/run-ts.mjs bench/split-syscalls.ts [--requests 20000] [--concurrency 32]
 *       [--targets bare,serve1,split] [--base <checkout>] [--top 12] [--profile <dir>] [--no-perf] [--stream [--stream-chunks 100]]
 *
 * Prints, per target and process, syscalls per request by name (all threads; the main thread's share apart) and
 * the process's CPU per request over the counted window (slower than without perf attached: ratios only).
 * `--base <checkout>`: the same targets of another checkout with its own `dist/` (serve1, split) too.
 * `--stream`: streamed requests instead, as chat-hot-path.ts's streams phase sends them ("Count.", the long model:
 * 100 content chunks, or `--stream-chunks N`), read to their end; "request" above is then a stream (use
 * `--concurrency 8` for that phase's load; the bare relay's streams go to its `/long/` path).
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createByok, freePort, processTree, spawnUntil, startServe, stop } from "./lib/processes.js";
import { flag, num } from "./lib/args.js";

const CLOCK_TICKS = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
/** User and system CPU ms of whole processes (all threads). */
function cpuOf(pids: readonly number[]): { user: number; sys: number } {
  let user = 0;
  let sys = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      user += Number(f[11]);
      sys += Number(f[12]);
    } catch {
      // gone
    }
  }
  return { user: (user * 1000) / CLOCK_TICKS, sys: (sys * 1000) / CLOCK_TICKS };
}

const requests = num("requests", 20_000);
const concurrency = num("concurrency", 32);
const warmSeconds = num("warm-seconds", 3);
const top = num("top", 12);
const wanted = (flag("targets") ?? "bare,serve1,split").split(",");
const base = flag("base");
/** `--profile <dir>`: serve, core and gateway run with `--cpu-prof` into <dir> (<dir>/base for the base's). */
const profileDir = flag("profile");
/** `--no-perf`: CPU per request only (no syscall counts). */
const noPerf = process.argv.includes("--no-perf");
/** `--stream`: streamed "Count." requests to the long model (chat-hot-path.ts's streams phase). */
const streamed = process.argv.includes("--stream");
if (flag("stream-chunks") !== undefined) process.env.PORTICO_BENCH_STREAM_CHUNKS = String(num("stream-chunks", 100));
const root = resolve(import.meta.dirname, "..");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Target {
  name: string;
  url: string;
  key: string;
  model: string;
  /** Processes counted one by one: a label and the pids (a process tree counts as one). */
  procs: Array<{ label: string; pids: number[] }>;
}

/** A closed loop at `concurrency` until `count` answers (or `ms` elapsed); resolves with the answers and errors. */
async function drive(t: Target, agent: http.Agent, opts: { count?: number; ms?: number }): Promise<{ done: number; errors: number }> {
  const url = new URL(t.url);
  const payload = streamed
    ? JSON.stringify({ model: t.model.replace(/^groq\//, "together/"), messages: [{ role: "user", content: "Count." }], stream: true })
    : JSON.stringify({ model: t.model, messages: [{ role: "user", content: "Say hello." }], stream: false });
  const until = opts.ms ? Date.now() + opts.ms : Infinity;
  let started = 0;
  let done = 0;
  let errors = 0;
  const one = () =>
    new Promise<void>((ok) => {
      const req = http.request(
        { agent, host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json", "content-length": Buffer.byteLength(payload) } },
        (res) => {
          res.resume();
          res.on("end", () => {
            if (res.statusCode !== 200) errors++;
            ok();
          });
        },
      );
      req.on("error", () => {
        errors++;
        ok();
      });
      req.end(payload);
    });
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while ((opts.count === undefined || started < opts.count) && Date.now() < until) {
        started++;
        await one();
        done++;
      }
    }),
  );
  return { done, errors };
}

/** `perf trace -s` summary: calls per syscall name, all threads, and the thread `mainTid`'s alone. */
function parseSummary(text: string, mainTids: Set<number>): { all: Map<string, number>; main: Map<string, number>; ms: Map<string, number> } {
  const all = new Map<string, number>();
  const main = new Map<string, number>();
  /** Time inside each syscall, ms (wall time: includes waiting, e.g. epoll_pwait's). */
  const ms = new Map<string, number>();
  let tid = -1;
  for (const line of text.split("\n")) {
    const head = /^\s*\S.*\((\d+)\), \d+ events/.exec(line);
    if (head) {
      tid = Number(head[1]);
      continue;
    }
    const row = /^\s+([a-z_0-9]+)\s+(\d+)\s+\d+\s+([\d.]+)\s/.exec(line);
    if (!row) continue;
    const [, name, calls, total] = row;
    all.set(name!, (all.get(name!) ?? 0) + Number(calls));
    ms.set(name!, (ms.get(name!) ?? 0) + Number(total));
    if (mainTids.has(tid)) main.set(name!, (main.get(name!) ?? 0) + Number(calls));
  }
  return { all, main, ms };
}

async function measure(t: Target, dir: string): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  await drive(t, agent, { ms: warmSeconds * 1000 });
  // Without perf first: CPU per request, user and system apart.
  const c0 = t.procs.map((p) => cpuOf(p.pids));
  const q0 = Date.now();
  const plain = await drive(t, agent, { count: requests });
  const c1 = t.procs.map((p) => cpuOf(p.pids));
  const plainSecs = (Date.now() - q0) / 1000;
  await sleep(500);
  if (noPerf) {
    agent.destroy();
    console.log(`\n## ${t.name}: ${plain.done} requests in ${plainSecs.toFixed(1)} s, ${plain.errors} errors, load ${loadavg()[0]!.toFixed(2)}`);
    t.procs.forEach((p, i) => console.log(`${p.label}: CPU per request user ${((c1[i]!.user - c0[i]!.user) / plain.done).toFixed(3)} + sys ${((c1[i]!.sys - c0[i]!.sys) / plain.done).toFixed(3)} ms`));
    return;
  }
  const perfs = t.procs.map((p, i) => {
    const out = join(dir, `perf-${t.name.replace(/\W+/g, "-")}-${i}.txt`);
    const child: ChildProcess = spawn("perf", ["trace", "-s", "-o", out, "-p", p.pids.join(",")], { stdio: "ignore" });
    return { ...p, out, child };
  });
  await sleep(1500);
  const cpu0 = t.procs.map((p) => cpuOf(p.pids));
  const t0 = Date.now();
  const r = await drive(t, agent, { count: requests });
  const secs = (Date.now() - t0) / 1000;
  const cpu1 = t.procs.map((p) => cpuOf(p.pids));
  await sleep(500);
  for (const p of perfs) {
    const exited = new Promise((ok) => p.child.once("exit", ok));
    p.child.kill("SIGINT");
    await exited;
  }
  agent.destroy();
  console.log(`\n## ${t.name}: ${r.done} requests in ${secs.toFixed(1)} s (${(r.done / secs).toFixed(0)} req/s under perf; ${(plain.done / plainSecs).toFixed(0)} without), ${r.errors + plain.errors} errors, load ${loadavg()[0]!.toFixed(2)}`);
  let total = 0;
  perfs.forEach((p, i) => {
    const { all, main, ms } = parseSummary(readFileSync(p.out, "utf8"), new Set(p.pids));
    const sum = [...all.values()].reduce((a, b) => a + b, 0);
    const mainSum = [...main.values()].reduce((a, b) => a + b, 0);
    total += sum;
    const per = (a: { user: number; sys: number }, b: { user: number; sys: number }, n: number) =>
      `user ${((b.user - a.user) / n).toFixed(3)} + sys ${((b.sys - a.sys) / n).toFixed(3)} ms`;
    console.log(`${p.label}: CPU per request ${per(c0[i]!, c1[i]!, plain.done)} without perf (${per(cpu0[i]!, cpu1[i]!, r.done)} under perf); ${(sum / r.done).toFixed(2)} syscalls per request (main thread ${(mainSum / r.done).toFixed(2)})`);
    const rows = [...all].sort((a, b) => b[1] - a[1]).slice(0, top);
    console.log(rows.map(([name, n]) => `  ${name.padEnd(16)} ${(n / r.done).toFixed(3).padStart(8)} per request (main thread ${((main.get(name) ?? 0) / r.done).toFixed(3)}), ${((1000 * (ms.get(name) ?? 0)) / n).toFixed(1)} µs each`).join("\n"));
  });
  if (perfs.length > 1) console.log(`both processes: ${(total / r.done).toFixed(2)} syscalls per request`);
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "portico-bench-sys-"));
  const children: ChildProcess[] = [];
  console.log(`load at start ${loadavg().map((l) => l.toFixed(2)).join(" ")}; ${requests} requests at c=${concurrency} per target`);
  try {
    const hot = resolve(import.meta.dirname, "chat-hot-path.ts");
    const fakes = await spawnUntil(["bin/run-ts.mjs", hot, "--role", "fakes"], {}, join(dir, "fakes.log"), (out) => /FAKES (\S+) (\S+)/.exec(out)?.slice(1));
    children.push(fakes.child);
    const [fake, long] = fakes.value as [string, string];
    const env = { PORTICO_PROVIDER_GROQ_BASE_URL: `${fake}/v1`, PORTICO_PROVIDER_TOGETHER_BASE_URL: `${long}/v1` };
    if (wanted.includes("bare")) {
      const relays = await spawnUntil(["bin/run-ts.mjs", hot, "--role", "relays", fake, long], {}, join(dir, "relays.log"), (out) => /RELAYS (\S+) (\S+)/.exec(out)?.[1]);
      children.push(relays.child);
      await measure({ name: "bare node:http relay", url: `${relays.value}${streamed ? "/long" : ""}/v1/chat/completions`, key: "k", model: "llama-3.3-70b", procs: [{ label: "relay", pids: [relays.child.pid!] }] }, dir);
      await stop(relays.child);
    }
    for (const [checkout, suffix] of [[root, ""], ...(base ? [[resolve(base), " (base)"]] : [])] as Array<[string, string]>) {
      const dataDir = join(dir, `data${suffix ? "-base" : ""}`);
      const prof = profileDir ? ["--cpu-prof", `--cpu-prof-dir=${suffix ? join(profileDir, "base") : profileDir}`] : [];
      const serve = await startServe({ dataDir, logFile: join(dir, `serve${suffix ? "-base" : ""}.log`), env, checkout, nodeArgs: wanted.includes("serve1") ? prof : [] });
      for (const [provider, key] of [["groq", "gsk-bench"], ["together", "tg-bench"]]) await createByok(serve.api, serve.management, { provider, key });
      const model = "groq/llama-3.3-70b";
      if (wanted.includes("serve1")) await measure({ name: `serve, 1 worker${suffix}`, url: `${serve.api}/chat/completions`, key: serve.apiKey, model, procs: [{ label: "serve", pids: serve.pids }] }, dir);
      await stop(serve.child);
      if (!wanted.includes("split")) continue;
      const grpcPort = await freePort();
      const penv = { ...env, PORTICO_DATA_DIR: dataDir, PORTICO_EMBEDDED_HOST: "false" };
      const core = await spawnUntil([...prof, "bin/portico.mjs", "core"], { ...penv, PORTICO_GRPC_PORT: String(grpcPort) }, join(dir, `core${suffix ? "-base" : ""}.log`), (out) => (/core listening/.test(out) ? true : undefined), 60_000, checkout);
      children.push(core.child);
      const gateway = await spawnUntil([...prof, "bin/portico.mjs", "gateway"], { ...penv, PORT: "0", PORTICO_CORE_URL: `http://127.0.0.1:${grpcPort}` }, join(dir, `gateway${suffix ? "-base" : ""}.log`), (out) => /"url":"(http:\/\/127\.0\.0\.1:\d+\/api\/v1)","msg":"gateway listening/.exec(out)?.[1], 60_000, checkout);
      children.push(gateway.child);
      await measure(
        { name: `split (core + gateway)${suffix}`, url: `${gateway.value}/chat/completions`, key: serve.apiKey, model, procs: [{ label: "core", pids: processTree(core.child.pid!) }, { label: "gateway", pids: processTree(gateway.child.pid!) }] },
        dir,
      );
      await stop(gateway.child);
      await stop(core.child);
    }
  } finally {
    for (const c of children) await stop(c).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(`\nload at end ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
}

await main();
