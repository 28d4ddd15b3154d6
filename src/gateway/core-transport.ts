/**
 * The split gateway's transport to the core: one gRPC channel per core URL (@grpc/grpc-js, one HTTP/2
 * connection kept open; src/gateway/grpc-js-transport.ts). With several
 * URLs (`--core a,b` / PORTICO_CORE_URL=a,b) a call that cannot reach the current core (connection
 * refused, unknown host, unreachable) is sent to the next one, which then stays current. A call that
 * reached a core is never repeated elsewhere: only a refused connection fails over.
 */
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { parseCoreUrls } from "../lib/core-urls.js";
import { withTraceHeaders } from "../lib/tracing.js";
import { createGrpcJsTransport } from "./grpc-js-transport.js";

const UNREACHABLE = new Set(["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN"]);

/** True when the call failed before reaching the core. */
function unreachable(err: unknown): boolean {
  if (!(err instanceof ConnectError) || err.code !== Code.Unavailable) return false;
  for (let e: unknown = err; e; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && UNREACHABLE.has(code)) return true;
    if (e instanceof Error && /ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ENETUNREACH/.test(e.message)) return true;
    if (e === (e as { cause?: unknown }).cause) break;
  }
  return false;
}

/** The transports createCoreTransport made. */
const overTheWire = new WeakSet<Transport>();

/**
 * True for a transport to a core over the wire: chat request bodies go to it as the JSON text the gateway
 * received (`body_json`), which costs far less than a `google.protobuf.Struct` to send and to read. In
 * process the parsed object is handed over as is. Deployments update the core before the gateway: a core
 * that predates `body_json` refuses such requests for their missing body.
 */
export function sendsJsonBodies(transport: Transport): boolean {
  return overTheWire.has(transport);
}

/** `opts.tracing`: tracing is on, so each call's trace context (src/gateway/rpc.ts) goes as W3C `traceparent` metadata. */
export function createCoreTransport(coreUrl: string, opts: { tracing?: boolean } = {}): Transport {
  const transports = parseCoreUrls(coreUrl, "PORTICO_CORE_URL").map((baseUrl) => {
    const t = createGrpcJsTransport({ baseUrl, pingIntervalMs: 10_000, idleConnectionTimeoutMs: 60_000 });
    return opts.tracing ? withTraceHeaders(t) : t;
  });
  if (transports.length === 1) return mark(transports[0]!);
  let current = 0;
  async function withFailover<T>(call: (t: Transport) => Promise<T>): Promise<T> {
    const start = current;
    for (let i = 0; ; i++) {
      const index = (start + i) % transports.length;
      try {
        const out = await call(transports[index]!);
        current = index;
        return out;
      } catch (err) {
        if (i + 1 >= transports.length || !unreachable(err)) throw err;
      }
    }
  }
  return mark({
    unary(method, signal, timeoutMs, header, input, contextValues) {
      return withFailover((t) => t.unary(method, signal, timeoutMs, header, input, contextValues));
    },
    async stream(method, signal, timeoutMs, header, input, contextValues) {
      if (method.methodKind === "bidi_streaming" || method.methodKind === "client_streaming") {
        return transports[current]!.stream(method, signal, timeoutMs, header, input, contextValues);
      }
      // Server streaming: one request message, kept so that a second core can be sent it.
      const messages: typeof input extends AsyncIterable<infer M> ? M[] : never = [];
      for await (const m of input) messages.push(m);
      return withFailover((t) =>
        t.stream(method, signal, timeoutMs, header, (async function* () {
          yield* messages;
        })(), contextValues),
      );
    },
  });
}

function mark(transport: Transport): Transport {
  overTheWire.add(transport);
  return transport;
}
