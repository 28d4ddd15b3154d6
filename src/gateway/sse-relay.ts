/**
 * The one relay from a core server stream to a server-sent-events response, used by every streaming
 * route (chat completions, intern chat, the dialects to come). It owns what every stream shares:
 *
 * - **Opening.** An error before the response opens is an HTTP error in the envelope (the route's
 *   error handler answers it). The response opens (200 and headers) with the first message, or, when
 *   `openAfterMs` is set, once that long passed without one (a slow or silent provider): the caller then
 *   gets the headers and `: keepalive` comments instead of silence.
 * - **Heartbeat.** A `: keepalive` comment whenever nothing was written for `heartbeatMs`.
 * - **Backpressure.** Each write waits for the socket to drain before the next message is read.
 * - **In-band errors.** Once open, an error ends the stream with the route's error payloads (an error
 *   chunk, a final chunk), then `data: [DONE]`; a normal end writes the route's end payloads and `[DONE]`.
 * - **Client gone.** A client that leaves aborts the RPC (and with it the upstream work); nothing more is
 *   written and nothing is logged above debug.
 * - **Shutdown.** `drain(deadline)` lets open streams run to their end until the deadline, then ends each
 *   one in band (error chunk and `[DONE]`), so no stream is cut by a connection reset.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { FastifyReply, FastifyRequest } from "fastify";
import { SseWriter } from "./sse.js";
import { LightAbortController } from "../lib/light-abort.js";

/** A message that writes nothing but opens the stream (when not yet open) and counts as a keepalive. */
export const HEARTBEAT: unique symbol = Symbol("heartbeat");

/**
 * What one source message becomes: one `data:` payload (JSON text), several (a packed message: written as one
 * write, in order), a keepalive, or nothing.
 */
export type Rendered = string | readonly string[] | typeof HEARTBEAT | undefined;

const DONE = "data: [DONE]\n\n";

/** The error an open stream ends with when the server stops before the stream finished. */
export const SHUTTING_DOWN_MESSAGE = "The server is shutting down; retry the request.";

export interface RelaySource<M> {
  next(): Promise<IteratorResult<M>>;
  /**
   * `next()`, returning a message already at hand without a promise and throwing where `next()` would reject
   * (src/lib/pull.ts): the relay reads a burst of messages without a promise and a turn per message.
   */
  pull?(): IteratorResult<M> | Promise<IteratorResult<M>>;
  /** Stops reading (the RPC ends). */
  return(): Promise<void>;
}

export interface RelayRoute<M> {
  /** Renders one message of the source. */
  render(msg: M): Rendered;
  /**
   * Payloads that end a stream broken by `err` after the response opened (error chunk, final chunk);
   * `shutdown` is true when the server is stopping.
   */
  onError(err: ConnectError, shutdown: boolean): string[];
  /** Payloads written after the source ended normally, before `[DONE]`. */
  onEnd?(): string[];
  /** Open the response after this long without a first message (default: only with the first message). */
  openAfterMs?: number;
  /** Word for log lines (`chat`, `intern`). */
  name: string;
  /**
   * The rendered payloads are whole SSE frames (`event:` and `data:` lines, as the Anthropic Messages dialect
   * sends them), written as they are; the stream ends without `data: [DONE]`.
   */
  framed?: boolean;
  /**
   * Extra response headers, computed when the response opens: with the first message, or with undefined when
   * `openAfterMs` opened it first.
   */
  openHeaders?(first: M | undefined): Record<string, string> | undefined;
}

/** One stream being answered: its signal goes to the RPC; `run` relays the RPC's messages. */
export interface RelayCall {
  /** Aborts when the client leaves or the server stops this stream: pass it to the RPC. */
  readonly signal: AbortSignal;
  run<M>(source: RelaySource<M>, route: RelayRoute<M>): Promise<void>;
}

export interface SseRelay {
  /** Starts answering `reply` with a stream (call before making the RPC, whose signal is `call.signal`). */
  start(req: FastifyRequest, reply: FastifyReply): RelayCall;
  /** Streams being answered now. */
  readonly open: number;
  /**
   * Lets open streams end by themselves until `deadline` (epoch ms), then ends the others in band.
   * Resolves when every stream has ended. New streams started meanwhile are ended at once.
   */
  drain(deadline: number): Promise<void>;
}

