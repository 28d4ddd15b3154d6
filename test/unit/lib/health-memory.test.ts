/**
 * The health memory's rules (src/lib/health-memory.ts; docs/routing.md, "The health memory"): cool-downs grow
 * 1 s, 2 s, 4 s … up to 30 s with consecutive failures, a failure during a cool-down does not grow it, a success
 * resets, a provider's Retry-After (seconds, HTTP date, retry-after-ms) is the cool-down, the later end wins,
 * a count is forgotten after a quiet while, the map is bounded; and the chat policy on top (routing/health.ts):
 * which failure cools the credential, which the endpoint.
 */
import { describe, expect, it } from "vitest";
import {
  DEFAULT_COOLDOWN_BASE_MS,
  DEFAULT_COOLDOWN_MAX_MS,
  FORGET_AFTER_MS,
  LocalHealth,
  SHARE_STEP_MS,
  createBusHealthMemory,
  createMemoryHealthMemory,
  growthStep,
} from "../../../src/lib/health-memory.js";
import { createLocalInvalidationBus } from "../../../src/lib/invalidation.js";
import { retryAfterMs } from "../../../src/core/chat/providers/http.js";
import { credentialKey, endpointKey, noteFailure, noteSuccess } from "../../../src/core/chat/routing/health.js";

const T0 = Date.UTC(2030, 0, 1);

describe("health memory", () => {
  it("grows 1 s, 2 s, 4 s, 8 s, 16 s, then 30 s, counting the failures after each cool-down ended", () => {
    expect([DEFAULT_COOLDOWN_BASE_MS, DEFAULT_COOLDOWN_MAX_MS]).toEqual([1_000, 30_000]);
    expect([1, 2, 3, 4, 5, 6, 7, 50].map((n) => growthStep(n))).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
    const m = createMemoryHealthMemory();
    let t = T0;
    const waits: number[] = [];
    for (let i = 0; i < 7; i++) {
      const end = m.failed("k", undefined, t);
      waits.push(end - t);
      expect(m.coolingUntil("k", end - 1)).toBe(end);
      expect(m.coolingUntil("k", end)).toBeUndefined(); // over at its end
      t = end; // the next attempt, once the cool-down ended, fails again
    }
    expect(waits).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
  });

  it("a failure inside a cool-down (a burst of requests sent before it) does not grow it; it cools again from then", () => {
    const m = createMemoryHealthMemory();
    expect(m.failed("k", undefined, T0)).toBe(T0 + 1_000);
    for (let i = 0; i < 20; i++) expect(m.failed("k", undefined, T0 + 10)).toBe(T0 + 1_010);
    expect(m.failed("k", undefined, T0 + 1_010)).toBe(T0 + 1_010 + 2_000); // the second cool-down: 2 s
  });

  it("a success resets the count and ends a grown cool-down; nothing is stored for keys that never failed", () => {
    const m = createMemoryHealthMemory();
    m.succeeded("never", T0);
    expect(m.size).toBe(0);
    let t = T0;
    for (let i = 0; i < 3; i++) t = m.failed("k", undefined, t); // 1 s, 2 s, 4 s
    m.failed("k", undefined, t);
    expect(m.coolingUntil("k", t)).toBe(t + 8_000);
    m.succeeded("k", t + 1);
    expect(m.coolingUntil("k", t + 1)).toBeUndefined();
    expect(m.size).toBe(0);
    expect(m.failed("k", undefined, t + 2)).toBe(t + 2 + 1_000); // from the start again
  });

  it("honours the provider's wait in every form it is sent, and a success does not cut it short", () => {
    const m = createMemoryHealthMemory();
    const forms = {
      seconds: retryAfterMs({ "retry-after": "30" }, T0),
      date: retryAfterMs({ "retry-after": new Date(T0 + 45_000).toUTCString() }, T0),
      ms: retryAfterMs({ "retry-after-ms": "1500" }, T0),
    };
    expect(forms).toEqual({ seconds: 30_000, date: 45_000, ms: 1_500 });
    for (const [key, wait] of Object.entries(forms)) expect(m.failed(key, wait, T0)).toBe(T0 + wait!);
    m.succeeded("seconds", T0 + 1); // a request sent before the 429 answered meanwhile
    expect(m.coolingUntil("seconds", T0 + 1)).toBe(T0 + 30_000);
    // The wait replaces the step even when shorter, and 0 means no cool-down.
    expect(m.failed("zero", 0, T0)).toBe(T0);
    expect(m.coolingUntil("zero", T0)).toBeUndefined();
  });

  it("keeps the later end: a shorter wait or step never shortens a cool-down", () => {
    const m = createMemoryHealthMemory();
    expect(m.failed("k", 20_000, T0)).toBe(T0 + 20_000);
    expect(m.failed("k", 5_000, T0 + 1)).toBe(T0 + 20_000);
    expect(m.failed("k", undefined, T0 + 2)).toBe(T0 + 20_000);
    expect(m.failed("k", 60_000, T0 + 3)).toBe(T0 + 60_003);
  });

  it("forgets a count a while after its cool-down ended without a new failure", () => {
    const m = createMemoryHealthMemory();
    let t = T0;
    for (let i = 0; i < 4; i++) t = m.failed("k", undefined, t); // last cool-down ends at t
    expect(m.failed("k", undefined, t + FORGET_AFTER_MS - 1) - (t + FORGET_AFTER_MS - 1)).toBe(16_000);
    const end = m.coolingUntil("k", t + FORGET_AFTER_MS)!;
    expect(m.failed("k", undefined, end + FORGET_AFTER_MS) - (end + FORGET_AFTER_MS)).toBe(1_000);
  });

  it("is bounded: past maxEntries the least recently changed keys go first", () => {
    const m = createMemoryHealthMemory({ maxEntries: 3 });
    for (const k of ["a", "b", "c"]) m.failed(k, 60_000, T0);
    m.failed("a", 60_000, T0 + 1); // a changed again: b is now the oldest
    m.failed("d", 60_000, T0 + 2);
    expect(m.size).toBe(3);
    expect(["a", "b", "c", "d"].map((k) => m.coolingUntil(k, T0 + 3) !== undefined)).toEqual([true, false, true, true]);
  });

  it("shares each change once: a burst of failures inside a cool-down, and successes of healthy keys, are not written", () => {
    const shared: string[] = [];
    const local = new LocalHealth({}, (key, state) => shared.push(`${key}:${state ? `${state.until - T0}/${state.streak}` : "reset"}`));
    local.succeeded("k", T0); // never failed: nothing
    local.failed("k", undefined, T0);
    for (let i = 1; i < 50; i++) local.failed("k", undefined, T0 + i); // concurrent requests failing within 50 ms
    local.failed("k", undefined, T0 + SHARE_STEP_MS); // the end moved 250 ms later: shared
    local.failed("k", 20_000, T0 + 300); // the provider's wait: shared
    local.succeeded("k", T0 + 400); // its wait stands; the count is reset: shared
    local.succeeded("k", T0 + 500); // nothing new
    expect(shared).toEqual(["k:1000/1", `k:${SHARE_STEP_MS + 1_000}/1`, "k:20300/1", "k:20300/0"]);
  });

  it("takes its numbers from the options (PORTICO_COOLDOWN_BASE_MS, PORTICO_COOLDOWN_MAX_MS)", () => {
    const m = createMemoryHealthMemory({ baseMs: 250, maxMs: 1_000 });
    let t = T0;
    const waits: number[] = [];
    for (let i = 0; i < 5; i++) {
      const end = m.failed("k", undefined, t);
      waits.push(end - t);
      t = end;
    }
    expect(waits).toEqual([250, 500, 1_000, 1_000, 1_000]);
  });
});

