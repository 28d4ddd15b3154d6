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
 */
import type { ServerHttp2Stream, IncomingHttpHeaders, OutgoingHttpHeaders, Http2Server } from "node:http2";
import type { DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, type Transport } from "@connectrpc/connect";
import { parseTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { responseFields } from "./direct-transport.js";
import { oneValue } from "../lib/one-value.js";
import { LightAbortController } from "../lib/light-abort.js";
import { codecOf } from "../lib/proto-codec.js";

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
  /** Aborts the calls still open (the server is stopping; connect-node's handler does the same after its shutdown timeout). */
  abortAll(reason: unknown): void;
}

export function createGrpcFastPath(routes: (router: ConnectRouter) => void, transport: Transport, readMaxBytes: number): GrpcFastPath {
  const methods = methodsOf(routes);
  const open = new Set<{ abort(reason?: unknown): void }>();

  async function serve(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, method: DescMethod): Promise<void> {
    // A light controller (src/lib/light-abort.ts): Node's makes its signal in a way that outlives young collections.
    const ac = new LightAbortController();
    open.add(ac);
    let finished = false;
    const onClose = () => {
      if (!finished) ac.abort(new ConnectError("the client closed the stream", Code.Canceled));
    };
    stream.once("close", onClose);
    stream.on("error", () => undefined); // a reset stream: reported through "close"
    let sentHeaders = false;
    const respondHeaders = (extra: Headers | undefined, trailersOnly?: OutgoingHttpHeaders) => {
      if (stream.destroyed || stream.closed) return false;
      const h = fieldsOf(extra, { ":status": 200, "content-type": "application/grpc+proto" });
      if (trailersOnly) {
        stream.respond(Object.assign(h, trailersOnly), { endStream: true });
        return false;
      }
      stream.respond(h, { waitForTrailers: true });
      sentHeaders = true;
      return true;
    };
    const fail = (err: ConnectError, header: Headers | undefined) => {
      if (stream.destroyed || stream.closed) return;
      if (!sentHeaders) respondHeaders(header, statusFields(err, {}));
      else {
        stream.once("wantTrailers", () => stream.sendTrailers(statusFields(err, {})));
        stream.end();
      }
    };
    try {
      // The request: exactly one message frame within readMaxBytes.
      const parsed = parseTimeout((headers["grpc-timeout"] as string | undefined) ?? null, Number.MAX_SAFE_INTEGER);
      if (parsed.error) throw parsed.error;
      // The body read with listeners (a for-await on the stream costs an async iterator and promise turns per call).
      const { chunks, size, tooLarge } = await readBody(stream, readMaxBytes + 5);
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      const length = body.byteLength >= 5 ? body.readUInt32BE(1) : -1;
      if (tooLarge || length > readMaxBytes) throw new ConnectError(`message size ${tooLarge ? size - 5 : length} is larger than configured readMaxBytes ${readMaxBytes}`, Code.ResourceExhausted);
      if (length < 0 || body.byteLength < 5 + length) throw new ConnectError("protocol error: missing input message for unary method", body.byteLength === 0 ? Code.Unimplemented : Code.InvalidArgument);
      if (body.byteLength > 5 + length) throw new ConnectError("protocol error: received extra input message for unary method", Code.Unimplemented);
      if ((body[0]! & 1) !== 0) throw new ConnectError("received compressed message without grpc-encoding", Code.Internal);
      let input;
      try {
        input = codecOf(method.input).decode(body.subarray(5));
      } catch (e) {
        throw new ConnectError(`parse binary: ${e instanceof Error ? e.message : String(e)}`, Code.InvalidArgument);
      }
      const header = requestHeaders(headers);
      if (method.methodKind === "unary") {
        const res = await transport.unary(method as never, ac.signal, parsed.timeoutMs, header, input as never);
        // The response's header and trailer only if someone set them (reading them makes two Headers per call).
        const fields = responseFields(res);
        if (!respondHeaders(fields.header)) return;
        const trailer = fields.trailer;
        stream.once("wantTrailers", () => stream.sendTrailers(statusFields(undefined, fieldsOf(trailer, {}))));
        finished = true;
        stream.end(frame(method.output, res.message));
        return;
      }
      const res = await transport.stream(method as never, ac.signal, parsed.timeoutMs, header, oneValue(input as never));
      const it = res.message[Symbol.asyncIterator]();
      try {
        for (;;) {
          const r = await it.next();
          if (r.done) break;
          if (!sentHeaders && !respondHeaders(res.header)) return;
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
      } catch (e) {
        throw e;
      } finally {
        if (ac.signal.aborted || stream.destroyed || stream.closed) await it.return?.().catch(() => undefined);
      }
      if (!sentHeaders && !respondHeaders(res.header)) return;
      const trailer = res.trailer;
      stream.once("wantTrailers", () => stream.sendTrailers(statusFields(undefined, fieldsOf(trailer, {}))));
      finished = true;
      stream.end();
    } catch (e) {
      finished = true;
      fail(ConnectError.from(e), undefined);
    } finally {
      finished = true;
      open.delete(ac);
      stream.off("close", onClose);
    }
  }

  return {
    handle(stream, headers) {
      if (headers[":method"] !== "POST") return false;
      const contentType = headers["content-type"];
      if (contentType === undefined || !CONTENT_TYPES.has(contentType)) return false;
      const encoding = headers["grpc-encoding"];
      if (encoding !== undefined && encoding !== "identity") return false;
      const method = methods.get(headers[":path"] ?? "");
      if (!method) return false;
      void serve(stream, headers, method);
      return true;
    },
    abortAll(reason) {
      for (const ac of open) ac.abort(reason);
    },
  };
}

/** The request body's chunks, up to `limit` bytes (then `tooLarge`, and the rest is not read). */
function readBody(stream: ServerHttp2Stream, limit: number): Promise<{ chunks: Buffer[]; size: number; tooLarge: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (tooLarge: boolean) => {
      stream.off("data", onData);
      stream.off("end", onEnd);
      stream.off("close", onClose);
      resolve({ chunks, size, tooLarge });
    };
    const onData = (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size > limit) done(true);
      else chunks.push(chunk);
    };
    const onEnd = () => done(false);
    const onClose = () => {
      stream.off("data", onData);
      stream.off("end", onEnd);
      reject(new ConnectError("the client closed the stream", Code.Canceled));
    };
    stream.on("data", onData);
    stream.once("end", onEnd);
    stream.once("close", onClose);
  });
}

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