export interface SseRelayOptions {
  /** Idle time after which a `: keepalive` comment is written. */
  heartbeatMs: number;
}

export function createSseRelay(opts: SseRelayOptions): SseRelay {
  const active = new Set<ActiveStream>();
  let draining = false;
  let idle: Array<() => void> = [];
  const settle = (s: ActiveStream) => {
    active.delete(s);
    if (active.size === 0) {
      const waiters = idle;
      idle = [];
      for (const w of waiters) w();
    }
  };

  return {
    get open() {
      return active.size;
    },
    start(req, reply) {
      const s = new ActiveStream(req, reply, opts.heartbeatMs, () => settle(s));
      active.add(s);
      if (draining) s.stop();
      return s;
    },
    async drain(deadline) {
      draining = true;
      if (active.size === 0) return;
      const allEnded = new Promise<void>((resolve) => idle.push(resolve));
      const wait = deadline - Date.now();
      if (wait > 0) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([allEnded, new Promise<void>((resolve) => (timer = setTimeout(resolve, wait)))]);
        clearTimeout(timer);
      }
      for (const s of active) s.stop();
      await allEnded;
    },
  };
}

class ActiveStream implements RelayCall {
  /** Aborts the RPC: the client left or the server stops this stream. */
  private readonly ac = new LightAbortController();
  /** Aborts only when the client left (the writer still writes the in-band end of a stopped stream). */
  private readonly client = new LightAbortController();
  private stopped = false;
  private clientGone = false;
  private sse: SseWriter | undefined;
  private lastWrite = 0;
  private heartbeat: NodeJS.Timeout | undefined;
  private onStop: (() => void) | undefined;
  private started = false;
  private framed = false;

  constructor(
    private readonly req: FastifyRequest,
    private readonly reply: FastifyReply,
    private readonly heartbeatMs: number,
    private readonly done: () => void,
  ) {
    reply.raw.once("close", this.onClose);
  }

  get signal(): AbortSignal {
    return this.ac.signal;
  }

  private readonly onClose = (): void => {
    if (this.reply.raw.writableFinished) return;
    this.clientGone = true;
    this.client.abort();
    this.ac.abort();
  };

