import { describe, expect, it } from "vitest";
import { createTtlCache } from "../../../src/lib/ttl-cache.js";

describe("createTtlCache", () => {
  it("loads once per key within the TTL, shares a pending load, and loads again after clear()", async () => {
    const cache = createTtlCache<number>({ ttlMs: 60_000 });
    let loads = 0;
    const load = () => Promise.resolve(++loads);
    expect(await Promise.all([cache.get("a", load), cache.get("a", load)])).toEqual([1, 1]);
    expect(await cache.get("b", load)).toBe(2);
    expect(await cache.get("a", load)).toBe(1);
    cache.clear();
    expect(await cache.get("a", load)).toBe(3);
  });

  it("forgets a failed load at once and past its TTL loads again", async () => {
    const failing = createTtlCache<number>({ ttlMs: 60_000 });
    await expect(failing.get("k", () => Promise.reject(new Error("down")))).rejects.toThrow("down");
    expect(await failing.get("k", () => Promise.resolve(7))).toBe(7);
    const expired = createTtlCache<number>({ ttlMs: 0 });
    let n = 0;
    await expired.get("k", () => Promise.resolve(++n));
    expect(await expired.get("k", () => Promise.resolve(++n))).toBe(2);
  });

  it("drops the oldest entry past maxEntries", async () => {
    const cache = createTtlCache<string>({ ttlMs: 60_000, maxEntries: 2 });
    for (const k of ["a", "b", "c"]) await cache.get(k, () => Promise.resolve(`${k}1`));
    expect(await cache.get("a", () => Promise.resolve("a2"))).toBe("a2");
    expect(await cache.get("c", () => Promise.resolve("c2"))).toBe("c1");
  });
});
