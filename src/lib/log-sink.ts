/**
 * A log destination that never blocks the process and never grows without bound.
 *
 * pino's default destination (sonic-boom) writes synchronously and, at exit, flushes in a loop that
 * retries forever on EPIPE or a full pipe. This sink hands lines to the process's own stdout stream
 * (asynchronous for pipes and sockets on Linux) and:
 * - drops lines while more than `maxPendingBytes` are waiting for a slow reader, then reports how many
 *   were dropped once the reader catches up;
 * - drops everything, silently, after the stream fails (EPIPE: the reader went away);
 * - gathers the lines of one turn of the event loop and hands them to the stream in one write (at the
 *   next `setImmediate`, or at once when a batch reaches {@link MAX_BATCH_BYTES}): one write system call per
 *   turn instead of one per line (stdout to a file or a pipe is written synchronously, and a line a request
 *   cost a syscall each: bench/README.md, "Chat hot path, cuts of the hotpath session");
 * - hands a batch still waiting to the stream when the process exits (one write, no retry), so no exit
 *   waits for it and a line logged just before `process.exit()` is not lost.
 */
import type { Writable } from "node:stream";

export interface LogSink {
  write(line: string): void;
  /** Lines dropped so far (stalled or vanished reader). */
  readonly dropped: number;
  /** Bytes accepted but not yet written to the reader. */
  readonly pendingBytes: number;
  /** Resolves when pending output is written, the stream fails, or `timeoutMs` passes. */
  drain(timeoutMs: number): Promise<void>;
}

export const DEFAULT_MAX_PENDING_LOG_BYTES = 4 * 1024 * 1024;

/** A batch this large is written at once rather than at the end of the turn. */
export const MAX_BATCH_BYTES = 64 * 1024;

/** The sinks' pending batches, written when the process exits (one `exit` listener for every sink). */
const atExit = new Set<() => void>();
let exitHooked = false;
function flushAtExit(flush: () => void): void {
  atExit.add(flush);
  if (exitHooked) return;
  exitHooked = true;
  process.once("exit", () => {
    for (const f of atExit) f();
  });
}

export function createLogSink(stream: Writable = process.stdout, maxPendingBytes = DEFAULT_MAX_PENDING_LOG_BYTES): LogSink {
  let dropped = 0;
  let unreported = 0;
  let broken = false;
  stream.on("error", () => {
    broken = true;
  });
  stream.on("close", () => {
    broken = true;
  });
  stream.on("drain", () => {
    if (unreported === 0 || broken) return;
    const line = JSON.stringify({ level: 40, time: Date.now(), dropped: unreported, msg: "log reader stalled; lines were dropped" });
    unreported = 0;
    stream.write(line + "\n");
  });
  let batch = "";
  let scheduled: NodeJS.Immediate | undefined;
  const flush = () => {
    if (scheduled) clearImmediate(scheduled);
    scheduled = undefined;
    if (batch === "") return;
    const text = batch;
    batch = "";
    if (broken || stream.destroyed) return;
    stream.write(text);
  };
  flushAtExit(flush);
  stream.once("close", () => atExit.delete(flush));
  return {
    write(line: string) {
      if (broken || stream.destroyed || stream.writableLength + batch.length > maxPendingBytes) {
        dropped++;
        if (!broken) unreported++;
        return;
      }
      batch += line;
      if (batch.length >= MAX_BATCH_BYTES) flush();
      else if (!scheduled) scheduled = setImmediate(flush);
    },
    get dropped() {
      return dropped;
    },
    get pendingBytes() {
      return broken ? 0 : stream.writableLength + batch.length;
    },
    drain(timeoutMs: number) {
      flush();
      if (broken || stream.writableLength === 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          stream.off("drain", done);
          stream.off("error", done);
          stream.off("close", done);
          resolve();
        };
        const timer = setTimeout(done, timeoutMs);
        timer.unref();
        stream.once("drain", done);
        stream.once("error", done);
        stream.once("close", done);
      });
    },
  };
}
