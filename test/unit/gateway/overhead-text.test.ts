/**
 * The overhead header's value (src/gateway/overhead.ts `millisText`) is `toFixed(3)` of the milliseconds, for every
 * kind of value: generated elapsed times, values next to a half thousandth, the bounds of the fast path, and the rest.
 */
import { describe, expect, it } from "vitest";
import { millisText } from "../../../src/gateway/overhead.js";

describe("millisText", () => {
  it("is ms.toFixed(3)", () => {
    const values: number[] = [0, -0, 0.0005, 0.0015, 0.0025, 1.0005, 2.5, 0.001, 0.999, 0.9995, 0.99949999, 9.9995, 999.9995, 1e7 - 0.0005, 1e7, 1e7 + 1, 1e9, 1e21, 1e22, -1, -0.0004, NaN, Infinity, -Infinity, Number.MIN_VALUE, Number.EPSILON];
    for (let k = 0; k < 200_000; k++) {
      const scale = 10 ** Math.floor(Math.random() * 9 - 2);
      values.push(Math.random() * scale);
    }
    // Exactly representable and near halves of a thousandth, at every magnitude of the fast path.
    for (let e = 0; e < 7; e++) {
      for (let k = 0; k < 2000; k++) {
        const half = (Math.floor(Math.random() * 10 ** (e + 3)) + 0.5) / 1000;
        values.push(half, half + 1e-12, half - 1e-12, half + 1e-9 * 10 ** e, half - 1e-9 * 10 ** e);
      }
    }
    for (let k = 0; k < 100_000; k++) values.push(Math.floor(Math.random() * 1e6) / 1000, Math.floor(Math.random() * 1e9) / 1e6);
    for (const v of values) expect(millisText(v), String(v)).toBe(v.toFixed(3));
  });
});
