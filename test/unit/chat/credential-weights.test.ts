/**
 * Load balancing among credentials (docs/routing.md, "Load balancing"): the weighted draw with an injected
 * random source, "balanced" and "ordered" tiers, shared keys, and sticky sessions' memory in this process.
 */
import { describe, expect, it } from "vitest";
import { selectCredentials, weightedOrder, type CredentialRecord } from "../../../src/core/chat/credentials/select.js";
import { createMemorySessionAffinity } from "../../../src/lib/session-affinity.js";

const seq = (...values: number[]) => {
  let i = 0;
  return () => values[i++ % values.length]!;
};

const cred = (over: Partial<CredentialRecord> & { id: string }): CredentialRecord => ({
  provider: "openai", disabled: false, allowedModels: null, allowedApiKeyHashes: null, allowedUserIds: null,
  isRequired: false, isFallback: false, isByokOnly: false, sortOrder: 0, createdAt: new Date(2026, 0, 1), ...over,
});
const req = { provider: "openai", model: "openai/gpt-4o", keyHash: "k", userId: "u" };

describe("weighted draw", () => {
  it("picks the first item with probability weight / total, then among the rest", () => {
    const items = [{ id: "a", w: 1 }, { id: "b", w: 3 }];
    // total 4: [0, 0.25) → a, [0.25, 1) → b
    expect(weightedOrder(items, (x) => x.w, seq(0.2)).map((x) => x.id)).toEqual(["a", "b"]);
    expect(weightedOrder(items, (x) => x.w, seq(0.25)).map((x) => x.id)).toEqual(["b", "a"]);
    expect(weightedOrder(items, (x) => x.w, seq(0.99)).map((x) => x.id)).toEqual(["b", "a"]);
    const three = [{ id: "a", w: 2 }, { id: "b", w: 2 }, { id: "c", w: 6 }];
    // 0.5 × 10 = 5 → c (a covers [0, 2), b [2, 4)); then 0.6 × 4 = 2.4 → b
    expect(weightedOrder(three, (x) => x.w, seq(0.5, 0.6)).map((x) => x.id)).toEqual(["c", "b", "a"]);
  });

  it("weights below 1 or absent count as 1; one item needs no draw", () => {
    let calls = 0;
    expect(weightedOrder([{ id: "x" }], () => undefined, () => (calls++, 0.5))).toEqual([{ id: "x" }]);
    expect(calls).toBe(0);
    expect(weightedOrder([{ id: "a", w: 0 }, { id: "b", w: -5 }], (x) => x.w, seq(0.6)).map((x) => x.id)).toEqual(["b", "a"]);
  });

  it("spreads in proportion to the weights over many draws", () => {
    let s = 12345;
    const lcg = () => ((s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const firsts = new Map<string, number>();
    for (let i = 0; i < 20_000; i++) {
      const first = weightedOrder([{ id: "a", w: 1 }, { id: "b", w: 3 }], (x) => x.w, lcg)[0]!.id;
      firsts.set(first, (firsts.get(first) ?? 0) + 1);
    }
    expect(firsts.get("b")! / 20_000).toBeGreaterThan(0.72);
    expect(firsts.get("b")! / 20_000).toBeLessThan(0.78);
  });
});

describe("selectCredentials with weights", () => {
  const byok = [cred({ id: "one", sortOrder: 0, weight: 1 }), cred({ id: "two", sortOrder: 1, weight: 9 }), cred({ id: "fb", isFallback: true })];
  const shared = [
    { id: "s1", provider: "openai", sortOrder: 0, weight: 1 },
    { id: "s2", provider: "openai", sortOrder: 0, weight: 1 },
    { id: "s3", provider: "openai", sortOrder: 5, weight: 100 },
  ];

  it("balanced: a tier is drawn by weight, sort_order plays no part; tiers keep their order", () => {
    const ids = selectCredentials(byok, shared, req, { order: "balanced", random: seq(0.5) }).map((s) => s.id);
    // own: total 10, 5 → two; shared: total 102, 51 → s3, then 0.5 × 2 → s2; fallback last
    expect(ids).toEqual(["two", "one", "s3", "s2", "s1", "fb"]);
  });

  it("ordered (and absent options): sort_order is strict, weights play no part", () => {
    const strict = ["one", "two", "s1", "s2", "s3", "fb"];
    expect(selectCredentials(byok, shared, req, { order: "ordered", random: seq(0.9) }).map((s) => s.id)).toEqual(strict);
    expect(selectCredentials(byok, shared, req).map((s) => s.id)).toEqual(strict);
  });
});

describe("session pins in memory", () => {
  it("live for the TTL after their last use and are bounded", async () => {
    let now = 1_000;
    const pins = createMemorySessionAffinity({ ttlMs: 100, maxEntries: 2, now: () => now });
    const pin = { provider: "openai", model: "gpt-4o", credentialId: "c1" };
    pins.set("org\u0000m", "s1", pin);
    expect(await pins.get("org\u0000m", "s1")).toEqual(pin);
    expect(await pins.get("other-org\u0000m", "s1")).toBeUndefined();
    now += 100;
    expect(await pins.get("org\u0000m", "s1")).toBeUndefined();
    pins.set("o", "a", pin);
    pins.set("o", "b", pin);
    pins.set("o", "c", pin);
    expect(pins.size).toBe(2);
    expect(await pins.get("o", "a")).toBeUndefined();
    expect(await pins.get("o", "c")).toEqual(pin);
  });
});
