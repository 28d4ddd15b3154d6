/**
 * What the resident memory of `portico serve` (1 worker, one process) is made of, idle and after c=32
 * non-streaming chat load (issue 24's "RSS after 60 s at c=32"): the process is started with
 * bench/lib/memory-probe.cjs preloaded, which on SIGUSR2 writes `process.memoryUsage()`, V8's heap spaces and
 * code statistics to a file; /proc/<pid>/smaps gives the native side by mapping.
 *
 *   npm run -s build && node bin/run-ts.mjs bench/serve-memory.ts [--seconds 60] [--node-args "--max-semi-space-size=4"]
 *       [--snapshot] [--keep] [--checkout <dir>] [--idle-after <s>] [--during <s>]
 *
 * Readings: 3 s after ready (idle), `--during` seconds into the load (with `--snapshot`, a heap snapshot of what
 * is alive while requests run), right after the load, and `--idle-after` seconds later.
 */
import { mkdtempSync, readFileSync, rmSync, existsSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { runInWorker } from "./lib/worker.js";
import { createByok, spawnUntil, startServe, stop } from "./lib/processes.js";
import { flag, num } from "./lib/args.js";

const seconds = num("seconds", 60);
const idleAfter = num("idle-after", 0);
const during = num("during", 0);
const nodeArgs = (flag("node-args") ?? "").split(/\s+/).filter(Boolean);
const checkout = flag("checkout");
const snapshot = process.argv.includes("--snapshot");
const keep = snapshot || process.argv.includes("--keep");
const hotPath = new URL("./chat-hot-path.ts", import.meta.url).href;
const probe = resolve(import.meta.dirname, "lib/memory-probe.cjs");

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Resident MB by mapping; anonymous mappings by their size and place: ≥ 1 GB (a wasm memory's reservation),
 * starting on a 64 MB boundary (a glibc thread arena), ≥ 8 MB (thread stacks, other large reservations), otherwise
 * "[anon] small" (V8's heap pages, code, zones, large mallocs).
 */
function smaps(pid: number): Record<string, number> {
  const agg = new Map<string, number>();
  let cur = "";
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (m) {
      const name = m[3]!.trim();
      const size = (parseInt(m[2]!, 16) - parseInt(m[1]!, 16)) / 1048576;
      const arena = parseInt(m[1]!, 16) % (64 * 1048576) === 0 && size <= 64;
      const anon = size >= 1024 ? "[anon] ≥ 1 GB (wasm memory)" : arena ? "[anon] malloc arena" : size >= 8 ? "[anon] ≥ 8 MB" : "[anon] small";
      cur = name === "" ? anon : name.replace(/.*\/node_modules\//, "nm/").replace(/.*\/(bin\/node|node)$/, "node binary");
      continue;
    }
    const r = /^Rss:\s+(\d+) kB/.exec(line);
    if (r) agg.set(cur, (agg.get(cur) ?? 0) + Number(r[1]) / 1024);
  }
  return Object.fromEntries([...agg].sort((a, b) => b[1] - a[1]).slice(0, 9).map(([k, v]) => [k, +v.toFixed(1)]));
}

async function reading(pid: number, out: string, label: string): Promise<void> {
  const file = `${out}.${pid}.json`;
  rmSync(file, { force: true });
  process.kill(pid, "SIGUSR2");
  for (let i = 0; i < 100 && !existsSync(file); i++) await sleep(50);
  await sleep(200);
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024;
  const p = JSON.parse(readFileSync(file, "utf8"));
  console.log(`\n## ${label} (load ${loadavg()[0]!.toFixed(2)})`);
  console.log(`VmRSS ${kb("VmRSS").toFixed(1)} MB: RssAnon ${kb("RssAnon").toFixed(1)}, RssFile ${kb("RssFile").toFixed(1)}; threads ${/Threads:\s+(\d+)/.exec(status)?.[1]}`);
  console.log(`heap used before GC ${p.heapUsedBeforeGc}; memoryUsage ${JSON.stringify(p.mu)}; malloced ${p.malloced.toFixed(1)} (peak ${p.peak_malloced.toFixed(1)})`);
  console.log(`spaces (size/physical/used MB) ${Object.entries(p.spaces as Record<string, { size: number; phys: number; used: number }>).filter(([, s]) => s.size > 0.5).map(([n, s]) => `${n} ${s.size}/${s.phys}/${s.used}`).join(", ")}`);
  console.log(`code ${JSON.stringify(p.code)}`);
  console.log(`smaps by mapping (MB) ${JSON.stringify(smaps(pid))}`);
}

const dir = mkdtempSync(join(tmpdir(), "portico-serve-mem-"));
const fakes = await spawnUntil(["bin/run-ts.mjs", resolve(import.meta.dirname, "chat-hot-path.ts"), "--role", "fakes"], {}, join(dir, "fakes.log"), (o) => {
  const m = /FAKES (\S+) (\S+)/.exec(o);
  return m ? { fake: m[1]!, long: m[2]! } : undefined;
});
try {
  const out = join(dir, "probe");
  const s = await startServe({
    dataDir: join(dir, "data"),
    logFile: join(dir, "serve.log"),
    nodeArgs: ["--require", probe, ...nodeArgs],
    checkout: checkout ? resolve(checkout) : undefined,
    env: { PROBE_OUT: out, ...(snapshot ? { PROBE_SNAP: "1" } : {}), ...(nodeArgs.includes("--expose-gc") ? { PROBE_GC: "1" } : {}), PORTICO_PROVIDER_GROQ_BASE_URL: `${fakes.value.fake}/v1` },
  });
  const pid = s.child.pid!;
  await createByok(s.api, s.management, { provider: "groq", key: "gsk-bench" });
  await sleep(3000);
  await reading(pid, out, "idle, 3 s after ready");
  const job = { mode: "load", url: `${s.api}/chat/completions`, key: s.apiKey, model: "groq/llama-3.3-70b", stream: false, concurrency: 32, seconds, warmup: 0, pids: [pid] };
  const load = runInWorker<{ rps: number; errors: number; requests: number; cpuMs: number; p99: number }>(hotPath, job);
  if (during > 0 && during < seconds) {
    await sleep(during * 1000);
    await reading(pid, out, `${during} s into the load`);
  }
  const f = await load;
  await reading(pid, out, `after ${seconds} s at c=32 (${f.rps.toFixed(0)} req/s, p99 ${f.p99.toFixed(1)} ms, ${(f.cpuMs / f.requests).toFixed(3)} ms CPU per request, ${f.errors} errors)`);
  if (idleAfter > 0) {
    await sleep(idleAfter * 1000);
    await reading(pid, out, `${idleAfter} s idle after the load`);
  }
  await stop(s.child);
} finally {
  await stop(fakes.child);
  if (!keep) rmSync(dir, { recursive: true, force: true });
  else console.log(`log${snapshot ? " and snapshots" : ""} in ${dir}`);
}
