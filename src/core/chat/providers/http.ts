/**
 * HTTP plumbing shared by the provider adapters: one POST with JSON, classified failures, and an SSE
 * reader whose early exit aborts the upstream request, over undici's dispatcher with keep-alive pools. The credential only ever travels in request headers; `redact` strips it from anything
 * the provider echoes back before it reaches an error.
 */
import type { IncomingHttpHeaders } from "node:http";
import { StringDecoder } from "node:string_decoder";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import type { Agent, Dispatcher } from "undici";
import { LightAbortController } from "../../../lib/light-abort.js";
import { onFirstUse } from "../../../lib/on-first-use.js";
import { PULL, pulledAsPromise, type Pullable, type Pulled } from "../../../lib/pull.js";
import { UpstreamError, isRetryableStatus, type UpstreamCall } from "./types.js";

export interface PostOptions {
  url: string;
  headers: Record<string, string>;
  body: unknown;
  signal: AbortSignal;
  apiKey: string;
  /** Pulls a readable message out of the provider's parsed error body. */
  errorMessage: (body: unknown) => string | undefined;
  /** The upstream may stay silent (no response headers, no body bytes) this long; default {@link UPSTREAM_IDLE_TIMEOUT_MS}. */
  idleTimeoutMs?: number;
  /**
   * The response must begin (status line and headers) this long after the request was sent, or the call fails
   * with a retryable `UpstreamError` whose `timedOut` is true; unset: only the idle limit applies.
   */
  firstByteTimeoutMs?: number;
  /** The TCP connection must be established this long after the request began; default {@link UPSTREAM_CONNECT_TIMEOUT_MS}. */
  connectTimeoutMs?: number;
}

/** A provider that does not accept the connection within this is abandoned (a retryable timeout). */
export const UPSTREAM_CONNECT_TIMEOUT_MS = 10_000;

/**
 * The time limits of one call (docs/operations.md): the operator's per-provider limits (`call.limits`) where set,
 * else the attempt's (the execute stage's first-byte limit, the default idle and connect limits). A provider's
 * first-byte limit applies to streamed calls only (a non-streamed answer begins when it is whole).
 */
export function upstreamTimeouts(call: Pick<UpstreamCall, "firstByteTimeoutMs" | "limits">, streamed: boolean): Pick<PostOptions, "firstByteTimeoutMs" | "idleTimeoutMs" | "connectTimeoutMs"> {
  const l = call.limits;
  if (l === undefined) return { firstByteTimeoutMs: call.firstByteTimeoutMs };
  return {
    firstByteTimeoutMs: streamed && l.firstByteMs !== undefined ? l.firstByteMs : call.firstByteTimeoutMs,
    ...(l.idleMs !== undefined ? { idleTimeoutMs: l.idleMs } : {}),
    ...(l.connectMs !== undefined ? { connectTimeoutMs: l.connectMs } : {}),
  };
}

/** Like undici's headers and body timeouts (which `fetch` applied before): 300 s without a byte fails the call. */
export const UPSTREAM_IDLE_TIMEOUT_MS = 300_000;

/** Longest wait a provider's `Retry-After` may impose on one credential (a bogus value cannot lock it out for days). */
export const MAX_RETRY_AFTER_MS = 3_600_000;

/**
 * The wait a 429/503 asks for: `retry-after-ms` (OpenAI) or `Retry-After` (seconds or an HTTP date), capped at
 * {@link MAX_RETRY_AFTER_MS}; undefined when absent or unreadable.
 */
export function retryAfterMs(headers: IncomingHttpHeaders, now = Date.now()): number | undefined {
  const ms = headers["retry-after-ms"];
  if (typeof ms === "string" && /^\d+(\.\d+)?$/.test(ms.trim())) return Math.min(Math.ceil(Number(ms)), MAX_RETRY_AFTER_MS);
  const value = headers["retry-after"];
  if (typeof value !== "string" || value.trim() === "") return undefined;
  const text = value.trim();
  let wait: number;
  if (/^\d+(\.\d+)?$/.test(text)) wait = Math.ceil(Number(text) * 1000);
  else {
    const at = Date.parse(text);
    if (Number.isNaN(at)) return undefined;
    wait = at - now;
  }
  return Math.min(Math.max(wait, 0), MAX_RETRY_AFTER_MS);
}

/**
 * A fast test for "the key may be in this text" and its replacement, for every streamed event: one
 * `String.prototype.includes` per form the key can take in JSON text (as is, and JSON-escaped when it holds a
 * character JSON escapes), so an event without the key costs one substring search.
 */
