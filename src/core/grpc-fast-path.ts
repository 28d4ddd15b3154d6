/**
 * gRPC calls to the core's unary and server-streaming methods served straight off the HTTP/2 stream, on the
 * same port and with the same services, interceptors and wire as connect-node's handler: the call goes to the
 * in-process transport (src/core/direct-transport.ts: the interceptor chain composed once, one abort controller
 * per call), its messages framed and its status written as gRPC trailers here. connect-node's handler runs every
 * call through its async-iterable pipeline and links two abort controllers per call (a DOMException and an
 * abort event each): most of the core's CPU per call on the split path (bench/README.md, "The split path on a
 * lean gRPC client").
 *
 * Taken here: POST, `content-type: application/grpc` or `application/grpc+proto`, no request compression
 * (`grpc-encoding` absent or identity), a unary or server-streaming method of a registered service. Everything
 * else (Connect and gRPC-Web requests, JSON, compressed messages, client and bidi streaming, unknown paths)
 * goes on to connect-node's handler unchanged.
 *
 * As connect-node's handler: `grpc-timeout` is the handler's deadline; the request message larger than
 * `readMaxBytes` is ResourceExhausted, more or fewer than one message InvalidArgument/Unimplemented as connect
 * says them, a message that is not valid protobuf InvalidArgument (src/core/parse-error-status.ts); the client
 * resetting the stream aborts the handler's signal (and stops reading its stream); a stream's messages are
 * written as the HTTP/2 stream drains (backpressure); errors are `grpc-status`, `grpc-message` (percent-encoded
 * as the gRPC spec asks) and `grpc-status-details-bin` with the error's metadata, in the trailers, or as a
 * trailers-only response when nothing was sent.
 *
 * Per call: one FastCall object on the stream and the module's shared listener functions (no closures, no `once`
 * wrappers, no listeners removed: what a stream emits after its phase is ignored); the request body read off
 * `data`/`end` without a promise of its own (bench/README.md, "The split hop: the calls' listeners and objects").
 */
import type { ServerHttp2Stream, IncomingHttpHeaders, OutgoingHttpHeaders, Http2Server } from "node:http2";
import type { DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, type Transport } from "@connectrpc/connect";
import { parseTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { responseFields } from "./direct-transport.js";
import { oneValue } from "../lib/one-value.js";
import { LightAbortController } from "../lib/light-abort.js";
import { codecOf } from "../lib/proto-codec.js";
import { decodeCall, encodeReplyFrame, type HopCall } from "../lib/hop-codec.js";
import { FrameReader, FrameTooLarge } from "../lib/grpc-frames.js";
import { LEGAL_KEY, PRINTABLE_ASCII } from "../lib/grpc-metadata.js";
import { HopService } from "../gen/portico/hop/v1/hop_service_pb.js";

const CONTENT_TYPES = new Set(["application/grpc", "application/grpc+proto"]);

/** The unary and server-streaming methods `routes` registers, by request path. */
function methodsOf(routes: (router: ConnectRouter) => void): Map<string, DescMethod> {
  const methods = new Map<string, DescMethod>();
  const router = {
    handlers: [],
    service(service: DescService) {
      for (const m of service.methods) {
        if (m.methodKind === "unary" || m.methodKind === "server_streaming") methods.set(`/${service.typeName}/${m.name}`, m);
      }
      return router;
    },
    rpc() {
      return router;
    },
  } as unknown as ConnectRouter;
  routes(router);
  return methods;
}

/** `grpc-message` as the gRPC spec encodes it: bytes outside printable ASCII, and `%`, percent-encoded. */
function grpcMessage(text: string): string {
  let plain = true;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x25) {
      plain = false;
      break;
    }
  }
  if (plain) return text;
  let out = "";
  for (const byte of Buffer.from(text, "utf8")) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** The gRPC status of `err` (or OK) and the error's metadata, as HTTP/2 trailer fields, added to `into`. */
function statusFields(err: ConnectError | undefined, into: OutgoingHttpHeaders): OutgoingHttpHeaders {
  if (!err) {
    // OK is one field (what setTrailerStatus writes for no error), without a Headers object per call.
    into["grpc-status"] = "0";
    return into;
  }
  const h = setTrailerStatus(new Headers(), err);
  h.forEach((value, key) => {
    if (key === "grpc-message") value = grpcMessage(err.rawMessage);
    const prev = into[key];
    into[key] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [String(prev), value];
  });
  return into;
}

