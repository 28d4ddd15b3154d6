/**
 * The split gateway's unary calls to the core, many on one long-lived gRPC stream per HTTP/2 session (the core's
 * `HopService.Exchange`, proto/portico/hop/v1/hop_service.proto; served by src/core/grpc-fast-path.ts). A call on its
 * own stream costs both processes a stream's headers, HPACK, trailers and Node's stream objects: most of what the
 * split adds to a non-streamed request (bench/README.md, "The split hop's unary channel"). On the channel, a call is
 * one message each way.
 *
 * Each call behaves as the same call on its own stream (src/gateway/h2-grpc-transport.ts), which tests check side by
 * side: the caller's headers as the same metadata (same checks, same InvalidArgument); `timeoutMs` sent as the call's
 * deadline and kept here too (DeadlineExceeded, a cancel sent); the caller's signal sends a cancel and rejects with
 * `ConnectError.from(signal.reason, Code.Canceled)`; the answer's status fields read as trailers are (`errorOf`), the
 * core's response headers and trailers given as metadata. The channel's failures map as a stream's do: a core that
 * cannot be reached before the channel was answered is Unavailable with the socket's error as the cause (the failover
 * of src/gateway/core-transport.ts reads it); a connection dropped under open calls is Unavailable without that cause
 * (the calls may have run: they are never sent again). Calls the core did not start (it is stopping and answers
 * `refused`, or ended the channel cleanly before reading them, or refused the channel's stream) are sent once more on
 * a new channel, as a refused stream is.
 *
 * A core without the channel (an older version: the stream is answered Unimplemented) gets the calls on their own
 * streams from then on. Server-streaming calls always go on their own streams (each needs its own flow control).
 */
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders, type OutgoingHttpHeaders } from "node:http2";
import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type UnaryResponse } from "@connectrpc/connect";
import { HopService } from "../gen/portico/hop/v1/hop_service_pb.js";
import { decodeReply, encodeCallFrame, type HopReply } from "../lib/hop-codec.js";
import { FrameReader } from "../lib/grpc-frames.js";
import { codecOf } from "../lib/proto-codec.js";
import {
  abortError,
  CallResponse,
  connectionError,
  errorOf,
  OK,
  pathOf,
  requestHeaders,
  rootCause,
  statusOf,
  unavailableStatus,
  type Connection,
  type HeadersFor,
  type PerCallUnary,
  type Status,
  type UnaryChannel,
} from "./h2-grpc-transport.js";

const { NGHTTP2_REFUSED_STREAM, NGHTTP2_FLAG_END_STREAM, NGHTTP2_CANCEL } = http2.constants;

/** What an answer's envelope may add to its message: its metadata. */
const ENVELOPE_ROOM = 64 * 1024;
/** Ids wrap below 2^31 (a uint32 field; smaller varints than the full range would need). */
const MAX_ID = 0x7fff_ffff;

/** One call waiting for its answer. */
class HopCallState {
  lane: Lane | undefined;
  timer: NodeJS.Timeout | undefined;
  resent = false;
  settled = false;
  onAbort: (() => void) | undefined;

  constructor(
    readonly client: HopClient,
    readonly method: DescMethod,
    readonly id: number,
    readonly frame: Buffer,
    readonly signal: AbortSignal | undefined,
    readonly resolve: (res: UnaryResponse) => void,
    readonly reject: (err: unknown) => void,
    /** The call as made, for its own stream if the core has no channel. */
    readonly made: { timeoutMs: number | undefined; header: HeadersArg; input: unknown },
  ) {}

