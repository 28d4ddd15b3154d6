/**
 * Cold start and idle memory of the serving process tree.
 *
 *   node bin/run-ts.mjs bench/startup.ts [--runs 3] [--settle 5] [--cmd serve|npm-start] [--workers N]
 *
 * Each run starts `portico serve` (or `npm start`) on a fresh data folder with free ports, measures the
 * time from spawn to the first 200 from /readyz ("first start": migrations + bootstrap), stops it,
 * starts it again on the same folder ("restart"), waits --settle seconds for the embedded host and
 * agent to attach and the heap to settle, then sums the resident memory (RSS) of every process in the
 * tree (`npm` itself reported apart). Prints medians.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "3" },
    settle: { type: "string", default: "5" },
    cmd: { type: "string", default: "serve" },
    workers: { type: "string" },
  },
});
const runs = Number(values.runs);
const settleMs = Number(values.settle) * 1000;
const root = resolve(import.meta.dirname, "..");

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

interface Proc {
  pid: number;
  ppid: number;
  rssKb: number;
  comm: string;
  cmdline: string;
}

function processes(): Proc[] {
  const out: Proc[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      const comm = stat.slice(stat.indexOf("(") + 1, close);
      const fields = stat.slice(close + 2).split(" ");
      const status = readFileSync(`/proc/${name}/status`, "utf8");
      const rss = /VmRSS:\s+(\d+)/.exec(status);
      const cmdline = readFileSync(`/proc/${name}/cmdline`, "utf8").replace(/\0/g, " ").trim();
      out.push({ pid: Number(name), ppid: Number(fields[1]), rssKb: rss ? Number(rss[1]) : 0, comm, cmdline });
    } catch {
      // the process ended while we looked
    }
  }
  return out;
}

function tree(rootPid: number): Proc[] {
  const all = processes();
  const found: Proc[] = [];
  const queue = [rootPid];
  while (queue.length) {
    const pid = queue.shift()!;
    const p = all.find((x) => x.pid === pid);
    if (p) found.push(p);
    for (const c of all) if (c.ppid === pid) queue.push(c.pid);
  }
  return found;
}

async function waitReady(port: number, child: ChildProcess, t0: number): Promise<number> {
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`);
      await res.arrayBuffer();
      if (res.status === 200) return performance.now() - t0;
    } catch {
      // not listening yet
    }
    await sleep(5);
  }
}

async function start(dataDir: string): Promise<{ child: ChildProcess; port: number; readyMs: number }> {
  const port = await freePort();
  const grpc = await freePort();
  const env = { ...process.env, PORT: String(port), PORTICO_GRPC_PORT: String(grpc), PORTICO_DATA_DIR: dataDir, PORTICO_LOG_LEVEL: "warn", ...(values.workers ? { PORTICO_WORKERS: values.workers } : {}) };
  const [cmd, args] = values.cmd === "npm-start" ? ["npm", ["start", "--silent"]] : [process.execPath, [join(root, "bin", "portico.mjs"), "serve"]];
  const t0 = performance.now();
  const child = spawn(cmd, args as string[], { cwd: root, env, stdio: ["ignore", "ignore", "inherit"], detached: true });
  const readyMs = await waitReady(port, child, t0);
  return { child, port, readyMs };
}

async function stop(child: ChildProcess): Promise<void> {
  const exited = new Promise((r) => child.once("exit", r));
  process.kill(-child.pid!, "SIGTERM");
  await exited;
  await sleep(200);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const first: number[] = [];
const restart: number[] = [];
const serving: number[] = [];
const npmOwn: number[] = [];
let lastTree: Proc[] = [];
for (let i = 0; i < runs; i++) {
  const dataDir = mkdtempSync(join(tmpdir(), "portico-startup-"));
  try {
    const a = await start(dataDir);
    first.push(a.readyMs);
    await stop(a.child);
    const b = await start(dataDir);
    restart.push(b.readyMs);
    await sleep(settleMs);
    const procs = tree(b.child.pid!);
    lastTree = procs;
    const npm = procs.filter((p) => p.comm === "npm" || /npm-cli|\/npm /.test(p.cmdline) || p.comm === "sh");
    npmOwn.push(npm.reduce((s, p) => s + p.rssKb, 0) / 1024);
    serving.push(procs.filter((p) => !npm.includes(p)).reduce((s, p) => s + p.rssKb, 0) / 1024);
    await stop(b.child);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}
console.log(`command: ${values.cmd}, workers: ${values.workers ?? "default"}, runs: ${runs}, settle: ${settleMs / 1000} s, load average now ${loadavg()[0]!.toFixed(2)}`);
console.log("process tree of the last run:");
for (const p of lastTree) console.log(`  ${p.pid} ${(p.rssKb / 1024).toFixed(1)} MB  ${p.cmdline.slice(0, 110)}`);
console.log(`first start to /readyz (empty folder): median ${median(first).toFixed(0)} ms [${first.map((x) => x.toFixed(0)).join(", ")}]`);
console.log(`restart to /readyz: median ${median(restart).toFixed(0)} ms [${restart.map((x) => x.toFixed(0)).join(", ")}]`);
console.log(`idle RSS of the serving tree: median ${median(serving).toFixed(1)} MB [${serving.map((x) => x.toFixed(1)).join(", ")}]`);
if (values.cmd === "npm-start") console.log(`npm's own processes: median ${median(npmOwn).toFixed(1)} MB`);