export function keyScrubber(apiKey: string): ((text: string) => string) | undefined {
  if (!apiKey || apiKey.length < 4) return undefined;
  const escaped = JSON.stringify(apiKey).slice(1, -1);
  const slashes = escaped.replaceAll("/", "\\/");
  const forms = [...new Set([apiKey, escaped, slashes])];
  if (forms.length === 1) return (text) => (text.includes(apiKey) ? text.split(apiKey).join("[redacted]") : text);
  return (text) => {
    for (const form of forms) if (text.includes(form)) text = text.split(form).join("[redacted]");
    return text;
  };
}

/** Replaces every occurrence of the key in a string or JSON value. */
export function redact<T>(value: T, apiKey: string): T {
  if (!apiKey || apiKey.length < 4) return value;
  if (typeof value === "string") return value.split(apiKey).join("[redacted]") as T;
  if (value === undefined || value === null || typeof value !== "object") return value;
  const text = JSON.stringify(value);
  return text.includes(apiKey) ? (JSON.parse(text.split(apiKey).join("[redacted]")) as T) : value;
}

/**
 * An upstream response: its status and a body read once, as text or as chunks. Backed by undici's dispatcher
 * API with a hand-written handler rather than fetch or node:http: the WHATWG streams of fetch and the
 * `ClientRequest`/`IncomingMessage` objects of node:http cost more CPU per request and per chunk than the
 * relay itself (bench/upstream-client.ts, bench/README.md).
 */
export interface UpstreamResponse {
  status: number;
  ok: boolean;
  text(): Promise<string>;
  /** The response headers (lower-case names). */
  headers: IncomingHttpHeaders;
  /** The body as it arrives; pauses the connection while the consumer is not reading (backpressure). */
  chunks(): AsyncIterable<Buffer>;
  /**
   * The next piece of the body already received, without waiting (undefined when none is queued): the SSE reader
   * takes every piece one socket read delivered at once, and parses them together.
   */
  takeQueued?(): Buffer | undefined;
  /** Drops the body and the connection it arrives on. */
  cancel(): void;
  /** Reads what is left of a body no longer needed, so the connection can serve the next request. */
  release(): void;
}

/**
 * Idle pooled connections are closed after {@link KEEPALIVE_IDLE_MS} (or one second before the time a server's
 * `Keep-Alive: timeout=N` announces, when shorter), so a connection is rarely reused just as the server closes it.
 */
export const KEEPALIVE_IDLE_MS = 4_000;

/**
 * One keep-alive dispatcher per connect limit (the limit is a property of undici's connector, not of a request;
 * operators set at most a few distinct values). Each keeps a pool per origin, unbounded like node:http's default
 * agent; a free connection closes after {@link KEEPALIVE_IDLE_MS}.
 */
const dispatchers = new Map<number, Agent>();

/**
 * undici (≈ 5 MB of heap) is loaded with the first upstream call, not at start-up (as for web_fetch,
 * src/lib/on-first-use.ts): a process that never calls a provider does not hold it. Later calls use the module
 * kept here, without an await.
 */
const loadUndici = onFirstUse([import.meta.resolve("undici")], () => import("undici"));
let undici: typeof import("undici") | undefined;

function dispatcherFor(connectMs: number): Agent {
  let d = dispatchers.get(connectMs);
  if (d === undefined) {
    d = new undici!.Agent({
      connect: { timeout: connectMs },
      keepAliveTimeout: KEEPALIVE_IDLE_MS,
      keepAliveMaxTimeout: KEEPALIVE_IDLE_MS,
      keepAliveTimeoutThreshold: 1_000,
      // Defaults only: every call sets its own (its idle limit).
      headersTimeout: UPSTREAM_IDLE_TIMEOUT_MS,
      bodyTimeout: UPSTREAM_IDLE_TIMEOUT_MS,
    });
    dispatchers.set(connectMs, d);
  }
  return d;
}

/** What a dispatch takes of a URL, for the URLs most recently called (a provider's endpoint is the same every time). */
interface Target {
  origin: string;
  path: string;
  protocol: string;
  /** `Basic …` from credentials in the URL (as node:http sent them), unless the call has its own Authorization. */
  auth: string | undefined;
}
const TARGET_CACHE_SIZE = 64;
const targets = new Map<string, Target>();

