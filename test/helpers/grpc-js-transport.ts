/**
 * The @grpc/grpc-js client the split gateway used for the hop to the core until src/gateway/h2-grpc-transport.ts
 * (node:http2) replaced it; kept as the reference that client's tests and `bench/split-hop.ts --grpc-js` compare
 * it with. A Connect `Transport` (unary and server streaming)
 * on @grpc/grpc-js's channel, messages encoded with protobuf-es. The gateway calls it exactly as it calls
 * connect-node's gRPC transport (and the in-process one), for a fraction of the CPU per call: connect-node's
 * client runs every call through its async-iterable pipeline, links two abort controllers and sets up the
 * HTTP/2 stream through Node's compat wrappers (bench/README.md, "The split path on a lean gRPC client").
 *
 * Same wire and same behaviour as connect-node's gRPC transport for the gateway's calls:
 * - request headers become metadata (`-bin` ones decoded from base64); `timeoutMs` becomes the call's deadline
 *   (grpc-timeout on the wire, DeadlineExceeded locally when it passes);
 * - the caller's signal cancels the call (the core sees the stream reset), and the call rejects with
 *   `ConnectError.from(signal.reason, Code.Canceled)`, as connect's does;
 * - a non-OK status becomes a ConnectError with the code, the message, the details of `grpc-status-details-bin`
 *   (as connect's `findTrailerError` decodes them) and the trailers then the response headers as metadata;
 * - a stream's messages come out in order and all of them before its final status: the call reads ahead into a
 *   queue of at most READ_AHEAD messages (grpc-js reports an error status as soon as it arrives, so the messages
 *   must already be read by then), and stops reading (HTTP/2 flow control holds the core) while the queue is full
 *   (the queue: src/gateway/read-ahead.ts, shared with the node:http2 client);
 * - a reader that stops (`return()`) cancels the call.
 * Client and bidi streaming are not used by the gateway and answer Unimplemented.
 */
import type { DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type Transport, type StreamResponse, type UnaryResponse } from "@connectrpc/connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import * as grpc from "@grpc/grpc-js";
import { ReadAhead } from "../../src/gateway/read-ahead.js";
import { codecOf } from "../../src/lib/proto-codec.js";

type Call = ReturnType<grpc.Channel["createCall"]>;

export interface GrpcJsTransportOptions {
  /** `http://host:port` (cleartext HTTP/2) or `https://host:port` (TLS, Node's CAs). */
  baseUrl: string;
  /** HTTP/2 PING every this many ms while calls are open (connect-node's pingIntervalMs). */
  pingIntervalMs?: number;
  /** Close the connection after this many ms without calls. */
  idleConnectionTimeoutMs?: number;
}

/** The channel's options: no size limits of the client's own (the core limits what it accepts), keepalive, idle close, short reconnect backoff. */
function channelOptions(o: GrpcJsTransportOptions): grpc.ChannelOptions {
  return {
    "grpc.max_receive_message_length": -1,
    "grpc.max_send_message_length": -1,
    ...(o.pingIntervalMs ? { "grpc.keepalive_time_ms": o.pingIntervalMs, "grpc.keepalive_timeout_ms": 15_000 } : {}),
    ...(o.idleConnectionTimeoutMs ? { "grpc.client_idle_timeout_ms": o.idleConnectionTimeoutMs } : {}),
    // A core that comes back is dialled again within a second (grpc-js's default backoff grows to two minutes).
    "grpc.initial_reconnect_backoff_ms": 250,
    "grpc.max_reconnect_backoff_ms": 1_000,
    // Connect's client does not retry either; grpc-js still replays a call the core never saw (refused stream).
    "grpc.enable_retries": 0,
  };
}

const PRINTABLE_ASCII = /^[ -~]*$/;