describe("chat health policy", () => {
  const a = { credentialId: "cred-1", healthKey: endpointKey("groq", "llama") };

  it("a 429 cools the credential (its end is the caller's Retry-After), not the endpoint", () => {
    const m = createMemoryHealthMemory();
    const end = noteFailure(m, a, { status: 429, retryAfterMs: 30_000 });
    expect(end).toBe(m.coolingUntil(credentialKey("cred-1")));
    expect(end! - Date.now()).toBeGreaterThan(29_000);
    expect(m.coolingUntil(a.healthKey)).toBeUndefined();
    // Without a wait, the growing step.
    const other = noteFailure(m, { credentialId: "cred-2" }, { status: 429 });
    expect(other! - Date.now()).toBeLessThanOrEqual(1_000);
  });

  it("an outage (5xx, no response, timeout) cools the endpoint, not the credential; a 503 with a wait cools both", () => {
    for (const err of [{ status: 500 }, { status: 0 }, { status: 502, timedOut: true }, { status: 200, timedOut: true }, { status: 408 }]) {
      const m = createMemoryHealthMemory();
      expect(noteFailure(m, a, err)).toBeUndefined();
      expect(m.coolingUntil(a.healthKey)).toBeDefined();
      expect(m.coolingUntil(credentialKey("cred-1"))).toBeUndefined();
    }
    const m = createMemoryHealthMemory();
    noteFailure(m, a, { status: 503, retryAfterMs: 10_000 });
    expect(m.coolingUntil(a.healthKey)! - Date.now()).toBeGreaterThan(9_000);
    expect(m.coolingUntil(credentialKey("cred-1"))! - Date.now()).toBeGreaterThan(9_000);
  });

  it("401/403 and 400 cool nothing; a success forgets both keys", () => {
    const m = createMemoryHealthMemory();
    for (const status of [400, 401, 403, 404]) noteFailure(m, a, { status });
    expect(m.size).toBe(0);
    noteFailure(m, a, { status: 500 });
    noteFailure(m, a, { status: 429 });
    expect(m.size).toBe(2);
    noteSuccess(m, a);
    expect(m.size).toBe(0);
  });
});

describe("health memory of serve workers without Redis (over the invalidation bus)", () => {
  it("a change on one worker reaches the other; its own message is not applied twice; a reset travels", async () => {
    const bus = createLocalInvalidationBus(); // stands for the primary relaying between workers
    const seen = { a: [] as string[], b: [] as string[] };
    const a = createBusHealthMemory({ bus, onShared: (k) => seen.a.push(k) });
    const b = createBusHealthMemory({ bus, onShared: (k) => seen.b.push(k) });
    const key = endpointKey("groq", "a|b:c/d");
    const end = a.failed(key);
    await Promise.resolve();
    expect(b.coolingUntil(key)).toBe(end);
    expect(seen).toEqual({ a: [], b: [key] });
    a.succeeded(key);
    await Promise.resolve();
    expect(b.coolingUntil(key)).toBeUndefined();
    expect(b.size).toBe(0);
    await a.close();
    b.failed(key, 5_000);
    expect(a.coolingUntil(key)).toBeUndefined(); // closed: no longer listening
  });
});

