/**
 * The split gateway's gRPC client for the hop to the core, on `node:http2` directly: a Connect `Transport` (unary
 * and server streaming) with one HTTP/2 session per core URL, kept open and reused. It replaces the @grpc/grpc-js
 * channel (now test/helpers/grpc-js-transport.ts, the reference its tests compare it with) whose per-call layers (resolving, retrying with retries off,
 * load-balancing and subchannel call objects, metadata validation and cloning, the compression filter) were ≈ 13 %
 * of the hop's CPU (bench/README.md, "The split hop on node:http2").
 *
 * Same wire and same behaviour as the grpc-js transport (and connect-node's gRPC transport) for the gateway's calls:
 * - request headers become metadata (`-bin` values normalised base64; other values printable ASCII, else
 *   InvalidArgument naming the header, 400); `timeoutMs` becomes `grpc-timeout` and a local deadline
 *   (DeadlineExceeded, the stream reset);
 * - the caller's signal cancels the call (RST_STREAM CANCEL, the core sees the reset), and the call rejects with
 *   `ConnectError.from(signal.reason, Code.Canceled)`;
 * - the status comes from the trailers, or from the headers of a trailers-only answer; `grpc-message` is
 *   percent-decoded (decodeURI, as grpc-js); a non-OK status becomes a ConnectError with the code, the message, the
 *   details of `grpc-status-details-bin` (connect's `findTrailerError`) and the trailers then the response headers
 *   as metadata (the core's `x-portico-upstream-ms` arrives on errors);
 * - a stream without a gRPC status is mapped as grpc-js maps it (HTTP status, RST_STREAM code);
 * - a core that cannot be reached (refused, unknown host, dropped connection) is `Code.Unavailable` with the
 *   socket's error (ECONNREFUSED …) as the cause, which the failover of src/gateway/core-transport.ts reads;
 * - a stream's messages come out in order and all before its final status; the call reads ahead at most
 *   READ_AHEAD messages and pauses the HTTP/2 stream while they wait (flow control holds the core); a reader that
 *   stops (`return()`) cancels the call (the queue: src/gateway/read-ahead.ts, shared with the grpc-js client).
 * The session: dialled on the first call (TLS for https URLs, Node's CAs), PING every `pingIntervalMs` while calls
 * are open (closed when the answer takes 15 s), closed after `idleConnectionTimeoutMs` without calls, dialled again
 * by the next call after a close, a GOAWAY or an error; after a failed dial, calls within the backoff (250 ms,
 * doubling to 1 s) fail at once with the same Unavailable. A call refused by the core before it started
 * (REFUSED_STREAM, GOAWAY) is sent once more on a new session, as grpc-js's transparent retry does.
 * Client and bidi streaming are not used by the gateway and answer Unimplemented.
 */
import { AsyncResource } from "node:async_hooks";
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders, type OutgoingHttpHeaders } from "node:http2";
import type { DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type StreamResponse, type Transport, type UnaryResponse } from "@connectrpc/connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { codecOf } from "../lib/proto-codec.js";
import { FrameReader, FrameTooLarge } from "../lib/grpc-frames.js";
import { LEGAL_KEY, PRINTABLE_ASCII } from "../lib/grpc-metadata.js";
import { ReadAhead } from "./read-ahead.js";

const KEEPALIVE_TIMEOUT_MS = 15_000;
/** The gRPC status OK (Connect's Code has no member for it). */
export const OK = 0;
const BACKOFF_INITIAL_MS = 250;
const BACKOFF_MAX_MS = 1_000;

const {
  NGHTTP2_CANCEL,
  NGHTTP2_NO_ERROR,
  NGHTTP2_REFUSED_STREAM,
  NGHTTP2_ENHANCE_YOUR_CALM,
  NGHTTP2_INADEQUATE_SECURITY,
  NGHTTP2_INTERNAL_ERROR,
  NGHTTP2_FLAG_END_STREAM,
} = http2.constants;

