/**
 * OpenTelemetry tracing (docs/operations.md, "Tracing"). Off unless an OTLP endpoint is configured
 * (src/config.ts `tracing`): then, and only then, the SDK and the OTLP exporter are loaded (dynamic imports),
 * a tracer provider with W3C trace-context propagation is registered globally, and spans are exported in
 * batches over OTLP/HTTP (protobuf or JSON). Off, the code that makes spans is not even installed (the core's
 * tracing interceptor, the chat pipeline's trace stage, the gateway's Fastify plugin); what remains is one property
 * read per core call ({@link traceCallValues} finding no span) and one WeakMap lookup per upstream attempt.
 *
 * One provider per process: `portico serve`'s core and gateway, or a test starting a split core and gateway
 * in one process, share it (counted; the last `close()` flushes and unregisters it).
 *
 * No context manager is registered (no AsyncLocalStorage: on Node 20 it runs a hook on every promise the process
 * makes, traced or not). Portico hands the trace context on explicitly instead: each core call the gateway makes on
 * behalf of a request carries the request's span in the call's context values ({@link traceCallValues},
 * src/gateway/rpc.ts). In process (`portico serve`'s direct transport) the core's tracing interceptor takes its parent
 * from there ({@link callParentSpan}: no `traceparent` formatted and parsed); over gRPC (the split gateway) the
 * transport ({@link withTraceHeaders}) writes it as the W3C `traceparent` (and `tracestate`) headers, which the
 * core reads, as it does from any other gRPC caller. The core's interceptor files its RPC span, when recording, under
 * the call's AbortSignal ({@link setRequestSpan}), where the chat pipeline's trace stage finds it, adds the GenAI
 * attributes to it and makes its attempts' spans its children ({@link requestSpan}). Parents are passed to
 * `startSpan` as a one-value context ({@link parentContext}); `context.active()` is the root context throughout.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, createContextKey as otelContextKey, propagation, trace, type Context, type Span, type TextMapSetter, type Tracer } from "@opentelemetry/api";
import { createContextKey, type ContextKey, type ContextValues, type Transport } from "@connectrpc/connect";
import type { FastifyPluginCallback, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import type { SpanProcessor } from "@opentelemetry/sdk-trace-base";
import type { EncodedBatch } from "./otlp-span-processor.js";
import type { TracingConfig } from "../config.js";

/** The instrumentation scope of every span Portico makes. */
export const TRACER_NAME = "portico";

export function tracer(): Tracer {
  return trace.getTracer(TRACER_NAME);
}

/** Where the recording span of each core call being served (its RPC span) is kept: a property of the call's AbortSignal (one per call; gone with it). */
const kRequestSpan = Symbol("portico.requestSpan");
type WithRequestSpan = { [kRequestSpan]?: Span };

/** Files `span` as the recording span of the call whose signal is `signal` (the core's tracing interceptor). */
export function setRequestSpan(signal: AbortSignal, span: Span): void {
  (signal as WithRequestSpan)[kRequestSpan] = span;
}

/** The recording span of the call whose signal is `signal` (the chat pipeline's trace stage); undefined when the call is not traced. */
export function requestSpan(signal: AbortSignal): Span | undefined {
  return (signal as WithRequestSpan)[kRequestSpan];
}

/** Where the gateway's plugin keeps a request's span (a request decoration: null until its onRequest hook ran). */
const kHttpSpan = Symbol("portico.httpSpan");
type WithSpan = { [kHttpSpan]?: Span | null };

/** The key under which @opentelemetry/api keeps a context's span (its `trace.setSpan`/`getSpan`; `Symbol.for`, so the same key). */
const SPAN_KEY = otelContextKey("OpenTelemetry Context Key SPAN");

/**
 * `span` as a parent context for `startSpan`: what `trace.setSpan(ROOT_CONTEXT, span)` gives, as one small object
 * (the API's contexts copy a Map and make three closures each).
 */
class SpanParent implements Context {
  constructor(private readonly span: Span) {}
  getValue(key: symbol): unknown {
    return key === SPAN_KEY ? this.span : undefined;
  }
  setValue(key: symbol, value: unknown): Context {
    return trace.setSpan(ROOT_CONTEXT, this.span).setValue(key, value);
  }
  deleteValue(key: symbol): Context {
    return key === SPAN_KEY ? ROOT_CONTEXT : this;
  }
}