/** The dispatch target of `url`, parsed once per URL (`new URL()` costs more than the rest of building the request). */
function targetOf(url: string): Target {
  let t = targets.get(url);
  if (t) return t;
  const parsed = new URL(url);
  const auth = parsed.username || parsed.password ? `Basic ${Buffer.from(`${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`).toString("base64")}` : undefined;
  t = { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}`, protocol: parsed.protocol, auth };
  if (targets.size >= TARGET_CACHE_SIZE) targets.delete(targets.keys().next().value!);
  targets.set(url, t);
  return t;
}

/** Queued body bytes past which the connection is paused until the consumer reads (resumed below half of it). */
const BODY_HIGH_WATER = 64 * 1024;

const DONE: IteratorResult<Buffer> = { done: true, value: undefined };

/**
 * One upstream POST: undici's handler for it, then the response it resolves with (one object for both). The
 * caller's signal aborts it until the body has been read whole; a first-byte limit is a timer of its own (undici's
 * timers tick every half second); the idle limit is undici's headers and body timeouts.
 *
 * Sent at most once: undici writes a request on a kept-alive connection only when it knows of no failure on it,
 * and a request whose connection failed before it was written goes out on a new one; once written (a reset
 * before the response), it is never re-sent (the provider may have received and billed it), and the error says
 * so. Errors while connecting (refused, DNS, TLS) are not re-sent either; the attempt loop moves on to the next
 * credential.
 */
class Exchange implements Dispatcher.DispatchHandler, UpstreamResponse, AsyncIterator<Buffer> {
  status = 0;
  ok = false;
  /** The response's header lines as undici read them (name, value, …), parsed on first read of `headers`. */
  private rawHeaders: Buffer[] | undefined;
  private parsedHeaders: IncomingHttpHeaders | undefined;
  /**
   * undici's request handle, through its handler interface of raw callbacks (onConnect, onHeaders, onData, onComplete,
   * onError): given a handler of the controller interface (onRequestStart, onResponseStart, …), undici wraps it in
   * an adapter that makes a controller per request and parses every response's headers into an object before the
   * handler sees them (`parseHeaders`, ≈ 0.8 % of serve's CPU at c=32; bench/README.md, "serve's CPU per
   * non-streamed request"). Headers are read only for a refused request's `retry-after`, so they are parsed when read.
   */
  private abortRequest: ((reason: Error) => void) | undefined;
  private aborted = false;
  private resumeRequest: (() => void) | undefined;
  /** The connection is paused (onData / onHeaders returned false) until {@link resume}. */
  private paused = false;
  /** Settled: resolved with the response or rejected before it. */
  private settled = false;
  /** Why the exchange was abandoned before undici began it (applied once it does). */
  private abandoned: Error | undefined;
  private started = false;
  private firstByte: NodeJS.Timeout | undefined;
  private readonly onAbort = () => this.abort(this.signal.reason as Error);
  // The body.
  private queue: Buffer[] = [];
  private queued = 0;
  private ended = false;
  private error: Error | undefined;
  private waiting: { resolve: (r: IteratorResult<Buffer>) => void; reject: (err: Error) => void } | undefined;
  private collect: { resolve: (text: string) => void; reject: (err: Error) => void } | undefined;
  private discard = false;
  private releaseTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly signal: AbortSignal,
    private readonly idleMs: number,
    private readonly connectMs: number,
    firstByteMs: number | undefined,
    private readonly resolve: (res: UpstreamResponse) => void,
    private readonly reject: (err: unknown) => void,
  ) {
    // Not undici's `signal` option: removed only at the end of the body, as here, but through a wrapper per call.
    signal.addEventListener("abort", this.onAbort, { once: true });
    if (firstByteMs !== undefined) {
      this.firstByte = setTimeout(() => this.abort(new UpstreamError(0, `upstream sent no response within ${seconds(firstByteMs)}`, true, undefined, { timedOut: true })), firstByteMs);
    }
  }

  get headers(): IncomingHttpHeaders {
    if (this.parsedHeaders === undefined) this.parsedHeaders = this.rawHeaders ? (undici!.util.parseHeaders(this.rawHeaders) as IncomingHttpHeaders) : {};
    return this.parsedHeaders;
  }

  /** What undici's controller did: the request aborted once, with `reason`. */
  private abortOnce(reason: Error): void {
    if (this.aborted) return;
    this.aborted = true;
    this.abortRequest!(reason);
  }

  private resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.resumeRequest?.();
  }

  private detach(): void {
    clearTimeout(this.firstByte);
    this.signal.removeEventListener("abort", this.onAbort);
  }

  /** Ends the exchange with `reason` (the caller's abort, a time limit): before the response, or in its body. */
  private abort(reason: Error): void {
    if (this.ended || this.error) return;
    if (this.abortRequest) this.abortOnce(reason);
    else {
      // Still waiting for a connection: fail now; undici drops the request when it would begin it.
      this.abandoned = reason;
      this.onError(reason);
    }
  }

  onConnect(abort: (reason: Error) => void): void {
    this.abortRequest = abort;
    this.started = true;
    if (this.abandoned) this.abortOnce(this.abandoned);
  }

  /** Returns false to pause the connection (as the data callback below). */
  onHeaders(status: number, rawHeaders: Buffer[], resume: () => void): boolean {
    this.resumeRequest = resume;
    if (status < 200 || this.settled) return !this.paused;
    clearTimeout(this.firstByte);
    this.status = status;
    this.ok = status >= 200 && status < 300;
    this.rawHeaders = rawHeaders;
    this.settled = true;
    this.resolve(this);
    return !this.paused;
  }

  onData(chunk: Buffer): boolean {
    if (this.discard) return !this.paused;
    const waiting = this.waiting;
    if (waiting) {
      this.waiting = undefined;
      waiting.resolve({ done: false, value: chunk });
      return !this.paused;
    }
    this.queue.push(chunk);
    this.queued += chunk.length;
    if (this.collect === undefined && this.queued >= BODY_HIGH_WATER) this.paused = true;
    return !this.paused;
  }

  onComplete(): void {
    this.ended = true;
    this.detach();
    clearTimeout(this.releaseTimer);
    if (this.collect) this.finishText();
    else if (this.waiting && this.queue.length === 0) {
      const waiting = this.waiting;
      this.waiting = undefined;
      waiting.resolve(DONE);
    }
  }

  onError(err: Error): void {
    if (this.ended || this.error) return;
    this.detach();
    clearTimeout(this.releaseTimer);
    const failure = this.failure(err);
    if (!this.settled) {
      this.settled = true;
      this.error = failure;
      this.reject(failure);
      return;
    }
    this.error = failure;
    if (this.collect) {
      const collect = this.collect;
      this.collect = undefined;
      collect.reject(failure);
    } else if (this.waiting) {
      const waiting = this.waiting;
      this.waiting = undefined;
      waiting.reject(failure);
    }
  }

  /** undici's errors as this client reports them (the time limits as `UpstreamError`s marked timed out). */
  private failure(err: Error): Error {
    if (err instanceof UpstreamError || err === this.signal.reason) return err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT") {
      return new UpstreamError(0, `upstream sent nothing for ${Math.round(this.idleMs / 1000)} s`, true, undefined, { timedOut: true });
    }
    if (code === "UND_ERR_CONNECT_TIMEOUT") {
      return new UpstreamError(0, `upstream did not accept the connection within ${seconds(this.connectMs)}`, true, undefined, { timedOut: true });
    }
    if (this.started && !this.settled && !this.signal.aborted) {
      return new UpstreamError(0, `upstream connection broke after the request was sent (${code ?? err.message}); not re-sent`, true, undefined, { sent: true });
    }
    return err;
  }

  // The body, read once: as text, or as chunks.

  text(): Promise<string> {
    if (this.error) return Promise.reject(this.error);
    return new Promise<string>((resolve, reject) => {
      this.collect = { resolve, reject };
      if (this.ended) this.finishText();
      else this.resume();
    });
  }

  private finishText(): void {
    const collect = this.collect!;
    this.collect = undefined;
    const q = this.queue;
    this.queue = [];
    this.queued = 0;
    collect.resolve(q.length === 1 ? q[0]!.toString("utf8") : Buffer.concat(q).toString("utf8"));
  }

  chunks(): AsyncIterable<Buffer> {
    return this;
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    return this;
  }

  takeQueued(): Buffer | undefined {
    if (this.queue.length === 0) return undefined;
    const value = this.queue.shift()!;
    this.queued -= value.length;
    if (this.paused && this.queued < BODY_HIGH_WATER / 2) this.resume();
    return value;
  }

  next(): Promise<IteratorResult<Buffer>> {
    if (this.queue.length > 0) return Promise.resolve({ done: false, value: this.takeQueued()! });
    if (this.error) return Promise.reject(this.error);
    if (this.ended) return Promise.resolve(DONE);
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
    });
  }

  return(): Promise<IteratorResult<Buffer>> {
    this.cancel();
    return Promise.resolve(DONE);
  }

  cancel(): void {
    this.queue = [];
    this.queued = 0;
    if (this.ended || this.error) return;
    this.abort(Object.assign(new Error("upstream response cancelled"), { code: "ERR_STREAM_PREMATURE_CLOSE" }));
  }

  release(): void {
    this.queue = [];
    this.queued = 0;
    if (this.ended || this.error) return;
    // Whatever follows the end marker (the chunked terminator) is drained; an upstream that keeps sending loses the connection.
    this.discard = true;
    this.releaseTimer = setTimeout(() => this.cancel(), 1000);
    this.releaseTimer.unref();
    this.resume();
  }
}

function send(
  target: Target,
  headers: Record<string, string>,
  payload: string,
  signal: AbortSignal,
  idleMs: number,
  firstByteMs: number | undefined,
  connectMs: number,
): Promise<UpstreamResponse> {
  if (target.protocol !== "http:" && target.protocol !== "https:") return Promise.reject(new UpstreamError(0, `unsupported upstream URL scheme ${target.protocol}`, false));
  if (signal.aborted) return Promise.reject(signal.reason);
  if (target.auth !== undefined && headers.authorization === undefined) headers.authorization = target.auth;
  if (undici === undefined) {
    return loadUndici().then((module) => {
      undici = module;
      return send(target, headers, payload, signal, idleMs, firstByteMs, connectMs);
    });
  }
  return new Promise((resolve, reject) => {
    const exchange = new Exchange(signal, idleMs, connectMs, firstByteMs, resolve, reject);
    dispatcherFor(connectMs).dispatch({ origin: target.origin, path: target.path, method: "POST", headers, body: payload, headersTimeout: idleMs, bodyTimeout: idleMs }, exchange);
  });
}

function seconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

/** POSTs JSON; resolves with a 2xx response, throws `UpstreamError` for anything else. */
export async function postJson(opts: PostOptions): Promise<UpstreamResponse> {
  let response: UpstreamResponse;
  try {
    const headers = { "content-type": "application/json", ...opts.headers };
    response = await send(targetOf(opts.url), headers, JSON.stringify(opts.body), opts.signal, opts.idleTimeoutMs ?? UPSTREAM_IDLE_TIMEOUT_MS, opts.firstByteTimeoutMs, opts.connectTimeoutMs ?? UPSTREAM_CONNECT_TIMEOUT_MS);
  } catch (err) {
    if (opts.signal.aborted) throw opts.signal.reason ?? err;
    if (err instanceof UpstreamError) throw err;
    const e = err as NodeJS.ErrnoException;
    throw new UpstreamError(0, `upstream connection failed: ${e.code ?? e.message}`, true);
  }
  if (response.ok) return response;
  const text = await response.text().catch(() => "");
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  const safe = redact(parsed, opts.apiKey);
  const message = opts.errorMessage(safe) ?? (text && parsed === undefined ? text.slice(0, 200) : `HTTP ${response.status}`);
  const wait = response.status === 429 || response.status === 503 ? retryAfterMs(response.headers) : undefined;
  throw new UpstreamError(response.status, redact(`upstream returned ${response.status}: ${message}`, opts.apiKey), isRetryableStatus(response.status), safe, {
    retryAfterMs: wait,
  });
}

/** Parses a JSON response body; a body that is not JSON is a malformed response (status 0). */
export async function readJson(response: UpstreamResponse): Promise<unknown> {
  return (await readJsonAndText(response)).value;
}

async function readJsonAndText(response: UpstreamResponse): Promise<{ value: unknown; text: string }> {
  let text: string;
  try {
    text = await response.text();
  } catch (err) {
    throw new UpstreamError(0, `upstream response broke: ${(err as Error).message}`, true);
  }
  try {
    return { value: JSON.parse(text), text };
  } catch {
    throw new UpstreamError(0, "upstream returned a body that is not JSON", true);
  }
}

/** A key of these characters, one of them no part of a JSON number, can only occur inside a string token of a JSON text. */
const PLAIN_KEY = /^(?=.*[A-DF-Za-df-z_])[A-Za-z0-9_-]+$/;

/**
 * `redact(await readJson(response), apiKey)`, without the JSON.stringify of the whole answer `redact` makes to look
 * for the key when the text read cannot hold it. For a key of {@link PLAIN_KEY}'s characters and a text without
 * `\u` escapes, the runs of those characters in the text and in JSON.stringify of its value are the same (string
 * contents keep the same escapes, `\/` becoming `/`; numbers, literals, white space and punctuation hold no such run
 * the key fits), so a key absent from the text is absent from what `redact` searches, and it would return the value
 * as parsed. Otherwise `redact` runs as before.
 */
export async function readJsonRedacted(response: UpstreamResponse, apiKey: string): Promise<unknown> {
  const { value, text } = await readJsonAndText(response);
  if (typeof apiKey === "string" && apiKey.length >= 4 && PLAIN_KEY.test(apiKey) && !text.includes(apiKey) && !text.includes("\\u")) return value;
  return redact(value, apiKey);
}

/**
 * Yields the server-sent events of `response` in order. Returning early (or `controller` aborting)
 * drops the body, which closes the upstream connection; returning after the event `isLast` recognises
 * (the provider's end-of-response marker) reads the rest instead, so the connection is kept alive. With
 * `apiKey`, every occurrence of the key in an event's data is replaced by `[redacted]` before it is yielded.
 */
export function sseEvents(
  response: UpstreamResponse,
  controller: AbortController,
  isLast?: (event: EventSourceMessage) => boolean,
  apiKey?: string,
): AsyncIterableIterator<EventSourceMessage> {
  return sseMap(response, controller, (event) => event, isLast, apiKey);
}

/** What a {@link sseMap} `map` returns for the provider's end-of-response marker: the stream ends there. */
export const SSE_END: unique symbol = Symbol("end of the upstream stream");

/**
 * {@link sseEvents} with each event turned into what `map` returns (undefined: nothing yielded; {@link SSE_END}: the
 * stream ends) in the same iterator: an adapter's per-event work without an async-generator layer of its own
 * (one `await` and one result object per event less; bench/README.md). `map` runs as each event is read (not
 * when its socket read arrives), so an event it rejects fails the stream after the events before it were read.
 */
export function sseMap<T>(
  response: UpstreamResponse,
  controller: AbortController,
  map: (event: EventSourceMessage) => T | undefined | typeof SSE_END,
  isLast?: (event: EventSourceMessage) => boolean,
  apiKey?: string,
  ended?: () => void,
): AsyncIterableIterator<T> {
  return new SseReader(response, controller, map, isLast, apiKey, ended);
}

/**
 * The iterator of a stream that must be opened first (an adapter's request, then its reader): `open` runs with the
 * first `next()`, whose result is the opened iterator's first; every later `next()` is the opened iterator's own.
 * In place of an async generator around `yield*` (a generator resumption and its promises per event; bench/README.md,
 * "CPU per relayed chunk: one iterator from the adapter to the handler"). Ends as that generator did: an `open`
 * that fails fails the first read and ends the stream; `return()` before the first read opens nothing; `return()`
 * while opening closes what opened.
 */
export function openedStream<T>(open: () => Promise<AsyncIterator<T>>): AsyncIterableIterator<T> {
  return new OpenedStream(open);
}

class OpenedStream<T> implements AsyncIterableIterator<T> {
  private it: AsyncIterator<T> | undefined;
  private opening: Promise<AsyncIterator<T>> | undefined;
  private closed = false;

  constructor(private readonly open: () => Promise<AsyncIterator<T>>) {}

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }

  /** The opened iterator's own `[PULL]()` once open (../../../lib/pull.ts); `next()` before. */
  [PULL](): Pulled<T> {
    const it = this.it;
    if (it === undefined) return this.next();
    const p = (it as Partial<Pullable<T>>)[PULL];
    return p !== undefined ? p.call(it) : it.next();
  }

  next(): Promise<IteratorResult<T>> {
    if (this.it !== undefined) return this.it.next();
    if (this.closed) return Promise.resolve(ITERATION_DONE);
    // The first read opens; a read while opening (not done by the pipeline) comes after the first.
    this.opening ??= this.open().then(
      (it) => (this.it = it),
      (err: unknown) => {
        this.closed = true;
        throw err;
      },
    );
    return this.opening.then((it) => (this.closed ? ITERATION_DONE : it.next()));
  }

  return(): Promise<IteratorResult<T>> {
    this.closed = true;
    const it = this.it;
    if (it !== undefined) return it.return ? it.return() : Promise.resolve(ITERATION_DONE);
    if (this.opening === undefined) return Promise.resolve(ITERATION_DONE);
    return this.opening.then(
      (opened) => (opened.return ? opened.return() : ITERATION_DONE),
      () => ITERATION_DONE,
    );
  }

  throw(err?: unknown): Promise<IteratorResult<T>> {
    return this.return().then(() => Promise.reject(err));
  }
}

const ITERATION_DONE: IteratorResult<never> = { done: true, value: undefined };

/**
 * The items of the batches the readers `open` gives, one reader after another (`open` gives undefined when there is
 * no other; its first call is made by the first read), one item at a time: an adapter whose events become zero or
 * more chunks each (an `sseMap` whose `map` returns an array, or undefined for none) and whose answer may span
 * several upstream responses (Anthropic's paused turns), without an async generator around them: a chunk already
 * parsed is at hand (`[PULL]()`, ../../../lib/pull.ts). A reader's failure (or `open`'s) ends the stream with it;
 * `return()` closes the current reader (or the one being opened, once open).
 */
export function batchedStream<T>(open: () => Promise<AsyncIterator<T[]> | undefined>): AsyncIterableIterator<T> {
  return new BatchedStream(open);
}

const NO_ITEMS: never[] = [];

class BatchedStream<T> implements AsyncIterableIterator<T>, Pullable<T> {
  private it: AsyncIterator<T[]> | undefined;
  private batch: T[] = NO_ITEMS;
  private at = 0;
  private closed = false;
  private opening: Promise<unknown> | undefined;

  constructor(private readonly open: () => Promise<AsyncIterator<T[]> | undefined>) {}

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }

  /** `[PULL]()` as a promise. */
  next(): Promise<IteratorResult<T>> {
    return pulledAsPromise(this);
  }

  [PULL](): Pulled<T> {
    if (this.at < this.batch.length) return { done: false, value: this.batch[this.at++]! };
    if (this.closed) return ITERATION_DONE;
    const it = this.it;
    if (it === undefined) return this.opened();
    let r: Pulled<T[]>;
    try {
      const p = (it as Partial<Pullable<T[]>>)[PULL];
      r = p !== undefined ? p.call(it) : it.next();
    } catch (err) {
      return this.failed(err);
    }
    return r instanceof Promise ? r.then(this.onBatch, this.failed) : this.onBatch(r);
  }

  async return(): Promise<IteratorResult<T>> {
    this.closed = true;
    this.batch = NO_ITEMS;
    const it = this.it;
    this.it = undefined;
    if (it !== undefined) await it.return?.();
    else if (this.opening !== undefined) await this.opening.catch(() => undefined);
    return ITERATION_DONE;
  }

  throw(err?: unknown): Promise<IteratorResult<T>> {
    return this.return().then(() => Promise.reject(err));
  }

  private readonly failed = (err: unknown): never => {
    this.closed = true;
    this.it = undefined;
    throw err;
  };

  private readonly onBatch = (r: IteratorResult<T[]>): Pulled<T> => {
    if (this.closed) return ITERATION_DONE;
    if (!r.done) {
      this.batch = r.value;
      this.at = 1;
      return { done: false, value: r.value[0]! };
    }
    this.it = undefined;
    return this.opened();
  };

  /** Opens the next reader and reads its first item (the end when there is none). */
  private opened(): Promise<IteratorResult<T>> {
    const opening = this.open().then((it) => {
      if (it === undefined) {
        this.closed = true;
        return ITERATION_DONE;
      }
      if (this.closed) {
        // Returned while opening: close what opened.
        Promise.resolve(it.return?.()).catch(() => undefined);
        return ITERATION_DONE;
      }
      this.it = it;
      return pulledAsPromise(this);
    }, this.failed);
    this.opening = opening;
    return opening;
  }
}

/**
 * The SSE reader, hand-written rather than an async generator: an event already parsed is handed out with one
 * resolved promise (no generator resumption, no await of the body), and every piece of the body one socket read
 * delivered is decoded and parsed in one go (one `StringDecoder.write` and one parser feed instead of one per
 * piece and an await between them; bench/README.md, "CPU per relayed chunk, the writes and the reader").
 *
 * Ending: the body's end with every event read finishes it (the connection is the dispatcher's again); reading
 * the end-of-response event (`isLast`) and stopping there (`map` says {@link SSE_END}, or the consumer returns)
 * reads the rest of the body so the connection is kept alive; any other early stop (`return()`, an error, an
 * event `map` rejects) aborts `controller` and drops the body, which closes the upstream connection.
 */
class SseReader<T> implements AsyncIterableIterator<T> {
  /** Events parsed and not yet read. */
  private readonly events: EventSourceMessage[] = [];
  private readonly parser: ReturnType<typeof createParser>;
  // node:string_decoder rather than TextDecoder: 2.5x (one event a read) to 6x (a burst of 20) cheaper per read
  // (bench/README.md); it keeps a leading byte-order mark, which TextDecoder and the SSE format drop.
  private readonly decoder = new StringDecoder("utf8");
  private readonly chunks: AsyncIterator<Buffer>;
  private first = true;
  /** The body ended; what it held is in `events`. */
  private bodyEnded = false;
  /** The end-of-response event was read. */
  private complete = false;
  /** Ended: no more events (`finished`: the body was read whole, nothing to drop). */
  private closed = false;
  private finished = false;

  constructor(
    private readonly response: UpstreamResponse,
    private readonly controller: AbortController,
    private readonly map: (event: EventSourceMessage) => T | undefined | typeof SSE_END,
    private readonly isLast: ((event: EventSourceMessage) => boolean) | undefined,
    apiKey: string | undefined,
    /** Runs when the body ended with every event read (not at the end marker): may throw, failing the last read. */
    private readonly ended: (() => void) | undefined,
  ) {
    const events = this.events;
    // The credential never reaches a consumer: each event's data is scrubbed like a non-streamed answer.
    const scrub = apiKey ? keyScrubber(apiKey) : undefined;
    this.parser = createParser({
      onEvent: scrub
        ? (event) => {
            const data = scrub(event.data);
            events.push(data === event.data ? event : { ...event, data });
          }
        : (event) => events.push(event),
    });
    this.chunks = response.chunks()[Symbol.asyncIterator]();
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }

  /** `[PULL]()` as a promise. */
  next(): Promise<IteratorResult<T>> {
    return pulledAsPromise(this);
  }

  /** `next()` with an event already parsed handed out as it is (no promise); throws where `next()` rejects (../../../lib/pull.ts). */
  [PULL](): Pulled<T> {
    if (this.closed) return ITERATION_DONE;
    if (this.events.length > 0 || this.bodyEnded) {
      let out: IteratorResult<T> | undefined;
      try {
        out = this.take();
      } catch (err) {
        this.close();
        throw err;
      }
      if (out !== undefined) return out;
    }
    return this.read();
  }

  return(): Promise<IteratorResult<T>> {
    this.close();
    return Promise.resolve(ITERATION_DONE);
  }

  throw(err?: unknown): Promise<IteratorResult<T>> {
    this.close();
    return Promise.reject(err);
  }

  /** Waits for the body's next piece (and takes the others already there) until an event can be read. */
  private async read(): Promise<IteratorResult<T>> {
    try {
      for (;;) {
        let chunk: IteratorResult<Buffer>;
        try {
          chunk = await this.chunks.next();
        } catch (err) {
          if (this.closed) return ITERATION_DONE;
          if (this.controller.signal.aborted) throw this.controller.signal.reason ?? err;
          throw new UpstreamError(0, `upstream stream broke: ${(err as Error).message}`, true);
        }
        if (this.closed) return ITERATION_DONE;
        if (chunk.done) {
          this.bodyEnded = true;
          const rest = this.decoder.end();
          this.parser.feed(this.first && rest.charCodeAt(0) === 0xfeff ? rest.slice(1) : rest);
          this.parser.feed("\n\n");
        } else this.feed(chunk.value);
        const out = this.take();
        if (out !== undefined) return out;
      }
    } catch (err) {
      this.close();
      throw err;
    }
  }

  /** Decodes and parses `piece` with every other piece already received. */
  private feed(piece: Buffer): void {
    const more = this.response.takeQueued?.();
    let bytes = piece;
    if (more !== undefined) {
      const pieces = [piece, more];
      for (let b = this.response.takeQueued!(); b !== undefined; b = this.response.takeQueued!()) pieces.push(b);
      bytes = Buffer.concat(pieces);
    }
    let text = this.decoder.write(bytes);
    if (this.first && text !== "") {
      this.first = false;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    this.parser.feed(text);
  }

  /** The next event `map` keeps; the end when the stream ends here; undefined when more of the body is needed. */
  private take(): IteratorResult<T> | undefined {
    const events = this.events;
    while (events.length > 0) {
      const event = events.shift()!;
      if (this.isLast?.(event)) this.complete = true;
      const out = this.map(event);
      if (out === SSE_END) {
        this.close();
        return ITERATION_DONE;
      }
      if (out !== undefined) return { done: false, value: out };
    }
    if (!this.bodyEnded) return undefined;
    this.finished = true;
    this.close();
    this.ended?.();
    return ITERATION_DONE;
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    this.events.length = 0;
    if (this.finished) return;
    if (this.complete && !this.controller.signal.aborted) this.response.release();
    else {
      this.controller.abort();
      this.response.cancel();
    }
  }
}

/** The error for a stream whose body ended cleanly before the provider's end-of-response marker. */
export function truncatedStream(): UpstreamError {
  return new UpstreamError(0, "upstream stream ended before the response was complete", true);
}

/** An AbortController that also aborts when the caller's signal does. */
export function linkedController(signal: AbortSignal): AbortController {
  const controller = new LightAbortController();
  if (signal.aborted) controller.abort(signal.reason);
  else signal.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
  return controller;
}

/** Parses one SSE data payload as JSON; malformed data is a broken stream. */
export function parseEventData(data: string): Record<string, unknown> {
  try {
    const value = JSON.parse(data) as unknown;
    if (value && typeof value === "object") return value as Record<string, unknown>;
  } catch {
    /* fall through */
  }
  throw new UpstreamError(0, "upstream sent a stream event that is not a JSON object", true);
}

/** Joins a base URL and a path without doubling or dropping the slash. */
export function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, "")}/${path.replace(/^\/+/, "")}`;
}

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** Text of an OpenAI message `content` (string or parts), for places that only take text. */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) => (part && typeof part === "object" && (part as { type?: unknown }).type === "text" ? String((part as { text?: unknown }).text ?? "") : ""))
    .join("");
}

/** Splits a `data:<mime>;base64,<data>` URL; undefined for any other URL. */
export function parseDataUrl(url: string): { mediaType: string; data: string } | undefined {
  const match = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  return match ? { mediaType: match[1]!, data: match[2]! } : undefined;
}

/** Parses tool-call arguments (a JSON string) into an object; invalid JSON becomes `{}`-wrapped text. */
export function parseArguments(args: unknown): Record<string, unknown> {
  if (args && typeof args === "object") return args as Record<string, unknown>;
  if (typeof args !== "string" || args.trim() === "") return {};
  try {
    const value = JSON.parse(args) as unknown;
    return value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : { value };
  } catch {
    return { arguments: args };
  }
}
