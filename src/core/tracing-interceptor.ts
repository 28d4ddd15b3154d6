/**
 * One server span per core RPC (docs/operations.md, "Tracing"), installed only when tracing is on. Its parent is
 * the caller's W3C `traceparent` (and `tracestate`) request header, which the gateway sends on every core call
 * (src/gateway/rpc.ts), over gRPC and in process alike. The handler runs in the span's context; for a stream,
 * so does each read of its messages (where a streaming handler's code runs), and the span ends with the stream.
 * Bidi streams (intern host links, open for hours) get none.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, propagation, trace, type Context, type Span, type TextMapGetter } from "@opentelemetry/api";
import { ConnectError, type Interceptor } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { tracer } from "../lib/tracing.js";

const headerGetter: TextMapGetter<Headers> = {
  get: (carrier, key) => carrier.get(key) ?? undefined,
  keys: (carrier) => [...carrier.keys()],
};

function failed(span: Span, err: unknown): void {
  const code = err instanceof ConnectError ? codeToString(err.code) : "unknown";
  span.setAttribute("rpc.connect_rpc.error_code", code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: code });
}

/** `source` read in `ctx`, calling `onEnd` once when it ends, fails or its reader stops. */
function inContext<T>(source: AsyncIterable<T>, ctx: Context, onEnd: (err?: unknown) => void): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator]() {
      const it = context.with(ctx, () => source[Symbol.asyncIterator]());
      let ended = false;
      const end = (err?: unknown) => {
        if (ended) return;
        ended = true;
        onEnd(err);
      };
      return {
        next: () =>
          context.with(ctx, () => it.next()).then(
            (r) => {
              if (r.done) end();
              return r;
            },
            (err: unknown) => {
              end(err);
              throw err;
            },
          ),
        async return(value?: unknown) {
          try {
            return (await it.return?.(value as never)) ?? { done: true, value: undefined as never };
          } finally {
            end();
          }
        },
      };
    },
  };
}

export function createTracingInterceptor(): Interceptor {
  const t = tracer();
  return (next) => async (req) => {
    // A bidi stream is an intern host's link, open for hours: no span (its turns are not requests).
    if (req.method.methodKind === "bidi_streaming") return next(req);
    const parent = propagation.extract(ROOT_CONTEXT, req.header, headerGetter);
    const span = t.startSpan(
      `${req.service.typeName}/${req.method.name}`,
      {
        kind: SpanKind.SERVER,
        attributes: { "rpc.system": "connect_rpc", "rpc.service": req.service.typeName, "rpc.method": req.method.name },
      },
      parent,
    );
    const ctx = trace.setSpan(parent, span);
    let res;
    try {
      res = await context.with(ctx, () => next(req));
    } catch (err) {
      failed(span, err);
      span.end();
      throw err;
    }
    if (!res.stream) {
      span.end();
      return res;
    }
    return {
      ...res,
      message: inContext(res.message, ctx, (err) => {
        if (err !== undefined) failed(span, err);
        span.end();
      }),
    };
  };
}