export function parentContext(span: Span): Context {
  return new SpanParent(span);
}

/** A core call's parent span (the gateway request's), in the call's context values; never sent over the wire. */
const kCallParent = createContextKey<Span | undefined>(undefined, { description: "portico.traceParent" });
const kCallParentId = kCallParent.id;

/**
 * Context values carrying the span of the HTTP request `req` for a core call made on its behalf (src/gateway/rpc.ts);
 * undefined when tracing is off (no span on the request). An unsampled span goes too (its sampled flag unset), so that
 * the core records nothing below it.
 */
export function traceCallValues(req: object): ContextValues | undefined {
  const span = (req as WithSpan)[kHttpSpan];
  if (!span) return undefined;
  return new CallValues(span);
}

/**
 * Context values holding a call's parent span from the start: what `createContextValues().set(kCallParent, span)`
 * gives (the same storage, a key's value under its id), without three closures per object and a shape change.
 */
class CallValues implements ContextValues {
  [id: symbol]: unknown;
  constructor(span: Span) {
    this[kCallParentId] = span;
  }
  get<T>(key: ContextKey<T>): T {
    return key.id in this ? (this[key.id] as T) : key.defaultValue;
  }
  set<T>(key: ContextKey<T>, value: T): this {
    this[key.id] = value;
    return this;
  }
  delete(key: ContextKey<unknown>): this {
    delete this[key.id];
    return this;
  }
}

/** The parent span a core call was given in process (the direct transport hands the caller's context values over). */
export function callParentSpan(values: ContextValues | undefined): Span | undefined {
  return values?.get(kCallParent);
}

type HeadersInit = ConstructorParameters<typeof Headers>[0];

const headersSetter: TextMapSetter<Headers> = { set: (carrier, key, value) => carrier.set(key, value) };

/**
 * `transport` (the split gateway's gRPC client, tracing on) sending each call's parent span (from
 * {@link traceCallValues}) as W3C `traceparent` and `tracestate` request headers, which the core continues.
 */
export function withTraceHeaders<T extends Transport>(transport: T): T {
  const headersOf = (header: HeadersInit, values: ContextValues | undefined): HeadersInit => {
    const span = values?.get(kCallParent);
    if (!span) return header;
    const h = new Headers(header);
    propagation.inject(parentContext(span), h, headersSetter);
    return h;
  };
  const wrapped: Transport = {
    unary: (method, signal, timeoutMs, header, input, contextValues) => transport.unary(method, signal, timeoutMs, headersOf(header, contextValues), input, contextValues),
    stream: (method, signal, timeoutMs, header, input, contextValues) => transport.stream(method, signal, timeoutMs, headersOf(header, contextValues), input, contextValues),
  };
  // Whatever else the transport has (a `close()`) stays the transport's own.
  return Object.assign(Object.create(transport) as T, wrapped);
}

/**
 * The gateway's Fastify plugin (tracing on): one SERVER span per HTTP request, from its onRequest hook (continuing
 * the caller's `traceparent`, else a new trace) to its onResponse hook, named `<method> <route>` (the method alone
 * when no route matched), with `http.request.method`, `http.route`, `url.path` (without the query string) and
 * `http.response.status_code`; a 5xx answer sets the span's status to error. Two hooks of its own, in place of
 * @fastify/otel's plugin (which also wraps every route with onSend and onError hooks, decorates each request with a
 * function building an object per call and adds a `fastify.root` attribute to every span).
 */
const SERVER = { kind: SpanKind.SERVER };

/** `<method> <route>` span names, made once per route and method (routes are the application's, a fixed set). */
class RouteSpanNames {
  private readonly byRoute = new Map<string, Map<string, string>>();
  of(method: string, route: string): string {
    let byMethod = this.byRoute.get(route);
    if (!byMethod) this.byRoute.set(route, (byMethod = new Map()));
    let name = byMethod.get(method);
    if (name === undefined) byMethod.set(method, (name = `${method} ${route}`));
    return name;
  }
}

