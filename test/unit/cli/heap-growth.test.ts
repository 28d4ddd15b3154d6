import { describe, expect, it } from "vitest";
import { capHeapGrowth, SERVE_HEAP_GROWING_PERCENT } from "../../../src/cli/heap-growth.js";

describe("capHeapGrowth", () => {
  it("sets --heap-growing-percent when the node command line does not name it", () => {
    const set: string[] = [];
    expect(capHeapGrowth(["--enable-source-maps"], (f) => set.push(f))).toBe(`--heap-growing-percent=${SERVE_HEAP_GROWING_PERCENT}`);
    expect(set).toEqual([`--heap-growing-percent=${SERVE_HEAP_GROWING_PERCENT}`]);
  });

  it("leaves the operator's value, in either spelling, including 0 (V8's own choice)", () => {
    const set: string[] = [];
    for (const argv of [["--heap-growing-percent=0"], ["--heap_growing_percent=80"], ["--heap-growing-percent", "20"]]) {
      expect(capHeapGrowth(argv, (f) => set.push(f))).toBeUndefined();
    }
    expect(set).toEqual([]);
  });
});
