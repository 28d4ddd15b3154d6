/**
 * src/lib/metric-fast-path.ts: the same observations and increments through prom-client's own methods and through
 * the fast path render the same text, errors included, and a reset metric starts again.
 */
import { Counter, Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { fastInc, fastObserve } from "../../../src/lib/metric-fast-path.js";

function metrics(fast: boolean) {
  const registry = new Registry();
  const h = new Histogram({ name: "h_seconds", help: "h", labelNames: ["procedure", "code"] as const, buckets: [0.001, 0.01, 0.1, 1], registers: [registry] });
  const c = new Counter({ name: "c_total", help: "c", labelNames: ["provider", "model", "status"] as const, registers: [registry] });
  const none = new Counter({ name: "n_total", help: "n", registers: [registry] });
  return { registry, h: fast ? fastObserve(h) : h, c: fast ? fastInc(c) : c, none: fast ? fastInc(none) : none };
}

/** The same operations on both, each operation's outcome (an error's message) compared too. */
function run(ops: Array<(m: ReturnType<typeof metrics>) => void>) {
  const plain = metrics(false);
  const fast = metrics(true);
  for (const op of ops) {
    const outcome = (m: ReturnType<typeof metrics>) => {
      try {
        op(m);
        return "ok";
      } catch (err) {
        return (err as Error).message;
      }
    };
    expect(outcome(fast)).toBe(outcome(plain));
  }
  return { plain, fast };
}

describe("metric fast path", () => {
  it("renders what prom-client renders, over random label sets and values, edge values and wrong labels included", async () => {
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
    const values = [0, 0.0005, 0.001, 0.0010001, 0.01, 0.5, 1, 1.5, 1e9, -1, Number.NaN, Infinity];
    const ops: Array<(m: ReturnType<typeof metrics>) => void> = [];
    for (let i = 0; i < 2000; i++) {
      // Every choice made here, once: each operation then runs on both sets of metrics alike.
      const v = pick(values);
      const kind = Math.floor(rand() * 9);
      const procedure = pick(["a/B", "c/D"]);
      const code = pick(["ok", "unknown"]);
      const provider = pick(["groq", "openai"]);
      const model = pick(["m1", "m2"]);
      const status = pick(["success", "error"]);
      const amount = pick([undefined, 3, null as never]);
      const plainAmount = pick([undefined, 2, 0]);
      const reset = rand() < 0.05;
      if (kind === 0) ops.push((m) => m.h.observe({ procedure, code }, v));
      else if (kind === 1) ops.push((m) => m.h.observe({ procedure: "a/B" }, v));
      else if (kind === 2) ops.push((m) => m.h.observe({ procedure: "a/B", code: "ok", extra: "x" } as never, v));
      else if (kind === 3) ops.push((m) => m.h.startTimer({ procedure: "c/D" })({ code: "ok" }));
      else if (kind === 4) ops.push((m) => m.c.inc({ provider, model, status }));
      else if (kind === 5) ops.push((m) => m.c.inc({ provider: "groq", model: "m1", status: "success" }, v));
      else if (kind === 6) ops.push((m) => m.c.inc({ provider: "groq", model: 2 as never, status: "x" }, amount));
      else if (kind === 7) ops.push((m) => m.none.inc(plainAmount));
      else ops.push((m) => (reset ? m.h.reset() : m.c.inc({ provider: "p", oops: 1 } as never)));
    }
    const { plain, fast } = run(ops);
    // The timer's durations differ between the two: compare its label set's count, and everything else as text.
    const withoutTimer = (text: string) => text.split("\n").filter((l) => !l.includes('procedure="c/D",code="ok"') || l.includes("_count")).join("\n");
    expect(withoutTimer(await fast.registry.metrics())).toBe(withoutTimer(await plain.registry.metrics()));
    expect(await fast.registry.getMetricsAsJSON()).toHaveLength(3);
  });
});
