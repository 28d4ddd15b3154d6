/**
 * One server span per core RPC (docs/operations.md, "Tracing"), installed only when tracing is on. Its parent is
 * the gateway request's span: in process (`portico serve`'s direct transport) handed over as is in the call's context
 * values (src/lib/tracing.ts `callParentSpan`), over gRPC the caller's W3C `traceparent` (and `tracestate`) request
 * headers, which the split gateway sends on every core call (`withTraceHeaders`). With a parent-based sampler a
 * parent that is not sampled means no span at all (what the sampler would decide), so no span object is made for it.
 * A recording span is filed under the call's AbortSignal
 * (src/lib/tracing.ts `setRequestSpan`: no context manager runs), where the chat pipeline's trace stage finds it: a
 * chat RPC's span is also its GenAI request span (the stage names it and adds the `gen_ai.*` attributes; one span
 * fewer per request than a child of its own). For a stream the span ends with the stream. Bidi streams (intern host
 * links, open for hours) get none.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, propagation, trace, type Context, type Span, type SpanOptions, type TextMapGetter } from "@opentelemetry/api";
import { ConnectError, type Interceptor } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { callParentSpan, parentContext, setRequestSpan, tracer } from "../lib/tracing.js";
import { PULL, type Pullable, type Pulled } from "../lib/pull.js";

const headerGetter: TextMapGetter<Headers> = {
  get: (carrier, key) => carrier.get(key) ?? undefined,
  keys: (carrier) => [...carrier.keys()],
};

function failed(span: Span, err: unknown): void {
  const code = err instanceof ConnectError ? codeToString(err.code) : "unknown";
  span.setAttribute("rpc.connect_rpc.error_code", code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: code });
}

/**
 * `source`, ending `span` once when it ends, fails or its reader stops: one object per stream (iterable and iterator
 * at once, no closure per event), each event passed on through one `then` on the source's promise.
 */
class SpanEndingStream<T> implements AsyncIterable<T>, AsyncIterator<T> {
  private it: AsyncIterator<T> | undefined;
  private ended = false;
  constructor(
    private readonly source: AsyncIterable<T>,
    private readonly span: Span,
  ) {}

  [Symbol.asyncIterator](): AsyncIterator<T> {
    this.it = this.source[Symbol.asyncIterator]();
    return this;
  }

  next(): Promise<IteratorResult<T>> {
    return this.it!.next().then(this.passed, this.threw);
  }

  /** A result at hand passed on at once (src/lib/pull.ts). */
  [PULL](): Pulled<T> {
    let r: Pulled<T>;
    try {
      const it = this.it!;
      const p = (it as Partial<Pullable<T>>)[PULL];
      r = p !== undefined ? p.call(it) : it.next();
    } catch (err) {
      return this.threw(err);
    }
    return r instanceof Promise ? r.then(this.passed, this.threw) : this.passed(r);
  }

  async return(value?: unknown): Promise<IteratorResult<T>> {
    try {
      return (await this.it?.return?.(value as never)) ?? { done: true, value: undefined as never };
    } finally {
      this.end(undefined);
    }
  }

  private readonly passed = (r: IteratorResult<T>): IteratorResult<T> => {
    if (r.done) this.end(undefined);
    return r;
  };

  private readonly threw = (err: unknown): never => {
    this.end(err);
    throw err;
  };

  private end(err: unknown): void {
    if (this.ended) return;
    this.ended = true;
    if (err !== undefined) failed(this.span, err);
    this.span.end();
  }
}

/**
 * A method's span name and its three `rpc.*` attributes, made once per method. The attributes are set on the span
 * once it is recording rather than given to `startSpan` (which copies them twice through `sanitizeAttributes`
 * before setting them one by one, as `setAttribute` does; the sampler reads none).
 */
interface RpcSpan {
  name: string;
  service: string;
  method: string;
}
const rpcSpans = new WeakMap<object, RpcSpan>();
const RPC_OPTIONS: SpanOptions = { kind: SpanKind.SERVER };

function rpcSpanOf(req: { service: { typeName: string }; method: { name: string } }): RpcSpan {
  let s = rpcSpans.get(req.method);
  if (!s) {
    const { typeName } = req.service;
    s = { name: `${typeName}/${req.method.name}`, service: typeName, method: req.method.name };
    rpcSpans.set(req.method, s);
  }
  return s;
}

/** The call's parent context: the span handed over in process, else the W3C headers a gRPC caller sent. */
function parentOf(req: { header: Headers; contextValues: Parameters<typeof callParentSpan>[0] }): Context {
  const span = callParentSpan(req.contextValues);
  if (span) return parentContext(span);
  return req.header.has("traceparent") ? propagation.extract(ROOT_CONTEXT, req.header, headerGetter) : ROOT_CONTEXT;
}

/** `sampler.parentBased`: the configured sampler follows the parent's sampled flag (OTEL_TRACES_SAMPLER `parentbased_*`, the default). */
export function createTracingInterceptor(sampler: { parentBased: boolean } = { parentBased: false }): Interceptor {
  const t = tracer();
  return (next) => (req) => {
    // A bidi stream is an intern host's link, open for hours: no span (its turns are not requests).
    if (req.method.methodKind === "bidi_streaming") return next(req);
    const parent = parentOf(req);
    if (sampler.parentBased) {
      // A parent that is not sampled: the parent-based sampler records nothing below it.
      const sc = trace.getSpanContext(parent);
      if (sc && (sc.traceFlags & TraceFlags.SAMPLED) === 0 && trace.isSpanContextValid(sc)) return next(req);
    }
    const rpc = rpcSpanOf(req);
    const span = t.startSpan(rpc.name, RPC_OPTIONS, parent);
    // Not sampled: nothing to record or end (a non-recording span holds no state), and nothing filed, so the trace
    // stage and the attempts make no span either.
    if (!span.isRecording()) return next(req);
    span.setAttribute("rpc.system", "connect_rpc");
    span.setAttribute("rpc.service", rpc.service);
    span.setAttribute("rpc.method", rpc.method);
    setRequestSpan(req.signal, span);
    // No async layer of its own: the span ends in callbacks on the handler's promise (or with its stream).
    let res;
    try {
      res = next(req);
    } catch (err) {
      res = Promise.reject(err);
    }
    return res.then(
      (r) => {
        if (!r.stream) {
          span.end();
          return r;
        }
        return { ...r, message: new SpanEndingStream(r.message, span) };
      },
      (err: unknown) => {
        failed(span, err);
        span.end();
        throw err;
      },
    );
  };
}
