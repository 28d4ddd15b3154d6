import { isValidSpanId, isValidTraceId } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import { PooledIdGenerator } from "../../../src/lib/trace-ids.js";

describe("PooledIdGenerator (the tracer provider's ids)", () => {
  it("gives valid, lowercase, distinct trace and span ids across several refills of its pool", () => {
    const ids = new PooledIdGenerator();
    const traces = new Set<string>();
    const spans = new Set<string>();
    // 3,000 of each: 144 KiB of hex, the 4 KiB pool refilled many times.
    for (let i = 0; i < 3000; i++) {
      const t = ids.generateTraceId();
      const s = ids.generateSpanId();
      expect(t).toMatch(/^[0-9a-f]{32}$/);
      expect(s).toMatch(/^[0-9a-f]{16}$/);
      expect(isValidTraceId(t) && isValidSpanId(s)).toBe(true);
      traces.add(t);
      spans.add(s);
    }
    expect(traces.size).toBe(3000);
    expect(spans.size).toBe(3000);
  });
});
