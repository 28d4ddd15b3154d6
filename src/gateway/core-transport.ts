/**
 * The split gateway's transport to the core: one HTTP/2 session per core URL kept open, a gRPC
 * client on node:http2 (src/gateway/h2-grpc-transport.ts), its unary calls on the hop channel
 * (src/gateway/hop-channel.ts; `hopChannel: false`: a stream per call, as before). With several
 * URLs (`--core a,b` / PORTICO_CORE_URL=a,b) a call that cannot reach the current core (connection
 * refused, unknown host, unreachable) is sent to the next one, which then stays current. A call that
 * reached a core is never repeated elsewhere: only a refused connection fails over.
 */
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { parseCoreUrls } from "../lib/core-urls.js";
import { withTraceHeaders } from "../lib/tracing.js";
import { createH2GrpcTransport } from "./h2-grpc-transport.js";
import { createHopChannel } from "./hop-channel.js";

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

/**
 * `opts.tracing`: tracing is on, so each call's trace context (src/gateway/rpc.ts) goes as W3C `traceparent` metadata.
 * A gateway on this transport is built with `coreOverTheWire: true` (src/gateway/app.ts): chat and dialect bodies go as `body_json`.
 */
export function createCoreTransport(coreUrl: string, opts: { tracing?: boolean; hopChannel?: boolean } = {}): Transport {
  const transports = parseCoreUrls(coreUrl, "PORTICO_CORE_URL").map((baseUrl) => {
    const t = createH2GrpcTransport({
      baseUrl,
      pingIntervalMs: 10_000,
      idleConnectionTimeoutMs: 60_000,
      ...(opts.hopChannel === false ? {} : { unaryChannel: createHopChannel }),
    });
    return opts.tracing ? withTraceHeaders(t) : t;
  });
  if (transports.length === 1) return transports[0]!;
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
  return {
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
  };
}