function fieldsOf(headers: Headers | undefined, into: OutgoingHttpHeaders): OutgoingHttpHeaders {
  headers?.forEach((value, key) => {
    into[key] = value;
  });
  return into;
}

/** A message as one gRPC message frame (uncompressed), encoded behind the frame's five bytes (no copy). */
function frame(schema: DescMessage, message: unknown): Buffer {
  const out = codecOf(schema).encode(message as object, 5);
  out[0] = 0;
  out.writeUInt32BE(out.byteLength - 5, 1);
  return out;
}

/** The request's headers as the handler reads them (no HTTP/2 pseudo-headers). */
function requestHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of Object.keys(headers)) {
    if (key.charCodeAt(0) === 58 /* : */) continue;
    const v = headers[key];
    if (v !== undefined) out[key] = Array.isArray(v) ? v.join(", ") : v;
  }
  return out;
}

export interface GrpcFastPath {
  /** True when the call is taken here; false: pass it on to the regular handler. */
  handle(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): boolean;
  /**
   * The server is stopping: hop channels start no more calls (they are answered `refused`, and the gateway sends
   * them elsewhere) and end once the calls they started are answered.
   */
  drain(): void;
  /** Aborts the calls still open (the server is stopping; connect-node's handler does the same after its shutdown timeout). */
  abortAll(reason: unknown): void;
}

/** The call a stream carries, for the listeners every call shares (`this` is the stream: no closures per call). */
const kCall = Symbol("portico grpc fast path call");
type CallStream = ServerHttp2Stream & { [kCall]: FastCall };

function onCallData(this: CallStream, chunk: Buffer): void {
  this[kCall].data(chunk);
}
function onCallEnd(this: CallStream): void {
  this[kCall].bodyEnd();
}
function onCallClose(this: CallStream): void {
  this[kCall].close();
}
function onCallWantTrailers(this: CallStream): void {
  this.sendTrailers(this[kCall].trailers!);
}
/** A reset stream's error: reported through "close". */
function ignoreError(): void {}

const READING = 0;
const RUNNING = 1;
const FINISHED = 2;

/**
 * One call on its HTTP/2 stream: the request body read, then the call run through the transport and its answer
 * written. Listeners are the module's shared functions and are never removed (the stream ends with the call; what
 * arrives after a phase is ignored by the phase): `once` made a bound wrapper and a state object per listener, and
 * each `on`/`off` of an HTTP/2 stream emits `newListener`/`removeListener` (bench/README.md, "The split hop: …").
 */
class FastCall {
  phase = READING;
  trailers: OutgoingHttpHeaders | undefined;
  readonly ac = new LightAbortController();
  #body: Buffer | Buffer[] | undefined;
  #size = 0;
  #sentHeaders = false;

  constructor(
    readonly fast: FastPathState,
    readonly stream: CallStream,
    readonly headers: IncomingHttpHeaders,
    readonly method: DescMethod,
    readonly timeoutMs: number | undefined,
  ) {}

  /** Aborts the handler's signal (the server is stopping). */
  abort(reason: unknown): void {
    this.ac.abort(reason);
  }

  data(chunk: Buffer): void {
    if (this.phase !== READING) return;
    this.#size += chunk.byteLength;
    // Over the limit: the rest is not kept, and the call fails (ResourceExhausted).
    if (this.#size > this.fast.readMaxBytes + 5) return void this.#run(true);
    const body = this.#body;
    if (body === undefined) this.#body = chunk;
    else if (Array.isArray(body)) body.push(chunk);
    else this.#body = [body, chunk];
  }

  bodyEnd(): void {
    if (this.phase === READING) void this.#run(false);
  }

  close(): void {
    if (this.phase === FINISHED) return;
    if (this.phase === RUNNING) {
      // A stream reset by the client (or closed under the call) aborts the handler.
      this.ac.abort(new ConnectError("the client closed the stream", Code.Canceled));
      return;
    }
    // Closed before the request was read: nothing ran, nothing to answer.
    this.phase = FINISHED;
    this.fast.open.delete(this);
  }

  #respondHeaders(extra: Headers | undefined, trailersOnly?: OutgoingHttpHeaders): boolean {
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return false;
    if (trailersOnly) {
      stream.respond(Object.assign(fieldsOf(extra, { ":status": 200, "content-type": "application/grpc+proto" }), trailersOnly), { endStream: true });
      return false;
    }
    // Node copies the headers and the options it is given: shared constants when nothing is added.
    stream.respond(extra ? fieldsOf(extra, { ":status": 200, "content-type": "application/grpc+proto" }) : RESPONSE_HEADERS, WAIT_FOR_TRAILERS);
    this.#sentHeaders = true;
    return true;
  }

