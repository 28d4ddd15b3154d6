import { describe, expect, it } from "vitest";
import { createTtlCache, createTtlPairCache } from "../../../src/lib/ttl-cache.js";

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

describe("createTtlPairCache", () => {
  it("loads, shares, forgets, expires and evicts as the cache keyed by the pair's joined text", async () => {
    // A seeded generator: 40 runs of 300 operations each over a few pairs, a small maxEntries, failing loads
    // and clears, compared step by step (which value each get answers, and whether it called its load).
    let seed = 12345;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const names = ["", "a", "b", "ab", "ws_1", "org_1"];
    for (let run = 0; run < 40; run++) {
      const ttlMs = [0, 60_000][run % 2]!;
      const maxEntries = 1 + rand(6);
      const joined = createTtlCache<string>({ ttlMs, maxEntries });
      const pair = createTtlPairCache<string>({ ttlMs, maxEntries });
      let n = 0;
      for (let step = 0; step < 300; step++) {
        if (rand(25) === 0) {
          joined.clear();
          pair.clear();
          continue;
        }
        const a = names[rand(names.length)]!;
        const b = names[rand(names.length)]!;
        const fail = rand(5) === 0;
        const v = `v${++n}`;
        const calls: string[] = [];
        const make = (who: string) => (): Promise<string> => {
          calls.push(who);
          return fail ? Promise.reject(new Error(v)) : Promise.resolve(v);
        };
        const want = joined.get(`${a}\u0000${b}`, make("joined"));
        const loadPair = make("pair");
        const got = pair.get(a, b, (x, y) => {
          expect([x, y]).toEqual([a, b]);
          return loadPair();
        });
        const settle = (p: Promise<string>) => p.then((x) => `ok ${x}`, (e: Error) => `failed ${e.message}`);
        expect(await settle(got)).toBe(await settle(want));
        expect(calls.includes("pair")).toBe(calls.includes("joined"));
      }
    }
  });
});
