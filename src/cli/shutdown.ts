/**
 * How a long-running `portico` process stops, whatever state its stdout and stderr are in.
 *
 * - The first SIGTERM/SIGINT starts a graceful stop (`close()`), bounded by `graceMs`.
 * - A second signal, or the deadline, exits at once: a line naming what was still pending goes to
 *   stderr (a non-blocking write that may be dropped), tracked agent process groups are SIGKILLed,
 *   and the process exits with status 1.
 * - A detached watchdog process started at the first signal SIGKILLs this process (and the agent
 *   groups known then) `WATCHDOG_EXTRA_MS` after the deadline, should the exit itself ever hang.
 *
 * So every process is gone at most `graceMs + WATCHDOG_EXTRA_MS` after the first signal.
 */
import { spawn } from "node:child_process";
import type { Logger } from "../log.js";
import type { LogSink } from "../lib/log-sink.js";
import { killTrackedProcessGroups, liveProcessGroups, trackedProcessGroups } from "../lib/process-groups.js";

export const WATCHDOG_EXTRA_MS = 2_000;
/** Longest wait for buffered log lines after a graceful stop. */
const LOG_DRAIN_MS = 500;

export interface ShutdownOptions {
  logger: Logger;
  graceMs: number;
  sink?: LogSink;
  /** Called on the first signal; resolves when the process may exit. */
  close: () => Promise<void>;
  /** Called just before a forced exit (second signal or deadline), e.g. to pass the urgency on to child processes. */
  onForceExit?: () => void;
}

/** Installs the SIGTERM/SIGINT handlers; returns a function that starts the stop programmatically. */
export function installShutdown(opts: ShutdownOptions): (reason: string) => void {
  // A reader that went away must not turn a write into an uncaught exception.
  process.stderr.on("error", () => undefined);
  let stopping = false;
  let startedAt = 0;

  const forceExit = (reason: string): void => {
    const pending = {
      level: 50,
      time: Date.now(),
      msg: "exiting before the graceful stop finished",
      reason,
      elapsedMs: Date.now() - startedAt,
      pending: summarizeActiveResources(),
      agentProcessGroups: liveProcessGroups(),
      logBytesPending: opts.sink?.pendingBytes ?? 0,
      logLinesDropped: opts.sink?.dropped ?? 0,
    };
    try {
      if (!process.stderr.destroyed && process.stderr.writableLength < 65_536) process.stderr.write(JSON.stringify(pending) + "\n");
    } catch {
      // stderr is gone; nothing more to say
    }
    try {
      opts.onForceExit?.();
    } catch {
      // exiting regardless
    }
    killTrackedProcessGroups();
    process.exit(1);
  };

  const stop = (reason: string): void => {
    if (stopping) {
      forceExit(`second ${reason}`);
      return;
    }
    stopping = true;
    startedAt = Date.now();
    armWatchdog(opts.graceMs + WATCHDOG_EXTRA_MS);
    opts.logger.info({ signal: reason, graceMs: opts.graceMs }, "shutting down");
    const deadline = setTimeout(() => forceExit(`deadline of ${opts.graceMs} ms passed`), opts.graceMs);
    deadline.unref();
    const finish = async (code: number): Promise<void> => {
      killTrackedProcessGroups();
      const left = opts.graceMs - (Date.now() - startedAt);
      if (opts.sink && left > 0) await opts.sink.drain(Math.min(LOG_DRAIN_MS, left));
      clearTimeout(deadline);
      process.exit(code);
    };
    opts
      .close()
      .then(() => finish(0))
      .catch((err: unknown) => {
        opts.logger.error({ err }, "shutdown failed");
        return finish(1);
      });
  };

  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  return stop;
}

/** A detached process that SIGKILLs this one (and its agent groups) if it is still alive at `afterMs`. */
function armWatchdog(afterMs: number): void {
  const targets = [process.pid, ...trackedProcessGroups().map((pgid) => -pgid)];
  const script =
    "const [t,...ids]=process.argv.slice(1).map(Number);" +
    "const alive=()=>{try{process.kill(ids[0],0);return true}catch{return false}};" +
    "const poll=setInterval(()=>{if(!alive())process.exit(0)},100);" +
    "setTimeout(()=>{clearInterval(poll);for(const id of ids){try{process.kill(id,'SIGKILL')}catch{}}process.exit(0)},t);";
  try {
    const child = spawn(process.execPath, ["-e", script, String(afterMs), ...targets.map(String)], {
      detached: true,
      stdio: "ignore",
      env: {},
    });
    child.on("error", () => undefined);
    child.unref();
  } catch {
    // no watchdog: the in-process deadline still applies
  }
}

function summarizeActiveResources(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) counts[r] = (counts[r] ?? 0) + 1;
  return counts;
}
