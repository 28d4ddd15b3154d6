/**
 * The live figures per endpoint (src/core/chat/routing/endpoint-stats.ts): which generation records count,
 * the percentiles of the window, samples ageing out of it, the sample bound, and the preferred thresholds.
 */
import { describe, expect, it } from "vitest";
import { createEndpointStats, meets } from "../../../../src/core/chat/routing/endpoint-stats.js";

const rec = (over: Record<string, unknown> = {}) => ({
  status: "success" as const, catalogModel: "acme/m", provider: "p", attempts: 1, latencyMs: 2000, timeToFirstTokenMs: 1000 as number | null,
  completionTokens: 100 as number | null, streamed: true, ...over,
});

describe("endpoint stats", () => {
  it("a streamed sample: latency = time to first token, throughput = tokens over the time after it; non-streamed: the whole answer", () => {
    const s = createEndpointStats();
    s.observe(rec());
    expect(s.figures("acme/m", "p")).toMatchObject({ samples: 1, latency: { p50: 1 }, throughput: { p50: 100 } });
    const t = createEndpointStats();
    t.observe(rec({ streamed: false, timeToFirstTokenMs: null, latencyMs: 500 }));
    expect(t.figures("acme/m", "p")).toMatchObject({ latency: { p50: 0.5 }, throughput: { p50: 200 } });
  });

  it("only successful, catalogued, first-attempt generations with completion tokens count", () => {
    const s = createEndpointStats();
    for (const over of [{ status: "error" }, { status: "cancelled" }, { attempts: 2 }, { catalogModel: null }, { provider: null }, { completionTokens: 0 }, { completionTokens: null }]) s.observe(rec(over));
    expect(s.figures("acme/m", "p")).toBeUndefined();
  });

  it("percentiles by nearest rank over the window; old samples age out; at most maxSamples are kept", () => {
    let now = 1_000_000;
    const s = createEndpointStats({ windowMs: 60_000, maxSamples: 4, now: () => now });
    for (const ttft of [100, 200, 300, 400, 500]) s.observe(rec({ timeToFirstTokenMs: ttft, latencyMs: ttft + 1000 }));
    // The first (100) was overwritten: 200..500 are kept.
    expect(s.figures("acme/m", "p")!.latency).toEqual({ p50: 0.3, p75: 0.4, p90: 0.5, p99: 0.5 });
    now += 61_000;
    expect(s.figures("acme/m", "p")).toBeUndefined();
    s.observe(rec({ timeToFirstTokenMs: 50, latencyMs: 1050 }));
    expect(s.figures("acme/m", "p")).toMatchObject({ samples: 1, latency: { p50: 0.05 } });
  });

  it("meets: every threshold given, throughput at least and latency at most; unknown without figures", () => {
    const s = createEndpointStats();
    s.observe(rec());
    const f = s.figures("acme/m", "p");
    expect(meets(f, { p50: 100 })).toBe(true);
    expect(meets(f, { p50: 101 })).toBe(false);
    expect(meets(f, undefined, { p90: 1 })).toBe(true);
    expect(meets(f, undefined, { p90: 0.9 })).toBe(false);
    expect(meets(undefined, { p50: 1 })).toBeUndefined();
  });
});
