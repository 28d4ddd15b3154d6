/**
 * How a gateway request's span reaches the core (src/lib/tracing.ts): in process in the call's context values (no
 * `traceparent` header made), over gRPC as W3C headers written by the split gateway's transport wrapper, and the
 * core's tracing interceptor continuing either one; an unsampled parent gives no core span. The spans are exported to
 * a loopback sink that only counts bytes (tracing.test.ts checks the exported trees).
 */
import http from "node:http";
import type net from "node:net";
import { createContextValues } from "@connectrpc/connect";
import { ROOT_CONTEXT, trace, type Span } from "@opentelemetry/api";
import Fastify, { type FastifyInstance } from "fastify";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTracingInterceptor } from "../../../src/core/tracing-interceptor.js";
import { callOptionsFor } from "../../../src/gateway/rpc.js";
import { callParentSpan, parentContext, requestSpan, startTracing, withTraceHeaders, type Tracing } from "../../../src/lib/tracing.js";

type CoreSeen = { span: Span | undefined; parentSpanId: string | undefined; traceId: string | undefined };

/** Runs the core's tracing interceptor on a call with `header` and `contextValues`, as a transport presents it. */
async function coreCall(header: Headers, contextValues: ReturnType<typeof createContextValues>): Promise<CoreSeen> {
  let seen: CoreSeen = { span: undefined, parentSpanId: undefined, traceId: undefined };
  const signal = new AbortController().signal;
  const interceptor = createTracingInterceptor({ parentBased: true });
  const run = interceptor((async () => {
    const span = requestSpan(signal);
    const s = span as unknown as { parentSpanContext?: { spanId: string }; spanContext(): { traceId: string } } | undefined;
    seen = { span, parentSpanId: s?.parentSpanContext?.spanId, traceId: s?.spanContext().traceId };
    return { stream: false, message: {}, header: new Headers(), trailer: new Headers() };
  }) as never);
  await run({ header, contextValues, signal, message: {}, stream: false, service: { typeName: "portico.test.v1.Test" }, method: { name: "Call", methodKind: "unary" } } as never);
  return seen;
}

describe("the trace context from the gateway to the core", () => {
  let sink: http.Server;
  let tracing: Tracing | undefined;
  let app: FastifyInstance;
  /** What the route saw of its call options, per request. */
  const calls: Array<{ headers: Record<string, string>; values: ReturnType<typeof createContextValues> | undefined; gatewaySpan: Span | undefined }> = [];

  beforeAll(async () => {
    sink = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => res.writeHead(200, { "content-type": "application/x-protobuf" }).end());
    });
    await new Promise<void>((r) => sink.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(sink.address() as net.AddressInfo).port}/v1/traces`;
    tracing = await startTracing(
      { url, protocol: "http/protobuf", headers: {}, serviceName: "portico-test", scheduleDelayMs: 60_000, maxQueueSize: 2048, maxExportBatchSize: 512, sampler: { parentBased: true, ratio: 1 } },
      pino({ level: "silent" }),
    );
    app = Fastify({ logger: false });
    await app.register(tracing!.fastifyPlugin());
    app.get("/x", async (req) => {
      const opts = callOptionsFor(req);
      calls.push({ headers: opts.headers as Record<string, string>, values: opts.contextValues, gatewaySpan: callParentSpan(opts.contextValues) });
      return "ok";
    });
    await app.ready();
  });
  afterAll(async () => {
    await app?.close();
    await tracing?.close();
    await new Promise((r) => sink?.close(r));
  });

  it("in process: the span goes in the call's context values, no traceparent header; the core's span is its child", async () => {
    const traceId = "0af7651916cd43dd8448eb211c80319c";
    await app.inject({ url: "/x", headers: { traceparent: `00-${traceId}-b7ad6b7169203331-01` } });
    const call = calls.at(-1)!;
    expect(call.headers.traceparent).toBeUndefined();
    expect(call.gatewaySpan?.spanContext().traceId).toBe(traceId);
    expect(call.gatewaySpan?.isRecording()).toBe(false); // ended by the plugin's onResponse hook
    const core = await coreCall(new Headers(call.headers), call.values!);
    expect(core.span).toBeDefined();
    expect(core.traceId).toBe(traceId);
    expect(core.parentSpanId).toBe(call.gatewaySpan!.spanContext().spanId);
  });

  it("over gRPC: the split transport writes the span as traceparent, which the core continues", async () => {
    await app.inject({ url: "/x" });
    const call = calls.at(-1)!;
    const gw = call.gatewaySpan!.spanContext();
    let sent: Headers | undefined;
    const grpc = { unary: async (_m: unknown, _s: unknown, _t: unknown, header: ConstructorParameters<typeof Headers>[0]) => ((sent = new Headers(header)), {}), stream: async () => ({}), close: () => "closed" };
    const traced = withTraceHeaders(grpc as never) as unknown as typeof grpc;
    await traced.unary(undefined, undefined, undefined, call.headers);
    // No span in the call's values (a call not made for a traced request): the headers as given.
    expect(sent!.get("traceparent")).toBeNull();
    await (traced.unary as (...a: unknown[]) => Promise<unknown>)(undefined, undefined, undefined, call.headers, undefined, call.values);
    expect(sent!.get("traceparent")).toBe(`00-${gw.traceId}-${gw.spanId}-01`);
    expect(sent!.get("x-request-id")).toBe(call.headers["x-request-id"]);
    expect(traced.close()).toBe("closed");
    // The core's side of a network call: the headers, and context values of its own.
    const core = await coreCall(sent!, createContextValues());
    expect(core.traceId).toBe(gw.traceId);
    expect(core.parentSpanId).toBe(gw.spanId);
  });

  it("an unsampled caller: no core span, in process or over the headers; tracing on without any parent starts a trace", async () => {
    await app.inject({ url: "/x", headers: { traceparent: "00-1af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00" } });
    const call = calls.at(-1)!;
    expect(call.gatewaySpan?.spanContext().traceFlags).toBe(0);
    expect((await coreCall(new Headers(call.headers), call.values!)).span).toBeUndefined();
    const header = new Headers({ traceparent: "00-1af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00" });
    expect((await coreCall(header, createContextValues())).span).toBeUndefined();
    const root = await coreCall(new Headers(), createContextValues());
    expect(root.span).toBeDefined();
    expect(root.parentSpanId).toBeUndefined();
  });

  it("parentContext(span) is a context holding the span alone", () => {
    const span = trace.wrapSpanContext({ traceId: "2af7651916cd43dd8448eb211c80319c", spanId: "c7ad6b7169203331", traceFlags: 1 });
    const ctx = parentContext(span);
    expect(trace.getSpan(ctx)).toBe(span);
    expect(trace.getSpan(trace.deleteSpan(ctx))).toBeUndefined();
    const key = Symbol("other");
    const more = ctx.setValue(key, 1);
    expect(more.getValue(key)).toBe(1);
    expect(trace.getSpan(more)).toBe(span);
    expect(ctx.getValue(key)).toBeUndefined();
    expect(trace.getSpan(ROOT_CONTEXT)).toBeUndefined();
  });
});
