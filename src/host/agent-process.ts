/**
 * Agent processes: spawn one ACP agent in its own process group with piped stdio, drain stderr
 * into a small tail, and tear the whole group down. An in-process launcher gives tests the same
 * byte-level ACP framing without a process.
 */
import { spawn } from "node:child_process";
import { trackProcessGroup, untrackProcessGroup } from "../lib/process-groups.js";
import { Readable, Writable } from "node:stream";
import { bwrapAgentArgs } from "./sandbox.js";

/** How an agent process ended. */
export interface AgentExit {
  code: number | null;
  signal: string | null;
  /** Spawn error message (e.g. ENOENT), when the process never started. */
  error?: string;
}

/** What the host needs to start one agent. */
export interface AgentLaunchSpec {
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  runAs?: { uid: number; gid: number } | undefined;
  /** Run the whole agent under bwrap (profile sandbox "process"). */
  bwrap?: { path: string; writable: string[] } | undefined;
}

/** A started agent: raw ACP byte streams plus lifecycle. */
export interface AgentChannel {
  /** Bytes the host writes to the agent (its stdin). */
  output: WritableStream<Uint8Array>;
  /** Bytes the agent writes to the host (its stdout). */
  input: ReadableStream<Uint8Array>;
  /** Process id, which is also the process group id; undefined in-process. */
  pid?: number | undefined;
  /** Resolves once the agent is gone. */
  exited: Promise<AgentExit>;
  /** The last few KiB of the agent's stderr (diagnostics; may hold anything, log at debug only). */
  stderrTail(): string;
  /** Ends stdin, waits up to graceMs, then SIGTERM and SIGKILL to the whole group. */
  dispose(graceMs: number): Promise<void>;
}

/** Starts an agent; the default spawns a process, tests pass an in-process one. */
export type AgentLauncher = (spec: AgentLaunchSpec) => AgentChannel | Promise<AgentChannel>;

const STDERR_TAIL_BYTES = 4096;

function signalGroup(pid: number | undefined, sig: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, sig);
  } catch {
    // group already gone
  }
}

function groupExists(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}

/** Spawns the agent detached (own process group) with piped stdio. */
export const spawnAgentProcess: AgentLauncher = (spec) => {
  let file = spec.command;
  let args = spec.args;
  if (spec.bwrap) {
    file = spec.bwrap.path;
    args = bwrapAgentArgs({ cwd: spec.cwd, writable: spec.bwrap.writable, argv: [spec.command, ...spec.args] });
  }
  const child = spawn(file, args, {
    cwd: spec.cwd,
    env: spec.env,
    detached: true,
    stdio: ["pipe", "pipe", "pipe"],
    ...(spec.runAs ? { uid: spec.runAs.uid, gid: spec.runAs.gid } : {}),
  });
  trackProcessGroup(child.pid);
  // The group may outlive its leader (the agent's own children); it stays tracked until it is empty.
  child.once("exit", () => {
    if (!groupExists(child.pid)) untrackProcessGroup(child.pid);
  });
  let tail = Buffer.alloc(0);
  child.stderr?.on("data", (d: Buffer) => {
    tail = Buffer.concat([tail, d]);
    if (tail.length > STDERR_TAIL_BYTES) tail = tail.subarray(tail.length - STDERR_TAIL_BYTES);
  });
  child.stdin?.on("error", () => {});
  child.stdout?.on("error", () => {});
  const pid = child.pid;
  let gone = false;
  const exited = new Promise<AgentExit>((resolve) => {
    child.once("error", (err) => {
      gone = true;
      resolve({ code: null, signal: null, error: (err as NodeJS.ErrnoException).code ?? err.message });
    });
    child.once("exit", (code, sig) => {
      gone = true;
      // Children the agent left behind (shells, CLIs, MCP servers) share its group.
      signalGroup(pid, "SIGKILL");
      resolve({ code, signal: sig });
    });
  });
  const output = Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>;
  const input = Readable.toWeb(child.stdout!) as unknown as ReadableStream<Uint8Array>;
  return {
    output,
    input,
    pid,
    exited,
    stderrTail: () => tail.toString("utf8"),
    async dispose(graceMs) {
      if (!gone) {
        try {
          child.stdin?.end();
        } catch {
          // ignore
        }
        await Promise.race([exited, delay(Math.min(graceMs, 2000))]);
      }
      if (!gone) {
        signalGroup(pid, "SIGTERM");
        await Promise.race([exited, delay(1000)]);
      }
      signalGroup(pid, "SIGKILL");
      if (!gone) await Promise.race([exited, delay(1000)]);
      // Wait (briefly) until every member of the group has been reaped.
      for (let i = 0; i < 100 && groupExists(pid); i++) {
        signalGroup(pid, "SIGKILL");
        await delay(20);
      }
    },
  };
};


/**
 * Runs an agent in this process over an in-memory byte pipe (same NDJSON framing and validation as
 * stdio). `start` receives the agent-side byte streams and an `exit` callback the agent calls to
 * simulate its process ending.
 */
export function inProcessLauncher(
  start: (io: { output: WritableStream<Uint8Array>; input: ReadableStream<Uint8Array>; exit: (code: number) => void }) => void,
): AgentLauncher {
  return () => {
    const toAgent = new TransformStream<Uint8Array, Uint8Array>();
    const toHost = new TransformStream<Uint8Array, Uint8Array>();
    let resolveExit!: (e: AgentExit) => void;
    const exited = new Promise<AgentExit>((r) => (resolveExit = r));
    let gone = false;
    const hostReader = toHost.readable.getReader();
    const hostWriter = toAgent.writable.getWriter();
    let inputController!: ReadableStreamDefaultController<Uint8Array>;
    const kill = (code: number | null, signal: string | null): void => {
      if (gone) return;
      gone = true;
      try {
        inputController.close();
      } catch {
        // already closed
      }
      hostReader.cancel().catch(() => {});
      hostWriter.abort().catch(() => {});
      resolveExit({ code, signal });
    };
    const input = new ReadableStream<Uint8Array>({
      start(c) {
        inputController = c;
      },
      async pull(c) {
        try {
          const r = await hostReader.read();
          if (r.done) {
            kill(0, null);
            return;
          }
          c.enqueue(r.value);
        } catch {
          kill(null, "SIGKILL");
        }
      },
    });
    const output = new WritableStream<Uint8Array>({
      async write(chunk) {
        if (gone) throw new Error("agent gone");
        await hostWriter.write(chunk);
      },
      close() {
        // stdin EOF: an SDK agent ends when its input ends.
        kill(0, null);
      },
      abort() {
        kill(null, "SIGKILL");
      },
    });
    start({ output: toHost.writable, input: toAgent.readable, exit: (code) => setImmediate(() => kill(code, null)) });
    return {
      output,
      input,
      pid: undefined,
      exited,
      stderrTail: () => "",
      async dispose() {
        kill(null, "SIGTERM");
      },
    };
  };
}
