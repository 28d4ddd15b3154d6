import { describe, expect, it } from "vitest";
import { capHeapGrowth, operatorNamesFlag, SERVE_HEAP_GROWING_PERCENT } from "../../../src/cli/heap-growth.js";

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

describe("operatorNamesFlag", () => {
  const flag = "--max-semi-space-size";

  it("finds the flag on the node command line or in NODE_OPTIONS, in either spelling", () => {
    expect(operatorNamesFlag(flag, ["--max-semi-space-size=16"], "")).toBe(true);
    expect(operatorNamesFlag(flag, ["--max_semi_space_size", "8"], "")).toBe(true);
    expect(operatorNamesFlag(flag, [], "--enable-source-maps  --max-semi-space-size=2")).toBe(true);
    expect(operatorNamesFlag(flag, [], "--max_semi_space_size=2\t--inspect")).toBe(true);
  });

  it("is false when neither names it (a flag that only starts the same way does not count)", () => {
    expect(operatorNamesFlag(flag, ["--enable-source-maps"], "")).toBe(false);
    expect(operatorNamesFlag(flag, [], "--max-semi-space-size-x=2 --semi-space-growth-factor=2")).toBe(false);
    expect(operatorNamesFlag(flag, [], "")).toBe(false);
  });

  it("reads process.execArgv and NODE_OPTIONS when not given them", () => {
    const saved = process.env.NODE_OPTIONS;
    try {
      process.env.NODE_OPTIONS = "--max-semi-space-size=2";
      expect(operatorNamesFlag(flag)).toBe(true);
      delete process.env.NODE_OPTIONS;
      expect(operatorNamesFlag(flag)).toBe(process.execArgv.some((a) => /^--max[-_]semi[-_]space[-_]size(=|$)/.test(a)));
    } finally {
      if (saved === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = saved;
    }
  });
});
