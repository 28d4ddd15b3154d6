/**
 * OpenTelemetry tracing (docs/operations.md, "Tracing"). Off unless an OTLP endpoint is configured
 * (src/config.ts `tracing`): then, and only then, the SDK and the OTLP exporter are loaded (dynamic imports),
 * a tracer provider with W3C trace-context propagation is registered globally, and spans are exported in
 * batches over OTLP/HTTP (protobuf or JSON). Off, the code that makes spans is not even installed (the core's
 * tracing interceptor, the chat pipeline's trace stage, the gateway's Fastify plugin); what remains is
 * @opentelemetry/api's no-op propagator on the gateway's core calls.
 *
 * One provider per process: `portico serve`'s core and gateway, or a test starting a split core and gateway
 * in one process, share it (counted; the last `close()` flushes and unregisters it).
 *
 * No context manager is registered (no AsyncLocalStorage: on Node 20 it runs a hook on every promise the process
 * makes, traced or not). Portico hands the trace context on explicitly instead: the gateway writes its request
 * span's `traceparent` into each core call's headers (src/gateway/rpc.ts), the core's tracing interceptor files the
 * RPC span's context under the call's AbortSignal ({@link setRequestContext}), which the chat pipeline's trace
 * stage and its attempts read ({@link requestContext}). `context.active()` is the root context throughout.
 */
import { ROOT_CONTEXT, context, propagation, trace, type Context, type Tracer } from "@opentelemetry/api";
import type { FastifyPluginCallback } from "fastify";
import type { Logger } from "pino";
import type { TracingConfig } from "../config.js";

/** The instrumentation scope of every span Portico makes. */
export const TRACER_NAME = "portico";

export function tracer(): Tracer {
  return trace.getTracer(TRACER_NAME);
}

/** The trace context of each core call being served, by its AbortSignal (one per call; gone with it). */
const requestContexts = new WeakMap<AbortSignal, Context>();

/** Files `ctx` as the trace context of the call whose signal is `signal` (the core's tracing interceptor, the trace stage). */
export function setRequestContext(signal: AbortSignal, ctx: Context): void {
  requestContexts.set(signal, ctx);
}

/** The trace context of the call whose signal is `signal`: its RPC span's (or its chat span's), else the root. */
export function requestContext(signal: AbortSignal): Context {
  return requestContexts.get(signal) ?? ROOT_CONTEXT;
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

async function load(cfg: TracingConfig, logger: Logger, instanceId: string | undefined): Promise<NonNullable<typeof shared>> {
  const [node, resources, otel, exporterModule] = await Promise.all([
    import("@opentelemetry/sdk-trace-node"),
    import("@opentelemetry/resources"),
    import("@fastify/otel"),
    cfg.protocol === "http/json" ? import("@opentelemetry/exporter-trace-otlp-http") : import("@opentelemetry/exporter-trace-otlp-proto"),
  ]);
  const exporter = new exporterModule.OTLPTraceExporter({ url: cfg.url, headers: cfg.headers });
  const provider = new node.NodeTracerProvider({
    resource: resources.resourceFromAttributes({
      "service.name": cfg.serviceName,
      ...(instanceId ? { "service.instance.id": instanceId } : {}),
    }),
    // Built here from the configuration (OTEL_TRACES_SAMPLER / _ARG as src/config.ts read them), so the SDK does not
    // read the variables behind the configuration's back.
    sampler: samplerOf(node, cfg.sampler),
    spanProcessors: [
      new node.BatchSpanProcessor(exporter, { scheduledDelayMillis: cfg.scheduleDelayMs, maxQueueSize: cfg.maxQueueSize, maxExportBatchSize: cfg.maxExportBatchSize }),
    ],
  });
  // No context manager (see the module comment); the W3C trace-context (and baggage) propagator as by default.
  provider.register({ contextManager: null });
  const instrumentation = new otel.FastifyOtelInstrumentation({
    // One span per request: no span per hook or handler.
    instrumentHooks: false,
    instrumentHandler: false,
    requestHook(span, request) {
      // The path without its query string; the route as the span's name.
      span.setAttribute("url.path", request.url.split("?")[0] ?? request.url);
      if (request.routeOptions.url) span.updateName(`${request.method} ${request.routeOptions.url}`);
    },
  });
  // The URL without any user:password it may hold; the headers (a collector's token) are never logged.
  const shown = new URL(cfg.url);
  shown.username = "";
  shown.password = "";
  logger.info({ url: shown.href, protocol: cfg.protocol, serviceName: cfg.serviceName }, "tracing on: exporting spans over OTLP");
  return {
    refs: 0,
    plugin: () => instrumentation.plugin() as FastifyPluginCallback,
    async shutdown() {
      instrumentation.disable();
      await provider.shutdown().catch((err: unknown) => logger.warn({ err }, "tracing: the last spans could not be exported"));
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}
