/**
 * Process helpers shared by the benchmarks that run servers in processes of their own (chat-hot-path,
 * response-healing, chat-resilience): spawn-and-wait-for-a-line, stop, CPU and RSS from /proc, free ports,
 * and `portico serve` from compiled dist/ with its bootstrap keys.
 */
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { readFileSync, readdirSync, openSync, closeSync } from "node:fs";
import net from "node:net";
import { join, resolve } from "node:path";

/** The repository root (cwd of spawned processes by default). */
export const repoRoot = resolve(import.meta.dirname, "../..");
const CLOCK_TICKS = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

/** utime + stime of whole processes (all threads), ms. */
export function processCpuMs(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // gone
    }
  }
  return (ticks * 1000) / CLOCK_TICKS;
}

/** VmRSS of a process, MB. */
export function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** The pid and its descendants (scan of /proc). */
export function processTree(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // gone
    }
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) for (const [child, p] of parent) if (p === out[i]) out.push(child);
  return out;
}

export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}

/** Spawns `node args…` with its output in a file; resolves once `ready(output)` returns a value. */
export async function spawnUntil<T>(args: string[], env: NodeJS.ProcessEnv, logFile: string, ready: (out: string) => T | undefined, timeoutMs = 60_000, cwd = repoRoot): Promise<{ child: ChildProcess; value: T }> {
  const fd = openSync(logFile, "w");
  const child = spawn(process.execPath, args, { cwd, env: { ...process.env, ...env }, stdio: ["ignore", fd, fd] });
  closeSync(fd);
  const started = Date.now();
  let exited: number | null | undefined;
  child.once("exit", (code) => (exited = code));
  for (;;) {
    const out = readFileSync(logFile, "utf8");
    const value = ready(out);
    if (value !== undefined) return { child, value };
    if (exited !== undefined) throw new Error(`${args.join(" ")} exited ${exited}\n${out.slice(-3000)}`);
    if (Date.now() - started > timeoutMs) throw new Error(`${args.join(" ")} not ready\n${out.slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  await gone;
}

/** The readiness parser of `portico serve` output: the API URL once serving, and the bootstrap keys printed on first start. */
export function serveReady(workers: number): (out: string) => { api: string; mk?: string; ak?: string } | undefined {
  return (out) => {
    const api = /"url":"(http:\/\/127\.0\.0\.1:\d+\/api\/v1)","msg":"gateway listening/.exec(out)?.[1];
    const ready = workers > 1 ? out.includes("serving with worker processes") : /"msg":"serving"/.test(out);
    if (!api || !ready) return undefined;
    const mk = /management key:\s+(pk-v1-[0-9a-f]+)/.exec(out)?.[1];
    const ak = /api key:\s+(pk-v1-[0-9a-f]+)/.exec(out)?.[1];
    return { api, mk, ak };
  };
}

/**
 * `portico serve` (compiled dist/, `npm run -s build` first) on a fresh data folder `dataDir`, PORT / gRPC port
 * chosen by the OS; resolves once serving, with its bootstrap keys and the pids whose CPU counts.
 */
export async function startServe(opts: { dataDir: string; logFile: string; env?: NodeJS.ProcessEnv; workers?: number; nodeArgs?: string[]; checkout?: string }): Promise<{ child: ChildProcess; api: string; management: string; apiKey: string; pids: number[] }> {
  const workers = opts.workers ?? 1;
  const s = await spawnUntil(
    [...(opts.nodeArgs ?? []), "bin/portico.mjs", "serve"],
    { PORTICO_EMBEDDED_HOST: "false", ...opts.env, PORTICO_DATA_DIR: opts.dataDir, PORT: "0", PORTICO_GRPC_PORT: "0", PORTICO_WORKERS: String(workers) },
    opts.logFile,
    serveReady(workers),
    60_000,
    opts.checkout ?? repoRoot,
  );
  if (!s.value.mk || !s.value.ak) {
    await stop(s.child);
    throw new Error(`serve printed no keys (data folder ${opts.dataDir} not fresh?)`);
  }
  return { child: s.child, api: s.value.api, management: s.value.mk, apiKey: s.value.ak, pids: processTree(s.child.pid!) };
}

/** Stores a BYOK credential through the API (POST /byok with the management key). */
export async function createByok(api: string, managementKey: string, body: Record<string, unknown>): Promise<void> {
  const r = await fetch(`${api}/byok`, { method: "POST", headers: { authorization: `Bearer ${managementKey}`, "content-type": "application/json" }, body: JSON.stringify(body) });
  if (r.status !== 200) throw new Error(`BYOK create ${String(body.provider)}: ${r.status} ${await r.text()}`);
}

export const logPath = (dir: string, name: string) => join(dir, `${name.replace(/[^A-Za-z0-9_-]+/g, "-")}.log`);
