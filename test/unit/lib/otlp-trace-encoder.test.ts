/**
 * Portico's OTLP/protobuf span encoder (src/lib/otlp-trace-encoder.ts) gives the same bytes as the SDK's own
 * serializer (`@opentelemetry/otlp-transformer`'s `ProtobufTraceSerializer`, what `@opentelemetry/exporter-trace-otlp-proto`
 * sends) for spans made by the real SDK: every field of the span schema (events, links, status, trace state, remote
 * parents, each attribute value type, strings past one length byte and non-ASCII), several resources and scopes in one
 * request, and the encoder's reuse of its buffer and of the keys, resources and scopes it has already encoded.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, createTraceState, trace, type Span } from "@opentelemetry/api";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { encodeTraceRequest } from "../../../src/lib/otlp-trace-encoder.js";

function providerWith(resource: Record<string, string | number>, ended: ReadableSpan[]) {
  return new BasicTracerProvider({
    resource: resourceFromAttributes(resource),
    spanProcessors: [new SimpleSpanProcessor({ export: (spans, done) => (ended.push(...spans), done({ code: 0 })), shutdown: async () => undefined })],
  });
}

function expectSameBytes(spans: ReadableSpan[]) {
  const sdk = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
  const ours = Buffer.from(encodeTraceRequest(spans));
  expect(ours.toString("hex")).toBe(sdk.toString("hex"));
}

/** A span with something in every field of the schema. */
function everything(span: Span, i: number) {
  span.setAttribute("s", "ascii");
  span.setAttribute("utf8", "naïve — 日本語 🚀");
  span.setAttribute("long", "x".repeat(200 + i));
  span.setAttribute("longer", "y".repeat(20_000));
  span.setAttribute("long.utf8", "é".repeat(100));
  span.setAttribute("int", 42);
  span.setAttribute("zero", 0);
  span.setAttribute("negative", -7);
  span.setAttribute("big", 2 ** 40 + 3);
  span.setAttribute("huge", 2 ** 62);
  span.setAttribute("very.negative", -(2 ** 45) - 1);
  span.setAttribute("double", 0.000123);
  span.setAttribute("nan", Number.NaN);
  span.setAttribute("inf", Number.POSITIVE_INFINITY);
  span.setAttribute("yes", true);
  span.setAttribute("no", false);
  // Around the encoder's fast paths' limits (a KeyValue of 127 and 128 bytes, varints of one to five bytes, long keys).
  span.setAttribute("edge.s127", "a".repeat(127 - 2 - 8 - 4));
  span.setAttribute("edge.s128", "a".repeat(128 - 2 - 8 - 4));
  span.setAttribute("edge.late.utf8", "abcdefgh€");
  for (const n of [127, 128, 16383, 16384, 2 ** 21 - 1, 2 ** 21, 2 ** 28 - 1, 2 ** 28]) span.setAttribute(`edge.int.${n}`, n);
  span.setAttribute("k".repeat(122), 2 ** 20);
  span.setAttribute("k".repeat(124), true);
  span.setAttribute("k".repeat(125), false);
  span.setAttribute("k".repeat(200), "v");
  span.setAttribute("strings", ["stop", "length", ""]);
  span.setAttribute("numbers", [1, 2.5, -3]);
  span.setAttribute("bools", [true, false]);
  span.setAttribute("with.nulls", [1, null, 3] as never);
  span.setAttribute("", "empty keys are dropped by the SDK");
  span.addEvent("first", { "event.attr": "v", n: 1 });
  span.addEvent("second");
  span.addLink({ context: { traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331", traceFlags: TraceFlags.SAMPLED, isRemote: true, traceState: createTraceState("k=v,a=b") }, attributes: { "link.attr": 1 } });
  span.addLink({ context: { traceId: "0AF7651916CD43DD8448EB211C80319D", spanId: "B7AD6B7169203332", traceFlags: TraceFlags.NONE } });
  span.setStatus({ code: SpanStatusCode.ERROR, message: "upstream_failed ✗" });
  span.updateName(`chat ${"m".repeat(i)}`);
}

describe("OTLP/protobuf span encoder", () => {
  it("gives the SDK serializer's bytes for every field of the span schema, in one and in many spans", () => {
    const ended: ReadableSpan[] = [];
    const provider = providerWith({ "service.name": "portico", "service.instance.id": "i-1", "resource.number": 3 }, ended);
    const tracer = provider.getTracer("portico", "1.2.3");
    const remote = trace.setSpanContext(ROOT_CONTEXT, { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceFlags: TraceFlags.SAMPLED, isRemote: true, traceState: createTraceState("vendor=opaque") });
    for (let i = 0; i < 40; i++) {
      const root = tracer.startSpan(`root ${i}`, { kind: SpanKind.SERVER, attributes: { "rpc.system": "connect_rpc", n: i } }, i % 2 ? remote : ROOT_CONTEXT);
      const child = tracer.startSpan("child", { kind: SpanKind.CLIENT }, trace.setSpan(ROOT_CONTEXT, root));
      everything(child, i);
      child.end();
      const internal = tracer.startSpan("internal", {}, trace.setSpan(ROOT_CONTEXT, root));
      internal.setStatus({ code: SpanStatusCode.OK });
      internal.end();
      root.setAttribute("http.response.status_code", 200);
      root.end();
    }
    expect(ended).toHaveLength(120);
    expectSameBytes(ended.slice(0, 1));
    expectSameBytes(ended.slice(0, 3));
    expectSameBytes(ended);
    // Again, with the keys, resource and scope now cached and the buffer grown.
    expectSameBytes(ended);
    expectSameBytes(ended.slice(5, 9));
  });

  it("groups spans by resource, then by scope, in order of first appearance", () => {
    const ended: ReadableSpan[] = [];
    const a = providerWith({ "service.name": "a" }, ended);
    const b = providerWith({ "service.name": "b", "service.version": "2" }, ended);
    const tracers = [a.getTracer("portico"), b.getTracer("portico"), a.getTracer("other", "0.1"), b.getTracer("portico")];
    for (let i = 0; i < 12; i++) {
      const span = tracers[i % tracers.length]!.startSpan(`span ${i}`, { kind: SpanKind.INTERNAL }, ROOT_CONTEXT);
      span.setAttribute("i", i);
      span.end();
    }
    expectSameBytes(ended);
    expectSameBytes(ended.reverse());
  });

  it("returns its own copy of the bytes (the next export reuses its buffer)", () => {
    const ended: ReadableSpan[] = [];
    const tracer = providerWith({ "service.name": "portico" }, ended).getTracer("portico");
    tracer.startSpan("one", {}, ROOT_CONTEXT).end();
    tracer.startSpan("two", {}, ROOT_CONTEXT).end();
    const first = encodeTraceRequest([ended[0]!]);
    const copy = Buffer.from(first).toString("hex");
    encodeTraceRequest([ended[1]!]);
    expect(Buffer.from(first).toString("hex")).toBe(copy);
    expect(encodeTraceRequest([]).length).toBe(0);
  });
});