export interface H2GrpcTransportOptions {
  /** `http://host:port` (cleartext HTTP/2) or `https://host:port` (TLS, Node's CAs). */
  baseUrl: string;
  /** HTTP/2 PING every this many ms while calls are open (connect-node's pingIntervalMs). */
  pingIntervalMs?: number;
  /** Close the connection after this many ms without calls. */
  idleConnectionTimeoutMs?: number;
  /** Largest response message accepted (ResourceExhausted above it); none by default, as the grpc-js channel's -1. */
  readMaxBytes?: number;
  /**
   * Unary calls on a channel of many calls per stream (src/gateway/hop-channel.ts `createHopChannel`) rather than a
   * stream each; given the connection, the limit, the URL's scheme and the call on its own stream (what the channel
   * falls back to when the core does not serve it).
   */
  unaryChannel?: (conn: Connection, maxBytes: number, headersFor: HeadersFor, perCall: PerCallUnary) => UnaryChannel;
}

/** A unary call on its own stream. */
export type PerCallUnary = (
  method: DescMethod,
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
  header: ConstructorParameters<typeof Headers>[0] | undefined,
  input: unknown,
) => Promise<UnaryResponse>;

/** A call's HTTP/2 request headers: pseudo-headers, gRPC's own, the deadline and the caller's metadata. */
export type HeadersFor = (method: DescMethod, timeoutMs: number | undefined, header: ConstructorParameters<typeof Headers>[0] | undefined) => OutgoingHttpHeaders;

/** What carries unary calls in place of a stream each, while `unsupported` is false. */
export interface UnaryChannel {
  readonly unsupported: boolean;
  unary(...args: Parameters<PerCallUnary>): Promise<UnaryResponse>;
}


/** The caller's headers as HTTP/2 request headers (gRPC metadata), after `base` (pseudo-headers, content-type …). */
export function requestHeaders(base: OutgoingHttpHeaders, header: ConstructorParameters<typeof Headers>[0] | undefined): OutgoingHttpHeaders {
  if (!header) return base;
  if (header instanceof Headers) header.forEach((v, k) => addHeader(base, v, k));
  else if (Array.isArray(header)) for (const [k, v] of header) addHeader(base, v!, k!);
  else for (const k of Object.keys(header)) addHeader(base, (header as Record<string, string>)[k]!, k);
  return base;
}

/** One header of the caller's into `base` (a module function: a closure per call cost more). */
function addHeader(base: OutgoingHttpHeaders, value: string, key: string): void {
  const k = key.toLowerCase();
  // The messages grpc-js's Metadata gave (a header name Headers accepts but gRPC does not).
  if (!LEGAL_KEY.test(k)) throw new Error(`Metadata key "${k}" contains illegal characters`);
  let v = value;
  if (k.endsWith("-bin")) v = Buffer.from(value, "base64").toString("base64");
  // gRPC metadata is printable ASCII: a header forwarded with other bytes is refused, naming it (400).
  else if (!PRINTABLE_ASCII.test(value)) throw new ConnectError(`the ${k} header has characters outside printable ASCII`, Code.InvalidArgument);
  if (k in base && !RESERVED.has(k)) {
    const prev = base[k]!;
    base[k] = Array.isArray(prev) ? [...prev, v] : [String(prev), v];
  } else if (!RESERVED.has(k)) base[k] = v;
}

/** Request headers the transport sets itself (grpc-js's own win over metadata of the same name). */
const RESERVED = new Set(["content-type", "te", "user-agent", "grpc-timeout", "grpc-accept-encoding", "grpc-encoding"]);

/** `grpc-timeout`: at most 8 digits (the spec's TimeoutValue), in ms while they fit. */
function grpcTimeout(ms: number): string {
  return ms < 1e8 ? `${Math.ceil(ms)}m` : `${Math.min(Math.ceil(ms / 1000), 99_999_999)}S`;
}

