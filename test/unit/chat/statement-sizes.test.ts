import { describe, expect, it } from "vitest";
import { statementSizes } from "../../../src/core/chat/generations.js";

describe("statementSizes", () => {
  it("splits rows into statements of 50, then the rest by powers of two", () => {
    expect(statementSizes(0)).toEqual([]);
    expect(statementSizes(1)).toEqual([1]);
    expect(statementSizes(37)).toEqual([32, 4, 1]);
    expect(statementSizes(50)).toEqual([50]);
    expect(statementSizes(63)).toEqual([50, 8, 4, 1]);
    expect(statementSizes(200)).toEqual([50, 50, 50, 50]);
  });

  it("covers every row with at most 7 distinct sizes", () => {
    const seen = new Set<number>();
    for (let n = 0; n <= 400; n++) {
      const sizes = statementSizes(n);
      expect(sizes.reduce((a, b) => a + b, 0)).toBe(n);
      for (const s of sizes) seen.add(s);
    }
    expect([...seen].sort((a, b) => a - b)).toEqual([1, 2, 4, 8, 16, 32, 50]);
  });
});