function metadataOf(header: ConstructorParameters<typeof Headers>[0]): grpc.Metadata {
  const md = new grpc.Metadata();
  if (!header) return md;
  const add = (value: string, key: string) => {
    const k = key.toLowerCase();
    if (k.endsWith("-bin")) md.add(k, Buffer.from(value, "base64"));
    else if (PRINTABLE_ASCII.test(value)) md.add(k, value);
    // gRPC metadata is printable ASCII: a header forwarded with other bytes is refused, naming it (400).
    else throw new ConnectError(`the ${k} header has characters outside printable ASCII`, Code.InvalidArgument);
  };
  if (header instanceof Headers) header.forEach(add);
  else if (Array.isArray(header)) for (const [k, v] of header) add(v!, k!);
  else for (const k of Object.keys(header)) add((header as Record<string, string>)[k]!, k);
  return md;
}

/** grpc-js metadata as fetch Headers (`-bin` values base64, as connect-node presents them). */
function headersOf(md: grpc.Metadata | undefined, into = new Headers()): Headers {
  if (!md) return into;
  const map = md.toJSON();
  for (const key of Object.keys(map)) {
    for (const v of map[key]!) into.append(key, typeof v === "string" ? v : v.toString("base64"));
  }
  return into;
}

/**
 * A call's response, its header (and a unary call's trailer) as fetch Headers built when first read: the gateway
 * reads neither on success (the error path builds its own, errorOf), and building them cost a Headers object
 * and a metadata walk each per call. A stream's trailer is a Headers object filled when its status arrives.
 */