/** HTTP/2 headers as fetch Headers, as grpc-js's metadata presented them: no pseudo-headers, `-bin` values normalised base64. */
function headersOf(h: IncomingHttpHeaders | undefined, into = new Headers(), skip?: ReadonlySet<string>): Headers {
  if (!h) return into;
  for (const key of Object.keys(h)) {
    if (key.charCodeAt(0) === 58 /* : */ || skip?.has(key)) continue;
    const value = h[key];
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) {
      if (key.endsWith("-bin")) for (const part of v.split(",")) into.append(key, Buffer.from(part, "base64").toString("base64"));
      else into.append(key, v);
    }
  }
  return into;
}
/** What grpc-js took out of the trailers (the status) and the response headers (compression negotiation). */
const STATUS_KEYS: ReadonlySet<string> = new Set(["grpc-status", "grpc-message"]);
const HEADER_SKIP: ReadonlySet<string> = new Set(["grpc-encoding", "grpc-accept-encoding"]);

/** A call's response, its header and trailer as fetch Headers built when first read (the gateway reads neither on success). */
export class CallResponse {
  #header: Headers | undefined;
  #trailer: Headers | undefined;
  readonly #h: IncomingHttpHeaders | undefined;
  readonly #t: IncomingHttpHeaders | undefined;
  constructor(
    readonly stream: boolean,
    readonly method: DescMethod,
    readonly message: unknown,
    header: IncomingHttpHeaders | undefined,
    trailer: IncomingHttpHeaders | Headers | undefined,
  ) {
    this.#h = header;
    if (trailer instanceof Headers) this.#trailer = trailer;
    else this.#t = trailer;
  }
  get service(): DescService {
    return this.method.parent;
  }
  get header(): Headers {
    return (this.#header ??= headersOf(this.#h, undefined, HEADER_SKIP));
  }
  get trailer(): Headers {
    return (this.#trailer ??= headersOf(this.#t, undefined, STATUS_KEYS));
  }
}

/** A final status: code, message and the metadata it came with. */
export interface Status {
  code: number;
  details: string;
  /** The trailers (or a trailers-only answer's headers); undefined for a status of the transport's own. */
  trailers?: IncomingHttpHeaders;
  cause?: unknown;
}

/** The status in trailers (or a trailers-only answer's headers), grpc-js's reading of them; undefined without `grpc-status`. */
export function statusOf(t: IncomingHttpHeaders, httpStatus: number | undefined): Status {
  const s = t["grpc-status"];
  if (typeof s === "string") {
    const m = t["grpc-message"];
    let details = "";
    if (typeof m === "string") {
      try {
        details = decodeURI(m);
      } catch {
        details = m;
      }
    }
    return { code: Number(s), details, trailers: t };
  }
  if (httpStatus) return { ...httpStatusOf(httpStatus), trailers: t };
  return { code: Code.Unknown, details: "No status information received", trailers: t };
}

/** grpc-js's mapping of an HTTP status without a gRPC one. */
function httpStatusOf(status: number): Status {
  const code =
    status === 400 ? Code.Internal
    : status === 401 ? Code.Unauthenticated
    : status === 403 ? Code.PermissionDenied
    : status === 404 ? Code.Unimplemented
    : status === 429 || status === 502 || status === 503 || status === 504 ? Code.Unavailable
    : Code.Unknown;
  return { code, details: `Received HTTP status code ${status}` };
}

/** The ConnectError a non-OK status stands for, as the grpc-js transport built it. */
export function errorOf(status: Status, header: IncomingHttpHeaders | undefined): ConnectError {
  const trailer = headersOf(status.trailers, undefined, STATUS_KEYS);
  let err = trailer.has("grpc-status-details-bin") ? findTrailerError(trailer) : undefined;
  if (!err) {
    const code = status.code in Code ? (status.code as Code) : Code.Unknown;
    err = new ConnectError(status.details, code, trailer, undefined, status.cause);
  }
  if (header) headersOf(header, err.metadata, HEADER_SKIP);
  return err;
}

export function pathOf(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

export function abortError(signal: AbortSignal): ConnectError {
  return ConnectError.from(signal.reason, Code.Canceled);
}

/** True when an error is the connection's (refused, reset, dropped, closed) rather than the stream's alone. */
export function connectionError(err: Error | undefined): boolean {
  if (!err) return false;
  const code = (err as { code?: string }).code;
  return (
    code === "ERR_HTTP2_STREAM_CANCEL" || code === "ERR_HTTP2_GOAWAY_SESSION" || code === "ERR_HTTP2_INVALID_SESSION" || code === "ERR_HTTP2_SESSION_ERROR" ||
    code === "ECONNRESET" || code === "ETIMEDOUT" || code === "EPIPE" || code === "ECONNREFUSED" || (err.cause !== undefined && connectionError(err.cause as Error))
  );
}

/** Unavailable, for a core that could not be reached: the socket's error (ECONNREFUSED …) as the cause, which the failover reads. */
export function unavailableStatus(err: Error): Status {
  const cause = err instanceof ConnectError ? (err.cause ?? err) : rootCause(err);
  return { code: Code.Unavailable, details: err instanceof ConnectError ? err.rawMessage : (cause as Error).message, cause };
}

/** The root of an error's cause chain (the socket's errno error under Node's stream errors). */
export function rootCause(err: Error): Error {
  let e = err;
  while (e.cause instanceof Error && e.cause !== e) e = e.cause;
  return e;
}

const nodeBind = AsyncResource.prototype.bind;
/** `AsyncResource.prototype.bind` without the deprecated `asyncResource` accessor pair on the bound function. */
function leanBind(this: AsyncResource, fn: (...args: unknown[]) => unknown, thisArg?: unknown): (...args: unknown[]) => unknown {
  if (thisArg !== undefined) return (nodeBind as (fn: unknown, thisArg: unknown) => (...args: unknown[]) => unknown).call(this, fn, thisArg);
  const resource = this;
  return function (this: unknown, ...args: unknown[]) {
    return resource.runInAsyncScope(fn, this, ...args);
  };
}

/**
 * `session.request(headers)`, its `AsyncResource.prototype.bind` lean for the length of the synchronous call. Node
 * 20's `request` binds each new stream's start to an `AsyncResource`, and `bind` gives the bound function an
 * `asyncResource` accessor pair (deprecated, DEP0172) made of two `util.deprecate` wrappers, each re-parenting its
 * function's prototype: 8 µs of the 13 µs `request` costs, ≈ 7 % of the split gateway's profile (bench/README.md,
 * "The split hop's system calls"). Node reads that accessor nowhere; the start still runs in the resource's scope.
 * Only what `request` calls synchronously sees the lean `bind`; Node's is back before anything else runs.
 */
export function request(session: ClientHttp2Session, headers: OutgoingHttpHeaders): ClientHttp2Stream {
  AsyncResource.prototype.bind = leanBind as typeof nodeBind;
  try {
    return session.request(headers);
  } finally {
    AsyncResource.prototype.bind = nodeBind;
  }
}

/** One core URL's HTTP/2 session, dialled when needed and reused by every call. */
export class Connection {
  #session: ClientHttp2Session | undefined;
  #open = 0;
  #idleSince = Date.now();
  #failedAt = 0;
  #backoff = BACKOFF_INITIAL_MS;
  #lastError: Error | undefined;
  #closed = false;
  readonly #authority: string;

  constructor(
    readonly url: URL,
    readonly opts: H2GrpcTransportOptions,
  ) {
    this.#authority = url.host;
  }

  get authority(): string {
    return this.#authority;
  }

  /** The session to start a call on; throws Unavailable (with the dial's error) within the backoff after a failed dial. */
  session(): ClientHttp2Session {
    const s = this.#session;
    if (s && !s.closed && !s.destroyed) return s;
    if (this.#closed) throw new ConnectError("the transport is closed", Code.Unavailable);
    if (this.#lastError && Date.now() - this.#failedAt < this.#backoff) {
      throw new ConnectError(`No connection established. Last error: ${this.#lastError.message}`, Code.Unavailable, undefined, undefined, this.#lastError);
    }
    return this.#dial();
  }

  /**
   * A stream on the current session; a session closing under the request (GOAWAY, closed between the check and the
   * request) is retired and the stream opened once more on a new one. Throws Unavailable when the core cannot be reached.
   */
  openStream(headers: OutgoingHttpHeaders): ClientHttp2Stream {
    const session = this.session();
    try {
      return request(session, headers);
    } catch {
      this.retire(session);
      try {
        return request(this.session(), headers);
      } catch (err2) {
        throw new ConnectError((err2 as Error).message, Code.Unavailable, undefined, undefined, err2);
      }
    }
  }

  /** Called with a session when it is retired (the hop channel ends its stream on it: a session's close waits for its streams). */
  readonly onRetire = new Set<(s: ClientHttp2Session) => void>();

  /** True while `s` is the session new calls start on. */
  isCurrent(s: ClientHttp2Session): boolean {
    return this.#session === s && !s.closed && !s.destroyed;
  }

  /** The session is no longer to be used for new calls (GOAWAY, a refused stream): the next call dials again. */
  retire(s: ClientHttp2Session): void {
    if (this.#session === s) {
      this.#session = undefined;
      for (const hook of this.onRetire) hook(s);
      if (!s.closed) s.close();
    }
  }

  #dial(): ClientHttp2Session {
    const s = http2.connect(this.url, { settings: { enablePush: false } });
    this.#session = s;
    let connected = false;
    let pinging = false;
    const tick = this.opts.pingIntervalMs || this.opts.idleConnectionTimeoutMs;
    const timer = tick
      ? setInterval(() => {
          if (this.#open === 0) {
            if (this.opts.idleConnectionTimeoutMs && Date.now() - this.#idleSince >= this.opts.idleConnectionTimeoutMs) this.retire(s);
            return;
          }
          if (!this.opts.pingIntervalMs || pinging || !connected) return;
          pinging = true;
          const deadline = setTimeout(() => s.destroy(new Error("keepalive ping timed out")), KEEPALIVE_TIMEOUT_MS).unref();
          s.ping((err) => {
            clearTimeout(deadline);
            pinging = false;
            if (err && !s.destroyed) s.destroy(err);
          });
        }, Math.min(this.opts.pingIntervalMs || Infinity, this.opts.idleConnectionTimeoutMs || Infinity)).unref()
      : undefined;
    s.once("connect", () => {
      connected = true;
      this.#lastError = undefined;
      this.#backoff = BACKOFF_INITIAL_MS;
    });
    s.on("error", (err) => {
      if (!connected) {
        // A failed dial: calls within the backoff fail with this error; the backoff grows to BACKOFF_MAX_MS.
        if (this.#lastError) this.#backoff = Math.min(this.#backoff * 2, BACKOFF_MAX_MS);
        this.#lastError = err;
        this.#failedAt = Date.now();
      }
    });
    s.on("goaway", () => this.retire(s));
    s.once("close", () => {
      if (timer) clearInterval(timer);
      if (this.#session === s) this.#session = undefined;
    });
    if (this.#open === 0) s.unref();
    return s;
  }

  /** A call started (the session keeps the process alive while calls are open, as grpc-js's). */
  enter(s: ClientHttp2Session): void {
    if (this.#open++ === 0) s.ref();
  }

  leave(s: ClientHttp2Session): void {
    if (--this.#open === 0) {
      this.#idleSince = Date.now();
      if (!s.destroyed) s.unref();
    }
  }

  close(): void {
    this.#closed = true;
    const s = this.#session;
    this.#session = undefined;
    if (s) for (const hook of this.onRetire) hook(s);
    s?.close();
  }
}

/** The Call a client stream belongs to, for the listeners all calls share. */
const kCall = Symbol("portico h2 grpc call");
type CallStream = ClientHttp2Stream & { [kCall]: Call };

/**
 * One call's HTTP/2 stream: frames read into messages, the status from the trailers or the stream's end, a
 * refused start sent once more. `onMessage` gets each message's bytes; `onHeader` the response headers (not for a
 * trailers-only answer); `onEnd` the final status once all messages are out.
 */
class Call {
  stream!: ClientHttp2Stream;
  session!: ClientHttp2Session;
  header: IncomingHttpHeaders | undefined;
  #httpStatus: number | undefined;
  #status: Status | undefined;
  #error: Error | undefined;
  #ended = false;
  #cancelled = false;
  #answered = false;
  #retried = false;
  readonly #frames: FrameReader;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    readonly conn: Connection,
    readonly headers: OutgoingHttpHeaders,
    readonly body: Buffer,
    readonly maxBytes: number,
    readonly onHeader: (() => void) | undefined,
    readonly onMessage: (bytes: Buffer) => ConnectError | undefined,
    readonly onEnd: (status: Status) => void,
  ) {
    this.#frames = new FrameReader(maxBytes, this);
  }

  /** Opens the stream; throws Unavailable when the core cannot be reached. */
  start(timeoutMs: number | undefined): void {
    this.#open();
    if (timeoutMs !== undefined && timeoutMs > 0) {
      this.#timer = setTimeout(() => this.cancel({ code: Code.DeadlineExceeded, details: `Deadline exceeded after ${(timeoutMs / 1000).toFixed(3)}s` }), timeoutMs);
    }
  }

  #open(): void {
    const stream = this.conn.openStream(this.headers);
    const session = stream.session as ClientHttp2Session;
    this.session = session;
    this.stream = stream;
    this.conn.enter(session);
    // The listeners every call shares, its Call on the stream (closures per call, five a call, cost more).
    (stream as CallStream)[kCall] = this;
    stream.on("response", Call.#onStreamResponse);
    stream.on("trailers", Call.#onStreamTrailers);
    stream.on("data", Call.#onStreamData);
    stream.on("error", Call.#onStreamError);
    stream.on("close", Call.#onStreamClose);
    stream.end(this.body);
  }

  // The stream's listeners: `this` is the stream, its call under kCall.
  static #onStreamResponse = function (this: CallStream, h: IncomingHttpHeaders, flags: number): void {
    this[kCall].#onResponse(h, flags);
  };
  static #onStreamTrailers = function (this: CallStream, t: IncomingHttpHeaders): void {
    const call = this[kCall];
    call.#status ??= statusOf(t, call.#httpStatus);
  };
  static #onStreamData = function (this: CallStream, chunk: Buffer): void {
    this[kCall].#onData(chunk);
  };
  static #onStreamError = function (this: CallStream, err: Error): void {
    const call = this[kCall];
    call.#error ??= err;
  };
  static #onStreamClose = function (this: CallStream): void {
    const call = this[kCall];
    // A stream given up for another (a refused start sent again) is not the call's any more.
    if (this === call.stream) call.#onClose(this, call.session);
  };

  #onResponse(h: IncomingHttpHeaders, flags: number): void {
    this.#answered = true;
    this.#httpStatus = Number(h[":status"]);
    if (flags & NGHTTP2_FLAG_END_STREAM) {
      this.#status ??= statusOf(h, this.#httpStatus);
      return;
    }
    this.header = h;
    this.onHeader?.();
  }

  #onData(chunk: Buffer): void {
    if (this.#ended || this.#status !== undefined) return;
    try {
      this.#frames.push(chunk);
    } catch (err) {
      if (err instanceof FrameTooLarge) return this.cancel({ code: Code.ResourceExhausted, details: `Received message larger than max (${err.length} vs. ${err.maxBytes})` });
      // A listener that throws would end the gateway's process: the call fails instead.
      this.cancel({ code: Code.Internal, details: `reading the core's answer failed: ${(err as Error).message}` });
    }
  }

  /** FrameSink: one whole frame of the answer (a frame and its 5-byte prefix may span any number of chunks). */
  onFrame(flags: number, message: Buffer): void {
    if (this.#ended) return;
    if (flags & 1) return this.cancel({ code: Code.Internal, details: 'Received compressed message but "grpc-encoding" header was identity' });
    const err = this.onMessage(message);
    if (err) this.cancel({ code: err.code, details: err.rawMessage });
  }

  #onClose(stream: ClientHttp2Stream, session: ClientHttp2Session): void {
    this.conn.leave(session);
    if (this.#ended) return;
    // A start the core refused (REFUSED_STREAM, or a GOAWAY before it was answered) goes once more on a new session.
    if (!this.#answered && !this.#cancelled && !this.#retried && (stream.rstCode === NGHTTP2_REFUSED_STREAM || (this.#error as { code?: string } | undefined)?.code === "ERR_HTTP2_GOAWAY_SESSION")) {
      this.#retried = true;
      this.conn.retire(session);
      this.#error = undefined;
      try {
        this.#open();
        return;
      } catch (err) {
        return this.#end(unavailableStatus(err as Error));
      }
    }
    if (this.#status) return this.#end(this.#status);
    this.#end(this.#closeStatus(stream, session));
  }


  /** The status of a stream that closed without one, as grpc-js reads it. */
  #closeStatus(stream: ClientHttp2Stream, session: ClientHttp2Session): Status {
    const err = this.#error;
    // A connection that failed or dropped: the socket's error is the cause (the failover reads it).
    if (connectionError(err) && !this.#answered) return unavailableStatus(err!);
    switch (stream.rstCode) {
      case NGHTTP2_NO_ERROR:
        if (this.#httpStatus && this.#httpStatus !== 200) return httpStatusOf(this.#httpStatus);
        return { code: Code.Internal, details: `Received RST_STREAM with code ${stream.rstCode} (Call ended without gRPC status)` };
      case NGHTTP2_REFUSED_STREAM:
        return { code: Code.Unavailable, details: "Stream refused by server" };
      case NGHTTP2_CANCEL:
        if (session.destroyed || connectionError(err)) return { code: Code.Unavailable, details: "Connection dropped", cause: err && rootCause(err) };
        return { code: Code.Canceled, details: "Call cancelled" };
      case NGHTTP2_ENHANCE_YOUR_CALM:
        return { code: Code.ResourceExhausted, details: "Bandwidth exhausted or memory limit exceeded" };
      case NGHTTP2_INADEQUATE_SECURITY:
        return { code: Code.PermissionDenied, details: "Protocol not secure enough" };
      case NGHTTP2_INTERNAL_ERROR: {
        if (!err) return { code: Code.Internal, details: `Received RST_STREAM with code ${stream.rstCode} (Internal server error)` };
        const root = rootCause(err);
        const c = (root as { code?: string }).code;
        if (c === "ECONNRESET" || c === "ETIMEDOUT" || connectionError(err)) return { code: Code.Unavailable, details: root.message, cause: root };
        return { code: Code.Internal, details: `Received RST_STREAM with code ${stream.rstCode} triggered by internal client error: ${err.message}` };
      }
      default:
        return { code: Code.Internal, details: `Received RST_STREAM with code ${stream.rstCode}` };
    }
  }

  #end(status: Status): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.onEnd(status);
  }

  /** Ends the call with a status of the client's own (deadline, caller's cancel, bad message) and resets the stream. */
  cancel(status: Status): void {
    if (this.#ended) return;
    this.#cancelled = true;
    if (!this.stream.closed) this.stream.close(NGHTTP2_CANCEL);
    this.#end(status);
  }

  pause(): void {
    this.stream.pause();
  }

  resume(): void {
    this.stream.resume();
  }
}

export function createH2GrpcTransport(options: H2GrpcTransportOptions): Transport & { close(): void } {
  const url = new URL(options.baseUrl);
  const conn = new Connection(url, options);
  const maxBytes = options.readMaxBytes ?? 0xffff_ffff;
  const scheme = url.protocol === "https:" ? "https" : "http";

  const headersFor: HeadersFor = (method, timeoutMs, header) => {
    const base: OutgoingHttpHeaders = {
      ":method": "POST",
      ":scheme": scheme,
      ":authority": conn.authority,
      ":path": pathOf(method),
      "content-type": "application/grpc",
      te: "trailers",
      "user-agent": "portico-gateway",
      "grpc-accept-encoding": "identity",
    };
    if (timeoutMs !== undefined && timeoutMs > 0) base["grpc-timeout"] = grpcTimeout(timeoutMs);
    return requestHeaders(base, header);
  };

  /** A message as a gRPC frame: five bytes (uncompressed, length) then the message, encoded in place. */
  const frameOf = (schema: DescMessage, input: unknown): Buffer => {
    const buf = codecOf(schema).encode(input as object, 5);
    buf[0] = 0;
    buf.writeUInt32BE(buf.length - 5, 1);
    return buf;
  };

  const perCall: PerCallUnary = (method, signal, timeoutMs, header, input) => {
    if (signal?.aborted) return Promise.reject(abortError(signal));
    return new Promise<UnaryResponse>((resolve, reject) => {
      let message: unknown;
      const decode = codecOf(method.output);
      const onAbort = () => {
        call.cancel({ code: Code.Canceled, details: "" });
        reject(abortError(signal!));
      };
      const call = new Call(
        conn,
        headersFor(method, timeoutMs, header),
        frameOf(method.input, input),
        maxBytes,
        undefined,
        (bytes) => {
          if (message !== undefined) return undefined;
          try {
            message = decode.decode(bytes);
          } catch (e) {
            return new ConnectError(`Response message parsing error: ${e instanceof Error ? e.message : String(e)}`, Code.Internal);
          }
          return undefined;
        },
        (status) => {
          signal?.removeEventListener("abort", onAbort);
          if (signal?.aborted) return; // rejected by onAbort
          if (status.code !== OK) return reject(errorOf(status, call.header));
          if (message === undefined) return reject(new ConnectError("protocol error: missing output message for unary method", Code.Unimplemented));
          resolve(new CallResponse(false, method, message, call.header, status.trailers) as unknown as UnaryResponse);
        },
      );
      try {
        call.start(timeoutMs);
      } catch (err) {
        return reject(err);
      }
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  };

  const channel = options.unaryChannel?.(conn, maxBytes, headersFor, perCall);

  return {
    close: () => conn.close(),

    unary(method, signal, timeoutMs, header, input) {
      return (channel !== undefined && !channel.unsupported ? channel.unary(method, signal, timeoutMs, header, input) : perCall(method, signal, timeoutMs, header, input)) as never;
    },

    async stream(method, signal, timeoutMs, header, input) {
      if (method.methodKind !== "server_streaming") throw new ConnectError(`${method.methodKind} is not supported by the core client`, Code.Unimplemented);
      const first = await input[Symbol.asyncIterator]().next();
      if (signal?.aborted) throw abortError(signal);
      const headers = headersFor(method, timeoutMs, header);
      const decode = codecOf(method.output);
      /** Filled when the status arrives (as connect-node's). */
      const trailer = new Headers();
      /** The reader's side: messages read ahead (the stream paused while READ_AHEAD wait), the outcome after them. */
      const messages = new ReadAhead<unknown>({
        more: () => call.resume(),
        pause: () => call.pause(),
        cancel: () => call.cancel({ code: Code.Canceled, details: "Cancelled on client" }),
        ended: signal && (() => signal.removeEventListener("abort", onAbort)),
      });
      const call = new Call(
        conn,
        headers,
        frameOf(method.input, first.value),
        maxBytes,
        () => messages.opened(),
        (bytes) => {
          if (messages.done) return undefined;
          let message: unknown;
          try {
            message = decode.decode(bytes);
          } catch (e) {
            return new ConnectError(`Response message parsing error: ${e instanceof Error ? e.message : String(e)}`, Code.Internal);
          }
          messages.push(message);
          return undefined;
        },
        (status) => {
          headersOf(status.trailers, trailer, STATUS_KEYS);
          if (signal?.aborted && status.code === Code.Canceled) return;
          messages.finish(status.code === OK ? null : errorOf(status, call.header));
        },
      );
      const onAbort = () => {
        call.cancel({ code: Code.Canceled, details: "" });
        messages.finish(abortError(signal!));
      };
      await messages.opening(() => {
        call.start(timeoutMs);
        signal?.addEventListener("abort", onAbort, { once: true });
      });
      return new CallResponse(true, method, messages, call.header, trailer) as unknown as StreamResponse as never;
    },
  };
}