  /** Ends the answer: `trailers` go out when the stream asks for them, after what was written. */
  #end(trailers: OutgoingHttpHeaders, last?: Buffer): void {
    this.trailers = trailers;
    this.stream.on("wantTrailers", onCallWantTrailers);
    this.phase = FINISHED;
    this.stream.end(last);
  }

  /** Fails the call before it ran. */
  refuse(err: ConnectError): void {
    this.phase = FINISHED;
    this.#fail(err);
  }

  #fail(err: ConnectError): void {
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return;
    if (!this.#sentHeaders) this.#respondHeaders(undefined, statusFields(err, {}));
    else this.#end(statusFields(err, {}));
  }

  async #run(tooLarge: boolean): Promise<void> {
    this.phase = RUNNING;
    const { stream, method, fast } = this;
    const readMaxBytes = fast.readMaxBytes;
    try {
      // The request: exactly one message frame within readMaxBytes.
      const chunks = this.#body;
      this.#body = undefined;
      const body = chunks === undefined ? EMPTY : Array.isArray(chunks) ? Buffer.concat(chunks) : chunks;
      const length = body.byteLength >= 5 ? body.readUInt32BE(1) : -1;
      if (tooLarge || length > readMaxBytes) throw new ConnectError(`message size ${tooLarge ? this.#size - 5 : length} is larger than configured readMaxBytes ${readMaxBytes}`, Code.ResourceExhausted);
      if (length < 0 || body.byteLength < 5 + length) throw new ConnectError("protocol error: missing input message for unary method", body.byteLength === 0 ? Code.Unimplemented : Code.InvalidArgument);
      if (body.byteLength > 5 + length) throw new ConnectError("protocol error: received extra input message for unary method", Code.Unimplemented);
      if ((body[0]! & 1) !== 0) throw new ConnectError("received compressed message without grpc-encoding", Code.Internal);
      let input;
      try {
        input = codecOf(method.input).decode(body.subarray(5));
      } catch (e) {
        throw new ConnectError(`parse binary: ${e instanceof Error ? e.message : String(e)}`, Code.InvalidArgument);
      }
      const header = requestHeaders(this.headers);
      if (method.methodKind === "unary") {
        const res = await fast.transport.unary(method as never, this.ac.signal, this.timeoutMs, header, input as never);
        // The response's header and trailer only if someone set them (reading them makes two Headers per call).
        const fields = responseFields(res);
        if (!this.#respondHeaders(fields.header)) return;
        this.#end(fields.trailer ? statusFields(undefined, fieldsOf(fields.trailer, {})) : OK_TRAILERS, frame(method.output, res.message));
        return;
      }
      const res = await fast.transport.stream(method as never, this.ac.signal, this.timeoutMs, header, oneValue(input as never));
      const it = res.message[Symbol.asyncIterator]();
      try {
        for (;;) {
          const r = await it.next();
          if (r.done) break;
          if (!this.#sentHeaders && !this.#respondHeaders(res.header)) return;
          if (!stream.write(frame(method.output, r.value))) {
            await new Promise<void>((resolve) => {
              const done = () => {
                stream.off("drain", done);
                stream.off("close", done);
                resolve();
              };
              stream.on("drain", done);
              stream.on("close", done);
            });
          }
          if (stream.destroyed || stream.closed) return;
        }
      } finally {
        if (this.ac.signal.aborted || stream.destroyed || stream.closed) await it.return?.().catch(() => undefined);
      }
      if (!this.#sentHeaders && !this.#respondHeaders(res.header)) return;
      this.#end(statusFields(undefined, fieldsOf(res.trailer, {})));
    } catch (e) {
      this.phase = FINISHED;
      this.#fail(ConnectError.from(e));
    } finally {
      this.phase = FINISHED;
      fast.open.delete(this);
    }
  }
}

const EMPTY = Buffer.alloc(0);
/** What a call answers when the handler set no header or trailer (Node copies them: one object for every call). */
const RESPONSE_HEADERS: OutgoingHttpHeaders = Object.freeze({ ":status": 200, "content-type": "application/grpc+proto" });
const WAIT_FOR_TRAILERS = Object.freeze({ waitForTrailers: true });
const OK_TRAILERS: OutgoingHttpHeaders = Object.freeze(statusFields(undefined, {}));
/** parseTimeout's answer for a call without `grpc-timeout`. */
const NO_TIMEOUT: ReturnType<typeof parseTimeout> = Object.freeze({});

/** What every call of one fast path shares. */
interface FastPathState {
  readonly transport: Transport;
  readonly readMaxBytes: number;
  /** The calls still open (aborted when the server stops). */
  readonly open: Set<FastCall>;
  /** The unary methods, by gRPC path (what a hop channel's calls name). */
  readonly unary: Map<string, DescMethod>;
  /** The hop channels open. */
  readonly channels: Set<HopChannel>;
  draining: boolean;
}

export function createGrpcFastPath(routes: (router: ConnectRouter) => void, transport: Transport, readMaxBytes: number): GrpcFastPath {
  const methods = methodsOf(routes);
  const unary = new Map([...methods].filter(([, m]) => m.methodKind === "unary"));
  const fast: FastPathState = { transport, readMaxBytes, open: new Set(), unary, channels: new Set(), draining: false };

  function start(stream: CallStream, headers: IncomingHttpHeaders, method: DescMethod): void {
    stream.on("error", ignoreError);
    const timeout = headers["grpc-timeout"] as string | undefined;
    const parsed = timeout === undefined ? NO_TIMEOUT : parseTimeout(timeout, Number.MAX_SAFE_INTEGER);
    const call = new FastCall(fast, stream, headers, method, parsed.timeoutMs);
    stream[kCall] = call;
    stream.on("close", onCallClose);
    // A bad `grpc-timeout`: refused before the body is read (trailers-only).
    if (parsed.error) return call.refuse(ConnectError.from(parsed.error));
    fast.open.add(call);
    stream.on("data", onCallData);
    stream.on("end", onCallEnd);
  }

  return {
    handle(stream, headers) {
      if (headers[":method"] !== "POST") return false;
      const contentType = headers["content-type"];
      if (contentType === undefined || !CONTENT_TYPES.has(contentType)) return false;
      const encoding = headers["grpc-encoding"];
      if (encoding !== undefined && encoding !== "identity") return false;
      const path = headers[":path"] ?? "";
      if (path === HOP_PATH) {
        stream.on("error", ignoreError);
        new HopChannel(fast, stream as HopStream).start();
        return true;
      }
      const method = methods.get(path);
      if (!method) return false;
      start(stream as CallStream, headers, method);
      return true;
    },
    drain() {
      fast.draining = true;
      for (const channel of fast.channels) channel.maybeEnd();
    },
    abortAll(reason) {
      for (const call of fast.open) call.abort(reason);
      for (const channel of fast.channels) channel.abortAll(reason);
    },
  };
}

/** The hop channel's method (proto/portico/hop/v1/hop_service.proto). */
const HOP_PATH = `/${HopService.typeName}/${HopService.method.exchange.name}`;

const kChannel = Symbol("portico hop channel");
/** What a channel's envelope may add to a call's message: its method and metadata. */
const ENVELOPE_ROOM = 64 * 1024;
type HopStream = ServerHttp2Stream & { [kChannel]: HopChannel };

function onChannelData(this: HopStream, chunk: Buffer): void {
  this[kChannel].data(chunk);
}
function onChannelEnd(this: HopStream): void {
  this[kChannel].inputEnded();
}
function onChannelClose(this: HopStream): void {
  this[kChannel].closed();
}
function onChannelWantTrailers(this: HopStream): void {
  this.sendTrailers(OK_TRAILERS);
}

/** Metadata pairs of `fields` (a value given as a list gives one pair per value). */
function pairsOf(fields: OutgoingHttpHeaders, into: Array<[string, string]> = []): Array<[string, string]> {
  for (const key of Object.keys(fields)) {
    const v = fields[key];
    if (Array.isArray(v)) for (const item of v) into.push([key, item]);
    else if (v !== undefined) into.push([key, String(v)]);
  }
  return into;
}

const OK_TRAILER_PAIRS: ReadonlyArray<[string, string]> = Object.freeze([["grpc-status", "0"]]) as ReadonlyArray<[string, string]>;
const NO_PAIRS: ReadonlyArray<[string, string]> = Object.freeze([]) as ReadonlyArray<[string, string]>;

/**
 * A hop channel (proto/portico/hop/v1/hop_service.proto): one HTTP/2 stream on which a split gateway sends many
 * unary calls. Each call runs through the same transport as a call on its own stream (the interceptor chain, its
 * own metadata, deadline and abort controller) and is answered with the bytes and status fields it would have had
 * there; only the HTTP/2 stream per call is saved. A call the core cannot start (unknown method, too large, not
 * valid protobuf) is answered with the status connect gives it on its own stream. The gateway's reset or a dropped
 * connection aborts the calls still open; `drain` (the server stopping) answers new calls `refused`.
 */
class HopChannel {
  readonly calls = new Map<number, AbortController>();
  readonly #frames: FrameReader;
  #inputEnded = false;
  #ended = false;

  constructor(
    readonly fast: FastPathState,
    readonly stream: HopStream,
  ) {
    // A call's message within readMaxBytes, and room for its envelope's metadata.
    this.#frames = new FrameReader(fast.readMaxBytes + ENVELOPE_ROOM, this);
  }

  start(): void {
    const stream = this.stream;
    stream[kChannel] = this;
    this.fast.channels.add(this);
    stream.on("close", onChannelClose);
    stream.on("data", onChannelData);
    stream.on("end", onChannelEnd);
    // Answered at once: the gateway knows the channel is served (an older core answers Unimplemented instead).
    stream.respond(RESPONSE_HEADERS, WAIT_FOR_TRAILERS);
    if (this.fast.draining) this.maybeEnd();
  }

  data(chunk: Buffer): void {
    // Ended (drained, failed): what comes after is not read; the gateway sends the calls it still has elsewhere.
    if (this.#ended) return;
    try {
      this.#frames.push(chunk);
    } catch (e) {
      // An envelope larger than a call's limit and room for its metadata: the channel is not one to keep reading.
      if (e instanceof FrameTooLarge) this.#failChannel(new ConnectError(`message size ${e.length} is larger than configured readMaxBytes ${this.fast.readMaxBytes}`, Code.ResourceExhausted));
      else throw e;
    }
  }

  /** FrameSink: one whole frame. */
  onFrame(flags: number, message: Buffer): void {
    if (this.#ended) return;
    if ((flags & 1) !== 0) return this.#failChannel(new ConnectError("received compressed message without grpc-encoding", Code.Internal));
    let call: HopCall;
    try {
      call = decodeCall(message);
    } catch (e) {
      return this.#failChannel(new ConnectError(`parse binary: ${e instanceof Error ? e.message : String(e)}`, Code.InvalidArgument));
    }
    this.#call(call);
  }

  #call(call: HopCall): void {
    const id = call.id;
    if (call.cancel) {
      this.calls.get(id)?.abort(CLIENT_CANCELED);
      return;
    }
    if (this.fast.draining) return this.#reply(encodeReplyFrame({ id, output: EMPTY, headers: [], trailers: [], refused: true }));
    if (this.calls.has(id)) return this.#replyError(id, new ConnectError(`call id ${id} is already open on this channel`, Code.InvalidArgument));
    const method = this.fast.unary.get(call.method);
    if (!method) return this.#replyError(id, new ConnectError(`${call.method} is not a unary method of this server`, Code.Unimplemented));
    if (call.input.byteLength > this.fast.readMaxBytes) {
      return this.#replyError(id, new ConnectError(`message size ${call.input.byteLength} is larger than configured readMaxBytes ${this.fast.readMaxBytes}`, Code.ResourceExhausted));
    }
    const bad = badMetadata(call.headers);
    if (bad !== undefined) return this.#replyError(id, new ConnectError(`the ${JSON.stringify(bad)} metadata is not a valid gRPC header`, Code.InvalidArgument));
    let input;
    try {
      input = codecOf(method.input).decode(call.input);
    } catch (e) {
      return this.#replyError(id, new ConnectError(`parse binary: ${e instanceof Error ? e.message : String(e)}`, Code.InvalidArgument));
    }
    const ac = new LightAbortController();
    this.calls.set(id, ac);
    void this.#run(id, method, ac, call, input);
  }

  /** Runs one call and answers it; whatever it throws, synchronously or not, is its answer's status. */
  async #run(id: number, method: DescMethod, ac: AbortController, call: HopCall, input: unknown): Promise<void> {
    let frame: Buffer;
    try {
      const res = await this.fast.transport.unary(method as never, ac.signal, call.timeoutMs || undefined, call.headers, input as never);
      const fields = responseFields(res);
      frame = encodeReplyFrame({
        id,
        output: codecOf(method.output).encode(res.message as object),
        headers: fields.header ? pairsOf(fieldsOf(fields.header, {})) : (NO_PAIRS as Array<[string, string]>),
        trailers: fields.trailer ? pairsOf(statusFields(undefined, fieldsOf(fields.trailer, {}))) : (OK_TRAILER_PAIRS as Array<[string, string]>),
        refused: false,
      });
    } catch (e) {
      frame = this.#errorFrame(id, ConnectError.from(e));
    }
    this.#finish(id, frame);
  }

  #errorFrame(id: number, err: ConnectError): Buffer {
    return encodeReplyFrame({ id, output: EMPTY, headers: [], trailers: pairsOf(statusFields(err, {})), refused: false });
  }

  #replyError(id: number, err: ConnectError): void {
    this.#reply(this.#errorFrame(id, err));
  }

  #finish(id: number, frame: Buffer): void {
    this.calls.delete(id);
    this.#reply(frame);
    this.maybeEnd();
  }

  #reply(frame: Buffer): void {
    const stream = this.stream;
    if (this.#ended || stream.destroyed || stream.closed) return;
    // Not paced: answers are small and whole (a unary call's), and the gateway reads the channel without pause.
    stream.write(frame);
  }

  inputEnded(): void {
    this.#inputEnded = true;
    this.maybeEnd();
  }

  /** Ends the channel (status OK) when no more calls will come or start and none is open. */
  maybeEnd(): void {
    if (this.#ended || this.calls.size > 0 || !(this.#inputEnded || this.fast.draining)) return;
    this.#ended = true;
    this.fast.channels.delete(this);
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return;
    stream.on("wantTrailers", onChannelWantTrailers);
    stream.end();
  }

  /** A channel that cannot be read on: its calls aborted, the stream ended with `err`'s status. */
  #failChannel(err: ConnectError): void {
    this.#ended = true;
    this.fast.channels.delete(this);
    this.abortAll(CLIENT_CANCELED);
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return;
    const trailers = statusFields(err, {});
    stream.on("wantTrailers", function (this: ServerHttp2Stream) {
      this.sendTrailers(trailers);
    });
    stream.end();
  }

  /** The stream closed (the gateway reset it, or the connection dropped): the calls still open are aborted. */
  closed(): void {
    this.#ended = true;
    this.fast.channels.delete(this);
    this.abortAll(CLIENT_CANCELED);
  }

  abortAll(reason: unknown): void {
    for (const ac of this.calls.values()) ac.abort(reason);
  }
}