  /** Leaves the lane (its open-call count and the session's), the deadline and the caller's signal; false when already settled. */
  leave(): boolean {
    if (this.settled) return false;
    this.settled = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.onAbort) this.signal!.removeEventListener("abort", this.onAbort);
    this.lane?.forget(this);
    return true;
  }

  answer(reply: HopReply): void {
    if (reply.refused) {
      // The core is stopping: this lane takes no more calls, and the call goes once more on a new one.
      const lane = this.lane;
      this.lane = undefined;
      lane?.forget(this);
      lane?.retire();
      return this.resend(STOPPING);
    }
    if (!this.leave()) return;
    const trailers = metadataOf(reply.trailers);
    // The response headers a call on its own stream gets (content-type among them), then the ones the call set.
    const headers = reply.headers.length > 0 ? metadataOf(reply.headers, { ...STREAM_HEADERS }) : STREAM_HEADERS;
    const status = statusOf(trailers, 200);
    if (status.code !== OK) return this.reject(errorOf(status, headers));
    if (reply.output.byteLength > this.client.maxBytes) {
      return this.reject(errorOf({ code: Code.ResourceExhausted, details: `Received message larger than max (${reply.output.byteLength} vs. ${this.client.maxBytes})` }, undefined));
    }
    let message: unknown;
    try {
      message = codecOf(this.method.output).decode(reply.output);
    } catch (e) {
      return this.reject(new ConnectError(`Response message parsing error: ${e instanceof Error ? e.message : String(e)}`, Code.Internal));
    }
    this.resolve(new CallResponse(false, this.method, message, headers, trailers) as unknown as UnaryResponse);
  }

  /** Ends the call with a status of its own (deadline, a failed channel). */
  fail(status: Status): void {
    if (this.leave()) this.reject(errorOf(status, undefined));
  }

  /** The caller's signal aborted, or the deadline passed: a cancel goes to the core. */
  cancel(err: unknown): void {
    if (this.settled) return;
    // Sent before the call leaves its lane (a retired lane that empties ends its stream).
    this.lane?.sendCancel(this.id);
    this.leave();
    this.reject(err);
  }

  /** The core did not start the call: sent once more on the client's current lane, else failed with `status`. */
  resend(status: Status): void {
    if (this.settled) return;
    if (this.resent) return this.fail(status);
    this.resent = true;
    try {
      this.client.lane().send(this);
    } catch (err) {
      this.fail(unavailableStatus(err as Error));
    }
  }
}

/** The status of a call the core did not start twice over (it is stopping). */
const STOPPING: Status = { code: Code.Unavailable, details: "the core is stopping and did not start the call" };


/** What the core's answer on a stream of its own starts with (src/core/grpc-fast-path.ts); read, never changed. */
const STREAM_HEADERS: IncomingHttpHeaders = Object.freeze({ ":status": 200 as never, "content-type": "application/grpc+proto" });

/** Metadata pairs as HTTP/2 headers are read (several values of a name as a list). */
function metadataOf(pairs: Array<[string, string]>, out: IncomingHttpHeaders = {}): IncomingHttpHeaders {
  for (const [k, v] of pairs) {
    const prev = out[k];
    if (prev === undefined) out[k] = v;
    else if (Array.isArray(prev)) prev.push(v);
    else out[k] = [prev, v] as never;
  }
  return out;
}

const kLane = Symbol("portico hop lane");
type LaneStream = ClientHttp2Stream & { [kLane]: Lane };

/** One channel stream on one session, and the calls sent on it. */
class Lane {
  readonly calls = new Map<number, HopCallState>();
  readonly stream: LaneStream;
  answered = false;
  /** No new calls go on this lane (its session retired, or its stream ended). */
  retired = false;
  #status: Status | undefined;
  #error: Error | undefined;
  readonly #frames: FrameReader;

  readonly session: ClientHttp2Session;