  /** Ends the stream in band as soon as possible (server stopping). */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.onStop?.();
    this.ac.abort();
  }

  async run<M>(source: RelaySource<M>, route: RelayRoute<M>): Promise<void> {
    if (this.started) throw new Error("a relay call runs once");
    this.started = true;
    this.framed = route.framed === true;
    try {
      await this.relay(source, route);
    } finally {
      this.reply.raw.off("close", this.onClose);
      clearTimeout(this.heartbeat);
      this.sse?.end();
      this.done();
    }
  }

  private async relay<M>(source: RelaySource<M>, route: RelayRoute<M>): Promise<void> {
    let pending = source.next();
    let first: IteratorResult<M> | undefined;
    try {
      first = await this.beforeOpen(pending, route.openAfterMs);
    } catch (err) {
      if (this.clientGone) {
        // Nobody reads the answer: drop the reply without a word.
        this.req.log.debug({ stream: route.name }, "client left before the stream opened");
        this.reply.hijack();
        this.reply.raw.destroy();
        return;
      }
      if (!this.stopped) throw err; // an HTTP error in the envelope
    }
    const sse = this.openResponse(route.openHeaders?.(first === undefined || first.done ? undefined : first.value));
    try {
      if (this.stopped) {
        pending.catch(() => undefined); // aborted with the RPC; nobody reads it now
        throw stoppedError();
      }
      if (first === undefined) {
        // Opened while waiting: keep the caller company until the first message.
        await this.write(sse.comment("keepalive"));
      } else {
        if (first.done) return await this.finish(route.onEnd?.());
        await this.emit(route.render(first.value));
        pending = source.next();
      }
      // After the first message: a message at hand (`pull`) is relayed without awaiting a promise.
      let at: IteratorResult<M> | Promise<IteratorResult<M>> = pending;
      for (;;) {
        const next = at instanceof Promise ? await at : at;
        if (next.done) break;
        // A write the socket took at once is not awaited (a promise and a turn per chunk less).
        const waiting = this.emit(route.render(next.value));
        if (waiting) await waiting;
        if (!sse.isOpen) break;
        at = source.pull ? source.pull() : source.next();
      }
      if (this.stopped && !this.clientGone) throw stoppedError();
      await this.finish(route.onEnd?.());
    } catch (raw) {
      if (!sse.isOpen) {
        this.req.log.debug({ stream: route.name }, "stream ended after the client left");
        return;
      }
      const err = this.stopped ? stoppedError() : ConnectError.from(raw);
      if (this.stopped) this.req.log.info({ stream: route.name }, "stream ended in band: the server is stopping");
      await this.finish(route.onError(err, this.stopped));
    } finally {
      if (!sse.isOpen) await source.return().catch(() => undefined);
    }
  }

  /**
   * The first message, or undefined when `openAfterMs` passed first (or the server is stopping). A rejection
   * before the response opened is thrown.
   */
  private async beforeOpen<M>(pending: Promise<IteratorResult<M>>, openAfterMs: number | undefined): Promise<IteratorResult<M> | undefined> {
    if (this.stopped) return undefined;
    if (openAfterMs === undefined) return pending;
    let timer: NodeJS.Timeout | undefined;
    const early = new Promise<undefined>((resolve) => {
      timer = setTimeout(resolve, openAfterMs, undefined);
      this.onStop = () => resolve(undefined);
    });
    try {
      return await Promise.race([pending, early]);
    } finally {
      clearTimeout(timer);
      this.onStop = undefined;
    }
  }

  private openResponse(extra: Record<string, string> | undefined): SseWriter {
    this.reply.hijack();
    const sse = new SseWriter(this.reply.raw, this.client.signal);
    sse.open({ headers: { "x-request-id": String(this.req.id), ...extra } });
    this.sse = sse;
    this.lastWrite = Date.now();
    this.armHeartbeat(this.heartbeatMs);
    return sse;
  }

  private armHeartbeat(ms: number): void {
    this.heartbeat = setTimeout(() => {
      const sse = this.sse;
      if (!sse?.isOpen) return;
      const idleFor = Date.now() - this.lastWrite;
      if (idleFor >= this.heartbeatMs) {
        if (!this.reply.raw.writableNeedDrain) void this.write(sse.comment("keepalive"));
        this.armHeartbeat(this.heartbeatMs);
      } else this.armHeartbeat(this.heartbeatMs - idleFor);
    }, ms);
    this.heartbeat.unref();
  }

  /** Writes one rendered message; a promise only while the socket drains (backpressure). */
  private emit(out: Rendered): Promise<unknown> | undefined {
    if (out === undefined) return undefined;
    const sse = this.sse!;
    if (typeof out === "object") {
      let text = "";
      if (this.framed) for (let i = 0; i < out.length; i++) text += out[i];
      else for (let i = 0; i < out.length; i++) text += `data: ${out[i]}\n\n`;
      return this.write(sse.write(text));
    }
    return this.write(out === HEARTBEAT ? sse.comment("keepalive") : this.framed ? sse.write(out) : sse.data(out));
  }

  private write(r: Promise<boolean> | boolean): Promise<unknown> | undefined {
    this.lastWrite = Date.now();
    return r instanceof Promise ? r : undefined;
  }

  /** The last payloads, then `[DONE]`, while the client still listens. */
  private async finish(payloads: string[] | undefined): Promise<void> {
    const sse = this.sse!;
    for (const p of payloads ?? []) {
      if (!sse.isOpen) return;
      await this.write(this.framed ? sse.write(p) : sse.data(p));
    }
    if (sse.isOpen && !this.framed) await this.write(sse.write(DONE));
  }
}

function stoppedError(): ConnectError {
  return new ConnectError(SHUTTING_DOWN_MESSAGE, Code.Unavailable);
}

/** True when `err` comes from the client leaving (the RPC was cancelled on its behalf). */
export function isCancel(err: unknown): boolean {
  return err instanceof ConnectError && err.code === Code.Canceled;
}