class CallResponse {
  #header: Headers | undefined;
  #trailer: Headers | undefined;
  readonly #headerMd: grpc.Metadata | undefined;
  readonly #trailerMd: grpc.Metadata | undefined;
  constructor(
    readonly stream: boolean,
    readonly method: DescMethod,
    readonly message: unknown,
    headerMd: grpc.Metadata | undefined,
    trailer: Headers | grpc.Metadata | undefined,
  ) {
    this.#headerMd = headerMd;
    if (trailer instanceof Headers) this.#trailer = trailer;
    else this.#trailerMd = trailer;
  }
  get service(): DescService {
    return this.method.parent;
  }
  get header(): Headers {
    return (this.#header ??= headersOf(this.#headerMd));
  }
  get trailer(): Headers {
    return (this.#trailer ??= headersOf(this.#trailerMd));
  }
}

/** The ConnectError a non-OK status stands for, as connect-node's gRPC transport builds it. */
function errorOf(status: grpc.StatusObject, header: Headers | undefined): ConnectError {
  const trailer = headersOf(status.metadata);
  let err = trailer.has("grpc-status-details-bin") ? findTrailerError(trailer) : undefined;
  if (!err) {
    const code = status.code in Code ? (status.code as number as Code) : Code.Unknown;
    // Errors grpc-js raises itself (connection refused, dropped) carry their cause in the message only.
    const cause = code === Code.Unavailable ? new Error(status.details) : undefined;
    err = new ConnectError(status.details, code, trailer, undefined, cause);
  }
  header?.forEach((value, key) => err.metadata.append(key, value));
  return err;
}

/** A message (or an init object) as bytes: src/lib/proto-codec.ts, protobuf-es's bytes without its reflection for the chat messages. */
function serialize(schema: DescMessage, input: unknown): Buffer {
  return codecOf(schema).encode(input as object);
}

function pathOf(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

function abortError(signal: AbortSignal): ConnectError {
  return ConnectError.from(signal.reason, Code.Canceled);
}

export function createGrpcJsTransport(options: GrpcJsTransportOptions): Transport & { close(): void } {
  const url = new URL(options.baseUrl);
  const tls = url.protocol === "https:";
  const target = `${url.hostname.includes(":") && !url.hostname.startsWith("[") ? `[${url.hostname}]` : url.hostname}:${url.port || (tls ? 443 : 80)}`;
  const client = new grpc.Client(target, tls ? grpc.credentials.createSsl() : grpc.credentials.createInsecure(), channelOptions(options));
  const channel = client.getChannel();

  const open = (method: DescMethod, timeoutMs: number | undefined): Call =>
    channel.createCall(pathOf(method), timeoutMs !== undefined && timeoutMs > 0 ? Date.now() + timeoutMs : Infinity, undefined, null, null);

  return {
    close: () => client.close(),

    unary(method, signal, timeoutMs, header, input) {
      if (signal?.aborted) return Promise.reject(abortError(signal));
      let md: grpc.Metadata;
      try {
        md = metadataOf(header);
      } catch (err) {
        return Promise.reject(err);
      }
      return new Promise<never>((resolve, reject) => {
        const call = open(method, timeoutMs);
        let responseHeader: grpc.Metadata | undefined;
        let message: unknown;
        let settled = false;
        const onAbort = () => {
          if (settled) return;
          settled = true;
          call.cancelWithStatus(grpc.status.CANCELLED, "Cancelled on client");
          reject(abortError(signal!));
        };
        signal?.addEventListener("abort", onAbort, { once: true });
        call.start(md, {
          onReceiveMetadata(m) {
            responseHeader = m;
          },
          onReceiveMessage(bytes: Buffer | null) {
            if (bytes === null || message !== undefined) return;
            try {
              message = codecOf(method.output).decode(bytes);
            } catch (e) {
              call.cancelWithStatus(grpc.status.INTERNAL, `Response message parsing error: ${e instanceof Error ? e.message : String(e)}`);
            }
          },
          onReceiveStatus(status) {
            signal?.removeEventListener("abort", onAbort);
            if (settled) return;
            settled = true;
            if (status.code !== grpc.status.OK) return reject(errorOf(status, responseHeader && headersOf(responseHeader)));
            if (message === undefined) return reject(new ConnectError("protocol error: missing output message for unary method", Code.Unimplemented));
            resolve(new CallResponse(false, method, message, responseHeader, status.metadata) as unknown as UnaryResponse as never);
          },
        });
        call.startRead();
        call.sendMessageWithContext({}, serialize(method.input, input));
        call.halfClose();
      });
    },

    async stream(method, signal, timeoutMs, header, input) {
      if (method.methodKind !== "server_streaming") throw new ConnectError(`${method.methodKind} is not supported by the core client`, Code.Unimplemented);
      const first = await input[Symbol.asyncIterator]().next();
      if (signal?.aborted) throw abortError(signal);
      const md = metadataOf(header);
      const call = open(method, timeoutMs);
      /** Filled when the status arrives (as connect-node's). */
      const trailer = new Headers();
      let responseHeader: grpc.Metadata | undefined;
      let status: grpc.StatusObject | undefined;
      /** The reader's side: messages read ahead one `startRead()` at a time, the outcome after them. */
      const messages = new ReadAhead<unknown>({
        more: () => {
          if (status === undefined) call.startRead();
        },
        cancel: () => call.cancelWithStatus(grpc.status.CANCELLED, "Cancelled on client"),
        ended: signal && (() => signal.removeEventListener("abort", onAbort)),
      });
      const onAbort = () => {
        call.cancelWithStatus(grpc.status.CANCELLED, "Cancelled on client");
        messages.finish(abortError(signal!));
      };
      signal?.addEventListener("abort", onAbort, { once: true });

      await messages.opening(() => {
        call.start(md, {
          onReceiveMetadata(m) {
            responseHeader = m;
            messages.opened();
          },
          onReceiveMessage(bytes: Buffer) {
            if (messages.done) return;
            let message: unknown;
            try {
              message = codecOf(method.output).decode(bytes);
            } catch (e) {
              call.cancelWithStatus(grpc.status.INTERNAL, `Response message parsing error: ${e instanceof Error ? e.message : String(e)}`);
              return;
            }
            messages.push(message);
          },
          onReceiveStatus(s) {
            status = s;
            headersOf(s.metadata, trailer);
            messages.finish(s.code === grpc.status.OK ? null : errorOf(s, responseHeader && headersOf(responseHeader)));
          },
        });
        call.sendMessageWithContext({}, serialize(method.input, first.value));
        call.halfClose();
        messages.pull();
      });

      return new CallResponse(true, method, messages, responseHeader, trailer) as unknown as StreamResponse as never;
    },
  };
}