  constructor(
    readonly client: HopClient,
    headers: OutgoingHttpHeaders,
  ) {
    // An answer's message within the client's limit, and room for its envelope's metadata (larger: the lane fails).
    this.#frames = new FrameReader(client.maxBytes >= 0xffff_ffff - ENVELOPE_ROOM ? 0xffff_ffff : client.maxBytes + ENVELOPE_ROOM, this);
    const stream = client.conn.openStream(headers) as LaneStream;
    this.stream = stream;
    this.session = stream.session as ClientHttp2Session;
    stream[kLane] = this;
    stream.on("response", Lane.#onResponse);
    stream.on("data", Lane.#onData);
    stream.on("trailers", Lane.#onTrailers);
    stream.on("error", Lane.#onError);
    stream.on("close", Lane.#onClose);
  }

  static #onResponse = function (this: LaneStream, h: IncomingHttpHeaders, flags: number): void {
    const lane = this[kLane];
    const httpStatus = Number(h[":status"]);
    // A channel is served when answered 200 with the stream open; a trailers-only answer or another HTTP status is
    // its refusal (an older core: Unimplemented), and nothing sent on it ran.
    if (!(flags & NGHTTP2_FLAG_END_STREAM) && httpStatus === 200) lane.answered = true;
    else {
      lane.#status ??= statusOf(h, httpStatus);
      lane.end();
    }
  };
  static #onTrailers = function (this: LaneStream, t: IncomingHttpHeaders): void {
    const lane = this[kLane];
    lane.#status ??= statusOf(t, 200);
    // The core ended its side: this side ends too, and the stream closes (its calls then settle in #closed).
    lane.end();
  };
  static #onError = function (this: LaneStream, err: Error): void {
    this[kLane].#error ??= err;
  };
  static #onData = function (this: LaneStream, chunk: Buffer): void {
    const lane = this[kLane];
    try {
      lane.#frames.push(chunk);
    } catch (err) {
      // A listener that throws would end the gateway's process: the lane fails instead.
      lane.#status ??= { code: Code.Internal, details: `reading the core's answer failed: ${(err as Error).message}` };
      if (!this.closed) this.close(NGHTTP2_CANCEL);
    }
  };
  static #onClose = function (this: LaneStream): void {
    this[kLane].#closed();
  };

  /** FrameSink: one whole frame. */
  onFrame(flags: number, message: Buffer): void {
    if (flags & 1) throw new Error('Received compressed message but "grpc-encoding" header was identity');
    const reply = decodeReply(message);
    this.calls.get(reply.id)?.answer(reply);
  }

  send(call: HopCallState): void {
    call.lane = this;
    this.calls.set(call.id, call);
    this.client.conn.enter(this.session);
    this.stream.write(call.frame);
  }

  sendCancel(id: number): void {
    if (this.stream.closed || this.stream.destroyed || this.stream.writableEnded) return;
    this.stream.write(encodeCallFrame({ id, method: "", input: EMPTY, timeoutMs: 0, headers: {}, cancel: true }));
  }

  /** A call left (answered, failed, cancelled): the lane ends its side once retired and empty. */
  forget(call: HopCallState): void {
    if (this.calls.get(call.id) !== call) return;
    this.calls.delete(call.id);
    this.client.conn.leave(this.session);
    if (this.retired && this.calls.size === 0) this.end();
  }

  /** No new calls here; the stream's side ends when the calls on it are answered. */
  retire(): void {
    this.retired = true;
    if (this.calls.size === 0) this.end();
  }

  end(): void {
    this.retired = true;
    const s = this.stream;
    if (!s.closed && !s.destroyed && !s.writableEnded) s.end();
  }

  #closed(): void {
    this.retired = true;
    this.client.laneClosed(this);
    if (this.calls.size === 0) return;
    const calls = [...this.calls.values()];
    this.calls.clear();
    for (const call of calls) {
      call.lane = undefined;
      this.client.conn.leave(this.session);
    }
    const status = this.#status;
    const err = this.#error;
    // The core ended the channel cleanly (it is stopping): it had started every call it answered, and no other.
    if (status?.code === OK) {
      for (const call of calls) call.resend(STOPPING);
      return;
    }
    // The channel's stream was refused (REFUSED_STREAM, GOAWAY before it was answered): nothing on it ran.
    if (!this.answered && (this.stream.rstCode === NGHTTP2_REFUSED_STREAM || (err as { code?: string } | undefined)?.code === "ERR_HTTP2_GOAWAY_SESSION")) {
      for (const call of calls) call.resend({ code: Code.Unavailable, details: "Stream refused by server" });
      return;
    }
    if (status && status.code === Code.Unimplemented && !this.answered) {
      // Not answered with a channel: an older core. Its calls go on their own streams, as every later one.
      this.client.unsupported = true;
      for (const call of calls) this.client.fallback(call);
      return;
    }
    let final: Status;
    if (status) final = status;
    else if (connectionError(err) && !this.answered) final = unavailableStatus(err!);
    else if (err || this.session.destroyed) final = { code: Code.Unavailable, details: "Connection dropped", ...(err ? { cause: rootCause(err) } : {}) };
    else final = { code: Code.Internal, details: `Received RST_STREAM with code ${this.stream.rstCode} (Call ended without gRPC status)` };
    for (const call of calls) call.fail(final);
  }
}

