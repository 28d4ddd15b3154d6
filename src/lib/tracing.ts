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
 */
import { context, propagation, trace, type Tracer } from "@opentelemetry/api";
import type { FastifyPluginCallback } from "fastify";
import type { Logger } from "pino";
import type { TracingConfig } from "../config.js";

/** The instrumentation scope of every span Portico makes. */
export const TRACER_NAME = "portico";

export function tracer(): Tracer {
  return trace.getTracer(TRACER_NAME);
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
    // Explicit, so the SDK's own OTEL_TRACES_SAMPLER is not read behind the configuration's back.
    sampler: new node.ParentBasedSampler({ root: new node.AlwaysOnSampler() }),
    spanProcessors: [new node.BatchSpanProcessor(exporter, { scheduledDelayMillis: cfg.scheduleDelayMs, maxQueueSize: cfg.maxQueueSize })],
  });
  provider.register();
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
