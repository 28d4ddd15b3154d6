/**
 * A small hand-rolled server-sent-events writer (stack notes §7): the reply is hijacked, headers
 * forbid caching, proxy buffering and compression, writes respect backpressure, and the writer never
 * throws — once the client is gone every write is a no-op that reports false.
 */
import { once } from "node:events";
import type { ServerResponse } from "node:http";

export interface SseHeadersOptions {
  /** Extra response headers (for example x-request-id). */
  headers?: Record<string, string>;
}

export class SseWriter {
  private closed = false;
  /** A write went out in this loop turn; later ones wait in `pending` for the check phase. */
  private burst = false;
  /** Text written after the turn's first write, sent as one `res.write` (one HTTP chunk, one syscall) by `flush`. */
  private pending = "";

  constructor(
    private readonly res: ServerResponse,
    private readonly signal: AbortSignal,
  ) {
    res.on("close", () => {
      this.closed = true;
    });
  }

  /** Sets the status line and headers; they leave with the first event (written right after). */
  open(opts: SseHeadersOptions = {}): void {
    const headers: Record<string, string> = {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-transform",
      "x-accel-buffering": "no",
      ...opts.headers,
    };
    if (this.res.req.httpVersionMajor < 2) headers.connection = "keep-alive";
    this.res.writeHead(200, headers);
  }

  get isOpen(): boolean {
    return !this.closed && !this.signal.aborted && !this.res.destroyed && !this.res.writableEnded;
  }

  /** Writes one `data:` event (the payload must not contain newlines; JSON.stringify never does). */
  data(payload: string): Promise<boolean> | boolean {
    return this.write(`data: ${payload}\n\n`);
  }

  /** Writes an SSE comment line, e.g. `: keepalive`. */
  comment(text: string): Promise<boolean> | boolean {
    return this.write(`: ${text}\n\n`);
  }

  /**
   * Writes raw text, waiting for `drain` when the socket buffer is full. The first write of a loop turn goes
   * straight out (no added latency); the writes after it in the same turn (the other events of one upstream
   * read) are joined and leave as one `res.write` in the check phase: one HTTP chunk and one syscall for the
   * burst, instead of a chunk (size line, text, CRLF: three buffers the socket's writev encodes) per event.
   */
  write(text: string): Promise<boolean> | boolean {
    if (!this.isOpen) return false;
    if (this.burst) {
      this.pending += text;
      // Accepted; the caller still waits while the socket drains (what is pending leaves meanwhile).
      return this.res.writableNeedDrain ? this.drained() : true;
    }
    this.burst = true;
    setImmediate(this.flush);
    let ok: boolean;
    // Corked around the write, so that it reaches the socket when `uncork` returns. Without it Node corks the socket
    // itself and uncorks it in a `process.nextTick`, which runs only once the promise jobs queued behind this write
    // are done: the rest of the upstream read (every later event of the burst, `[DONE]`, the response's end) and
    // the pipeline's work after it. The first chunk left with the last (bench/README.md, "Time to first chunk").
    const res = this.res;
    res.cork();
    try {
      ok = res.write(text);
    } catch {
      this.closed = true;
      return false;
    } finally {
      res.uncork();
    }
    return ok ? true : this.drained();
  }

  private drained(): Promise<boolean> {
    return once(this.res, "drain", { signal: this.signal }).then(
      () => this.isOpen,
      () => false,
    );
  }

  /** Sends the text the turn's later writes left (the end of a loop turn, or before the response ends). */
  private readonly flush = (): void => {
    this.burst = false;
    const text = this.pending;
    if (text === "") return;
    this.pending = "";
    if (!this.isOpen) return;
    try {
      this.res.write(text);
    } catch {
      this.closed = true;
    }
  };

  end(): void {
    if (this.res.writableEnded) return;
    this.flush();
    try {
      this.res.end();
    } catch {
      // the socket is gone; nothing to do
    }
  }
}
