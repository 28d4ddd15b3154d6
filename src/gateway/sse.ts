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
  private corked = false;
  private burst = false;

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

  /** Writes raw text, waiting for `drain` when the socket buffer is full. */
  write(text: string): Promise<boolean> | boolean {
    if (!this.isOpen) return false;
    let ok: boolean;
    try {
      // The first write of a loop turn goes straight out (no added latency); further writes before
      // the event loop's check phase are corked and leave together, so a burst costs one syscall.
      if (!this.burst) {
        this.burst = true;
        setImmediate(() => {
          this.burst = false;
          if (this.corked) {
            this.corked = false;
            if (!this.res.destroyed) this.res.uncork();
          }
        });
      } else if (!this.corked) {
        this.corked = true;
        this.res.cork();
      }
      ok = this.res.write(text);
    } catch {
      this.closed = true;
      return false;
    }
    if (ok) return true;
    return once(this.res, "drain", { signal: this.signal }).then(
      () => this.isOpen,
      () => false,
    );
  }

  end(): void {
    if (this.res.writableEnded) return;
    try {
      this.res.end();
    } catch {
      // the socket is gone; nothing to do
    }
  }
}