/**
 * Fastify's own key of a request's route context (`Symbol('fastify.context')`, not exported), found on the first
 * request: its `config.url` is `req.routeOptions.url` without the getter building a twelve-field object per read.
 * null: not found (another Fastify), `routeOptions` is read.
 */
let kRouteContext: symbol | null | undefined;

function routeOf(req: FastifyRequest): string | undefined {
  if (kRouteContext === undefined) kRouteContext = Object.getOwnPropertySymbols(req).find((s) => s.description === "fastify.context") ?? null;
  if (kRouteContext === null) return req.routeOptions.url;
  return (req as unknown as Record<symbol, { config?: { url?: string } } | undefined>)[kRouteContext]?.config?.url;
}

function httpSpans(t: Tracer): FastifyPluginCallback {
  const plugin: FastifyPluginCallback = (app, _opts, done) => {
    app.decorateRequest(kHttpSpan, null);
    // The headers the propagator reads (traceparent, tracestate, baggage): without any, extracting finds nothing.
    const fields = propagation.fields();
    const names = new RouteSpanNames();
    app.addHook("onRequest", (req, _reply, next) => {
      const route = routeOf(req);
      let parent = ROOT_CONTEXT;
      for (const f of fields) {
        if (req.headers[f] !== undefined) {
          parent = propagation.extract(ROOT_CONTEXT, req.headers);
          break;
        }
      }
      const span = t.startSpan(route ? names.of(req.method, route) : req.method, SERVER, parent);
      if (span.isRecording()) {
        span.setAttribute("http.request.method", req.method);
        if (route) span.setAttribute("http.route", route);
        const q = req.url.indexOf("?");
        span.setAttribute("url.path", q < 0 ? req.url : req.url.slice(0, q));
      }
      (req as WithSpan)[kHttpSpan] = span;
      next();
    });
    app.addHook("onResponse", (req, reply, next) => {
      const span = (req as WithSpan)[kHttpSpan];
      if (span?.isRecording()) {
        span.setAttribute("http.response.status_code", reply.statusCode);
        if (reply.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      }
      next();
    });
    done();
  };
  // Its hooks apply to the whole application (fastify-plugin's marker), not to an encapsulated child.
  (plugin as unknown as Record<symbol, unknown>)[Symbol.for("skip-override")] = true;
  return plugin;
}

export interface Tracing {
  /** The Fastify plugin making one server span per HTTP request (continuing an incoming `traceparent`). */
  fastifyPlugin(): FastifyPluginCallback;
  /** Exports what is queued and, for the last user, unregisters the provider. */
  close(): Promise<void>;
}

let shared: { refs: number; plugin: () => FastifyPluginCallback; shutdown: () => Promise<void> } | undefined;
let starting: Promise<NonNullable<typeof shared>> | undefined;

/** Starts tracing when configured (undefined: off, nothing loaded). */
export async function startTracing(cfg: TracingConfig | undefined, logger: Logger, instanceId?: string): Promise<Tracing | undefined> {
  if (!cfg) return undefined;
  starting ??= load(cfg, logger, instanceId);
  let s: NonNullable<typeof shared>;
  try {
    s = await starting;
  } catch (err) {
    starting = undefined;
    throw err;
  }
  shared = s;
  s.refs++;
  let closed = false;
  return {
    fastifyPlugin: () => s.plugin(),
    async close() {
      if (closed) return;
      closed = true;
      if (--s.refs > 0) return;
      if (shared === s) {
        shared = undefined;
        starting = undefined;
      }
      await s.shutdown();
    },
  };
}

function samplerOf(node: typeof import("@opentelemetry/sdk-trace-node"), s: TracingConfig["sampler"]) {
  const root = s.ratio >= 1 ? new node.AlwaysOnSampler() : s.ratio <= 0 ? new node.AlwaysOffSampler() : new node.TraceIdRatioBasedSampler(s.ratio);
  return s.parentBased ? new node.ParentBasedSampler({ root }) : root;
}

/**
 * The http/protobuf span processor: spans encoded as they end by Portico's encoder (src/lib/otlp-span-processor.ts,
 * src/lib/otlp-trace-encoder.ts: the same bytes as the SDK's serializer for less CPU, and no span object kept until its
 * batch goes), the batches sent by the SDK's OTLP/HTTP export delegate (what `@opentelemetry/exporter-trace-otlp-proto`'s
 * exporter is made of: its configuration from `cfg` and the OTEL_EXPORTER_OTLP_* variables, retries, timeout,
 * compression, the response's partial success) in an `OTLPExporterBase`.
 */
async function protobufProcessor(cfg: TracingConfig): Promise<SpanProcessor> {
  const [base, nodeHttp, transformer, { EncodingSpanProcessor }] = await Promise.all([
    import("@opentelemetry/otlp-exporter-base"),
    import("@opentelemetry/otlp-exporter-base/node-http"),
    import("@opentelemetry/otlp-transformer"),
    import("./otlp-span-processor.js"),
  ]);
  const options = nodeHttp.convertLegacyHttpOptions({ url: cfg.url, headers: cfg.headers }, "TRACES", "v1/traces", { "Content-Type": "application/x-protobuf" });
  const serializer = { serializeRequest: (b: EncodedBatch) => b.bytes, deserializeResponse: transformer.ProtobufTraceSerializer.deserializeResponse };
  const metrics = { name: "span" as const, countItems: (b: EncodedBatch) => b.count };
  const exporter = new base.OTLPExporterBase(nodeHttp.createOtlpHttpExportDelegate(options, serializer, "otlp_http_span_exporter", metrics, undefined));
  return new EncodingSpanProcessor(exporter, batchOptions(cfg));
}

function batchOptions(cfg: TracingConfig) {
  return { scheduledDelayMillis: cfg.scheduleDelayMs, maxQueueSize: cfg.maxQueueSize, maxExportBatchSize: cfg.maxExportBatchSize };
}

/** The http/json span processor: the SDK's batch processor and OTLP/HTTP JSON exporter. */
async function jsonProcessor(cfg: TracingConfig, node: typeof import("@opentelemetry/sdk-trace-node")): Promise<SpanProcessor> {
  const m = await import("@opentelemetry/exporter-trace-otlp-http");
  return new node.BatchSpanProcessor(new m.OTLPTraceExporter({ url: cfg.url, headers: cfg.headers }), batchOptions(cfg));
}

async function load(cfg: TracingConfig, logger: Logger, instanceId: string | undefined): Promise<NonNullable<typeof shared>> {
  const sdk = import("@opentelemetry/sdk-trace-node");
  const [node, resources, { PooledIdGenerator }, processor] = await Promise.all([
    sdk,
    import("@opentelemetry/resources"),
    import("./trace-ids.js"),
    cfg.protocol === "http/json" ? sdk.then((n) => jsonProcessor(cfg, n)) : protobufProcessor(cfg),
  ]);
  const provider = new node.NodeTracerProvider({
    resource: resources.resourceFromAttributes({
      "service.name": cfg.serviceName,
      ...(instanceId ? { "service.instance.id": instanceId } : {}),
    }),
    // Built here from the configuration (OTEL_TRACES_SAMPLER / _ARG as src/config.ts read them), so the SDK does not
    // read the variables behind the configuration's back.
    sampler: samplerOf(node, cfg.sampler),
    // Random ids from a pool of `randomFillSync` bytes (src/lib/trace-ids.ts): the SDK's extension point for them.
    idGenerator: new PooledIdGenerator(),
    spanProcessors: [processor],
  });
  // No context manager (see the module comment); the W3C trace-context (and baggage) propagator as by default.
  provider.register({ contextManager: null });
  // The URL without any user:password it may hold; the headers (a collector's token) are never logged.
  const shown = new URL(cfg.url);
  shown.username = "";
  shown.password = "";
  logger.info({ url: shown.href, protocol: cfg.protocol, serviceName: cfg.serviceName }, "tracing on: exporting spans over OTLP");
  return {
    refs: 0,
    plugin: () => httpSpans(trace.getTracer(TRACER_NAME)),
    async shutdown() {
      await provider.shutdown().catch((err: unknown) => logger.warn({ err }, "tracing: the last spans could not be exported"));
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}