const EMPTY = new Uint8Array(0);

type HeadersArg = ConstructorParameters<typeof Headers>[0] | undefined;

/** The channel client of one core URL (one Connection). */
class HopClient implements UnaryChannel {
  unsupported = false;
  #lane: Lane | undefined;
  #nextId = 1;
  /** The channel's own request headers (no deadline, no metadata: each call carries its own). */
  readonly #headers: OutgoingHttpHeaders;

  constructor(
    readonly conn: Connection,
    readonly maxBytes: number,
    headersFor: HeadersFor,
    readonly perCall: PerCallUnary,
  ) {
    this.#headers = headersFor(HopService.method.exchange, undefined, undefined);
    conn.onRetire.add((s) => {
      if (this.#lane?.session === s) {
        this.#lane.retire();
        this.#lane = undefined;
      }
    });
  }

  /** The lane new calls go on: the current one, or a new one on the connection's current session. */
  lane(): Lane {
    const l = this.#lane;
    if (l && !l.retired && this.conn.isCurrent(l.session)) return l;
    if (l) l.retire();
    this.#lane = undefined;
    const lane = new Lane(this, this.#headers);
    this.#lane = lane;
    return lane;
  }

  laneClosed(lane: Lane): void {
    if (this.#lane === lane) this.#lane = undefined;
  }

  #id(): number {
    const lane = this.#lane;
    for (;;) {
      const id = this.#nextId;
      this.#nextId = id >= MAX_ID ? 1 : id + 1;
      if (!lane?.calls.has(id)) return id;
    }
  }

  /** A call that was on a channel the core does not serve, sent on its own stream. */
  fallback(call: HopCallState): void {
    if (!call.leave()) return;
    const made = call.made;
    this.perCall(call.method, call.signal, made.timeoutMs, made.header, made.input).then(call.resolve, call.reject);
  }

  unary(method: DescMethod, signal: AbortSignal | undefined, timeoutMs: number | undefined, header: HeadersArg, input: unknown): Promise<UnaryResponse> {
    if (signal?.aborted) return Promise.reject(abortError(signal));
    return new Promise<UnaryResponse>((resolve, reject) => {
      let call: HopCallState;
      try {
        const fields = requestHeaders({}, header);
        const headers: Record<string, string> = {};
        for (const k of Object.keys(fields)) {
          const v = fields[k]!;
          headers[k] = Array.isArray(v) ? v.join(", ") : String(v);
        }
        const id = this.#id();
        const deadline = timeoutMs !== undefined && timeoutMs > 0 ? Math.min(Math.ceil(timeoutMs), 0xffff_ffff) : 0;
        const frame = encodeCallFrame({ id, method: pathOf(method), input: codecOf(method.input).encode(input as object), timeoutMs: deadline, headers, cancel: false });
        call = new HopCallState(this, method, id, frame, signal, resolve, reject, { timeoutMs, header, input });
        this.lane().send(call);
      } catch (err) {
        return reject(err);
      }
      if (timeoutMs !== undefined && timeoutMs > 0) {
        call.timer = setTimeout(() => call.cancel(errorOf({ code: Code.DeadlineExceeded, details: `Deadline exceeded after ${(timeoutMs / 1000).toFixed(3)}s` }, undefined)), timeoutMs);
      }
      if (signal) {
        call.onAbort = () => call.cancel(abortError(signal));
        signal.addEventListener("abort", call.onAbort, { once: true });
      }
    });
  }
}

/** The unary channel of one core connection: `H2GrpcTransportOptions.unaryChannel`. */
export function createHopChannel(conn: Connection, maxBytes: number, headersFor: HeadersFor, perCall: PerCallUnary): UnaryChannel {
  return new HopClient(conn, maxBytes, headersFor, perCall);
}
