import { describe, expect, it } from "vitest";
import { INVALID_SPAN_CONTEXT, ROOT_CONTEXT, SpanKind, TraceFlags, trace, type Context, type SpanContext } from "@opentelemetry/api";
import { AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, SamplingDecision, TraceIdRatioBasedSampler, type Sampler } from "@opentelemetry/sdk-trace-base";
import { PooledIdGenerator } from "../../../src/lib/trace-ids.js";
import { PorticoSampler } from "../../../src/lib/trace-sampler.js";

/** What src/lib/tracing.ts built before: the SDK's samplers for the same settings. */
function sdkSampler(s: { parentBased: boolean; ratio: number }): Sampler {
  const root = s.ratio >= 1 ? new AlwaysOnSampler() : s.ratio <= 0 ? new AlwaysOffSampler() : new TraceIdRatioBasedSampler(s.ratio);
  return s.parentBased ? new ParentBasedSampler({ root }) : root;
}

const ids = new PooledIdGenerator();
const parent = (sc: SpanContext): Context => trace.setSpan(ROOT_CONTEXT, trace.wrapSpanContext(sc));

function parents(): Array<[string, Context]> {
  const traceId = ids.generateTraceId();
  const spanId = ids.generateSpanId();
  return [
    ["no parent", ROOT_CONTEXT],
    ["local sampled parent", parent({ traceId, spanId, traceFlags: TraceFlags.SAMPLED })],
    ["local unsampled parent", parent({ traceId, spanId, traceFlags: TraceFlags.NONE })],
    ["remote sampled parent", parent({ traceId, spanId, traceFlags: TraceFlags.SAMPLED, isRemote: true })],
    ["remote unsampled parent", parent({ traceId, spanId, traceFlags: TraceFlags.NONE, isRemote: true })],
    ["invalid parent", parent(INVALID_SPAN_CONTEXT)],
    ["invalid sampled parent", parent({ ...INVALID_SPAN_CONTEXT, traceFlags: TraceFlags.SAMPLED })],
    ["parent with a malformed trace id, sampled", parent({ traceId: "xyz", spanId, traceFlags: TraceFlags.SAMPLED })],
    ["parent with a zero span id, remote, sampled", parent({ traceId, spanId: "0".repeat(16), traceFlags: TraceFlags.SAMPLED, isRemote: true })],
  ];
}

describe("PorticoSampler", () => {
  const settings = [
    { parentBased: true, ratio: 1 },
    { parentBased: true, ratio: 0 },
    { parentBased: true, ratio: 0.25 },
    { parentBased: false, ratio: 1 },
    { parentBased: false, ratio: 0 },
    { parentBased: false, ratio: 0.25 },
  ];

  it("decides as the SDK's samplers for the same settings, for every kind of parent and many trace ids", () => {
    for (const s of settings) {
      const ours = new PorticoSampler(s);
      const theirs = sdkSampler(s);
      expect(ours.toString()).toBe(theirs.toString());
      for (let i = 0; i < 400; i++) {
        const traceId = i === 0 ? "0".repeat(32) : ids.generateTraceId();
        for (const [what, ctx] of parents()) {
          const a = ours.shouldSample(ctx, traceId, "span", SpanKind.SERVER, {}, []);
          const b = theirs.shouldSample(ctx, traceId, "span", SpanKind.SERVER, {}, []);
          expect({ ...a }, `${JSON.stringify(s)}, ${what}`).toEqual({ ...b });
        }
      }
    }
  });

  it("samples about the ratio of new traces under traceidratio", () => {
    const ours = new PorticoSampler({ parentBased: true, ratio: 0.25 });
    let sampled = 0;
    for (let i = 0; i < 4000; i++) if (ours.shouldSample(ROOT_CONTEXT, ids.generateTraceId(), "span", SpanKind.SERVER, {}, []).decision === SamplingDecision.RECORD_AND_SAMPLED) sampled++;
    expect(sampled).toBeGreaterThan(800);
    expect(sampled).toBeLessThan(1200);
  });
});
