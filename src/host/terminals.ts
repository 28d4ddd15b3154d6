/**
 * Client terminals (terminal/create, output, wait_for_exit, kill, release) for one agent session.
 * Each command runs in its own process group, optionally under bubblewrap; output keeps the tail
 * within a byte limit, cut at a character boundary.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { trackProcessGroup, untrackProcessGroup } from "../lib/process-groups.js";
import { randomUUID } from "node:crypto";
import { acpRuntime } from "./acp-runtime.js";
import { bwrapCommandArgs } from "./sandbox.js";
import { utf8Tail } from "./mapping.js";

export interface TerminalExit {
  exitCode: number | null;
  signal: string | null;
}

/** How one command is spawned, decided by the session (approval mode, escalation, sandbox strategy). */
export interface TerminalLaunch {
  cwd: string;
  env: Record<string, string>;
  /** bwrap path when the command runs sandboxed, else undefined. */
  bwrap?: string;
  /** Folders writable inside the sandbox. */
  writable: string[];
  /** uid/gid to run as (host started as root). */
  runAs?: { uid: number; gid: number } | undefined;
}

interface Terminal {
  id: string;
  child: ChildProcess;
  chunks: Buffer[];
  bytes: number;
  limit: number;
  truncated: boolean;
  exit?: TerminalExit;
  exited: Promise<TerminalExit>;
  sandboxed: boolean;
}

export interface TerminalManager {
  create(params: { command: string; args?: string[] | undefined; env?: Array<{ name: string; value: string }> | undefined; cwd?: string | null | undefined; outputByteLimit?: number | null | undefined }, launch: TerminalLaunch): { terminalId: string; sandboxed: boolean };
  output(id: string): { output: string; truncated: boolean; exitStatus?: TerminalExit };
  waitForExit(id: string, signal?: AbortSignal): Promise<TerminalExit>;
  kill(id: string): void;
  release(id: string): void;
  /** Kills and forgets every terminal. */
  disposeAll(): void;
  /** Number of unreleased terminals. */
  readonly open: number;
}

function killGroup(child: ChildProcess, sig: NodeJS.Signals = "SIGKILL"): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, sig);
  } catch {
    try {
      child.kill(sig);
    } catch {
      // already gone
    }
  }
}

export function createTerminalManager(opts: { maxOpen: number; maxOutputBytes: number }): TerminalManager {
  const terminals = new Map<string, Terminal>();

  function get(id: string): Terminal {
    const t = terminals.get(id);
    if (!t) throw acpRuntime().RequestError.invalidParams({ terminalId: id }, `unknown terminal ${id}`);
    return t;
  }

  function append(t: Terminal, data: Buffer): void {
    t.chunks.push(data);
    t.bytes += data.length;
    if (t.bytes > t.limit * 2 || t.chunks.length > 256) compact(t);
  }

  function compact(t: Terminal): void {
    const all = Buffer.concat(t.chunks);
    const tail = utf8Tail(all, t.limit);
    if (tail.length < all.length) t.truncated = true;
    t.chunks = [Buffer.from(tail)];
    t.bytes = tail.length;
  }

  return {
    get open() {
      return terminals.size;
    },
    create(params, launch) {
      if (terminals.size >= opts.maxOpen) {
        throw acpRuntime().RequestError.internalError({ reason: "too_many_terminals" }, `at most ${opts.maxOpen} open terminals per session`);
      }
      const hasArgs = Array.isArray(params.args) && params.args.length > 0;
      const argv = hasArgs ? [params.command, ...(params.args ?? [])] : ["/bin/sh", "-c", params.command];
      const cwd = params.cwd && params.cwd.startsWith("/") ? params.cwd : launch.cwd;
      const env: Record<string, string> = { ...launch.env };
      for (const e of params.env ?? []) env[e.name] = e.value;
      let file: string;
      let args: string[];
      if (launch.bwrap) {
        file = launch.bwrap;
        args = bwrapCommandArgs({ cwd, writable: launch.writable, argv });
      } else {
        file = argv[0] as string;
        args = argv.slice(1);
      }
      const child = spawn(file, args, {
        cwd,
        env,
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
        ...(launch.runAs ? { uid: launch.runAs.uid, gid: launch.runAs.gid } : {}),
      });
      trackProcessGroup(child.pid);
      const limit = Math.max(1, Math.min(opts.maxOutputBytes, params.outputByteLimit ?? opts.maxOutputBytes));
      const id = `term-${randomUUID()}`;
      const t: Terminal = { id, child, chunks: [], bytes: 0, limit, truncated: false, sandboxed: Boolean(launch.bwrap), exited: Promise.resolve({ exitCode: null, signal: null }) };
      t.exited = new Promise<TerminalExit>((resolveExit) => {
        let done = false;
        const finish = (exit: TerminalExit): void => {
          if (done) return;
          done = true;
          t.exit = exit;
          // The command may have left children in its group; they go with it.
          killGroup(child);
          untrackProcessGroup(child.pid);
          resolveExit(exit);
        };
        child.on("error", (err) => {
          append(t, Buffer.from(`${String((err as Error).message)}\n`));
          finish({ exitCode: 127, signal: null });
        });
        child.on("close", (code, sig) => finish({ exitCode: code, signal: sig }));
      });
      child.stdout?.on("data", (d: Buffer) => append(t, d));
      child.stderr?.on("data", (d: Buffer) => append(t, d));
      terminals.set(id, t);
      return { terminalId: id, sandboxed: t.sandboxed };
    },
    output(id) {
      const t = get(id);
      compact(t);
      const out: { output: string; truncated: boolean; exitStatus?: TerminalExit } = {
        output: Buffer.concat(t.chunks).toString("utf8"),
        truncated: t.truncated,
      };
      if (t.exit) out.exitStatus = t.exit;
      return out;
    },
    async waitForExit(id, signal) {
      const t = get(id);
      if (!signal) return t.exited;
      return await new Promise<TerminalExit>((resolveWait, reject) => {
        const onAbort = (): void => reject(acpRuntime().RequestError.requestCancelled());
        signal.addEventListener("abort", onAbort, { once: true });
        t.exited.then(
          (e) => {
            signal.removeEventListener("abort", onAbort);
            resolveWait(e);
          },
          reject,
        );
      });
    },
    kill(id) {
      const t = get(id);
      if (!t.exit) killGroup(t.child);
    },
    release(id) {
      const t = get(id);
      if (!t.exit) killGroup(t.child);
      terminals.delete(id);
    },
    disposeAll() {
      for (const t of terminals.values()) if (!t.exit) killGroup(t.child);
      terminals.clear();
    },
  };
}