/**
 * The first metadata name that an HTTP/2 request could not carry as a gRPC header (a name outside gRPC's lowercase
 * set, a value outside printable ASCII): a call on its own stream never brings one, so neither may a channel's call.
 */
function badMetadata(headers: Record<string, string>): string | undefined {
  for (const k of Object.keys(headers)) {
    if (!LEGAL_KEY.test(k)) return k;
    if (!PRINTABLE_ASCII.test(headers[k]!)) return k;
  }
  return undefined;
}

/** The abort reason of a call its gateway cancelled, or whose channel closed. */
const CLIENT_CANCELED = new ConnectError("the client cancelled the call", Code.Canceled);

/**
 * Puts `fastPath` in front of `server`'s request handling: its HTTP/2 streams are offered to it first, and the
 * ones it does not take go to the listeners the server had (Node's compat layer, then Fastify and Connect).
 */
export function installGrpcFastPath(server: Http2Server, fastPath: GrpcFastPath): void {
  const listeners = server.listeners("stream") as Array<(...args: unknown[]) => void>;
  if (listeners.length === 0) throw new Error("grpc fast path: the server has no stream listener to pass calls on to");
  server.removeAllListeners("stream");
  server.on("stream", function (this: Http2Server, stream: ServerHttp2Stream, headers: IncomingHttpHeaders, ...rest: unknown[]) {
    if (fastPath.handle(stream, headers)) return;
    for (const l of listeners) l.call(this, stream, headers, ...rest);
  });
}
