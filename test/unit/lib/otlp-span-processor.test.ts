/**
 * Portico's span processor for http/protobuf (src/lib/otlp-span-processor.ts): spans encoded as they end, exported in
 * batches as the SDK's BatchSpanProcessor would (batch size, schedule delay, queue limit, one export at a time,
 * sampled spans only, flush and shutdown), each batch the bytes the SDK's serializer gives for the same spans.
 */
import { ROOT_CONTEXT, SpanKind, type Span } from "@opentelemetry/api";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, SamplingDecision, type ReadableSpan, type Sampler } from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { EncodingSpanProcessor, type EncodedBatch } from "../../../src/lib/otlp-span-processor.js";
import { waitFor } from "../../helpers/wait.js";

interface Export {
  batch: EncodedBatch;
  done: (result: { code: number; error?: Error }) => void;
}

/** A processor whose exporter records each batch; `answer` decides when (and how) each export ends. */
function setup(opts: { batch?: number; queue?: number; delayMs?: number; answer?: "at once" | "later"; sampler?: Sampler } = {}) {
  const exports: Export[] = [];
  let shutdowns = 0;
  const processor = new EncodingSpanProcessor(
    {
      export: (batch, done) => {
        exports.push({ batch, done });
        if ((opts.answer ?? "at once") === "at once") done({ code: 0 });
      },
      shutdown: async () => void shutdowns++,
    },
    { maxExportBatchSize: opts.batch ?? 2, maxQueueSize: opts.queue ?? 2048, scheduledDelayMillis: opts.delayMs ?? 60_000 },
  );
  // The spans as they ended (a second processor), to compare each batch with the SDK serializer's bytes.
  const ended: ReadableSpan[] = [];
  const keep = { onStart: () => undefined, onEnd: (s: ReadableSpan) => void ended.push(s), forceFlush: async () => undefined, shutdown: async () => undefined };
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "portico-test" }),
    spanProcessors: [keep, processor],
    ...(opts.sampler ? { sampler: opts.sampler } : {}),
  });
  const tracer = provider.getTracer("portico");
  const span = (i: number): Span => {
    const s = tracer.startSpan(`span ${i}`, { kind: SpanKind.CLIENT, attributes: { "portico.attempt": i } }, ROOT_CONTEXT);
    s.setAttribute("gen_ai.request.model", "m".repeat(i * 50));
    s.end();
    return s;
  };
  const sdkBytes = (from: number, to: number) => Buffer.from(ProtobufTraceSerializer.serializeRequest(ended.slice(from, to))!).toString("hex");
  const hex = (e: Export) => Buffer.from(e.batch.bytes).toString("hex");
  return { processor, exports, span, sdkBytes, hex, shutdowns: () => shutdowns };
}

describe("EncodingSpanProcessor", () => {
  it("exports full batches as they fill and the rest on flush, each the SDK serializer's bytes for its spans", async () => {
    const t = setup({ batch: 2 });
    for (let i = 1; i <= 5; i++) t.span(i);
    expect(t.exports.map((e) => e.batch.count)).toEqual([2, 2]);
    await t.processor.forceFlush();
    expect(t.exports.map((e) => e.batch.count)).toEqual([2, 2, 1]);
    expect(t.exports.map(t.hex)).toEqual([t.sdkBytes(0, 2), t.sdkBytes(2, 4), t.sdkBytes(4, 5)]);
    // Nothing left: a second flush exports nothing.
    await t.processor.forceFlush();
    expect(t.exports).toHaveLength(3);
  });

  it("exports one batch at a time, keeps at most maxQueueSize spans waiting and drops the rest", async () => {
    const t = setup({ batch: 2, queue: 4, answer: "later" });
    for (let i = 1; i <= 6; i++) t.span(i);
    // The first batch is out, the second waits for it, the fifth and sixth spans found the queue full.
    expect(t.exports.map((e) => e.batch.count)).toEqual([2]);
    t.exports[0]!.done({ code: 0 });
    expect(t.exports.map((e) => e.batch.count)).toEqual([2, 2]);
    // A failed export frees its place in the queue too.
    t.exports[1]!.done({ code: 1, error: new Error("collector down") });
    t.span(7);
    const flushed = t.processor.forceFlush();
    expect(t.exports.map((e) => e.batch.count)).toEqual([2, 2, 1]);
    t.exports[2]!.done({ code: 0 });
    await flushed;
    expect(t.hex(t.exports[2]!)).toBe(t.sdkBytes(6, 7));
  });

  it("exports a batch that did not fill once the schedule delay has passed", async () => {
    const t = setup({ batch: 512, delayMs: 20 });
    t.span(1);
    t.span(2);
    expect(t.exports).toHaveLength(0);
    await waitFor("the scheduled export", () => t.exports.length === 1);
    expect(t.exports[0]!.batch.count).toBe(2);
    expect(t.hex(t.exports[0]!)).toBe(t.sdkBytes(0, 2));
  });

  it("leaves out spans that are recorded but not sampled", async () => {
    const recordOnly: Sampler = { shouldSample: () => ({ decision: SamplingDecision.RECORD }), toString: () => "record-only" };
    const t = setup({ sampler: recordOnly });
    t.span(1);
    await t.processor.forceFlush();
    expect(t.exports).toHaveLength(0);
  });

  it("on shutdown, exports what is left, shuts the exporter down once and takes no span after", async () => {
    const t = setup({ batch: 10 });
    t.span(1);
    await Promise.all([t.processor.shutdown(), t.processor.shutdown()]);
    expect(t.exports.map((e) => e.batch.count)).toEqual([1]);
    expect(t.shutdowns()).toBe(1);
    t.span(2);
    await t.processor.forceFlush();
    expect(t.exports).toHaveLength(1);
  });
});
