import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { createTurnLimiter, type TurnLimiter } from "../../../src/lib/turn-limiter.js";

const REDIS_URL = process.env.PORTICO_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

describe("intern turn limiter", () => {
  const open: TurnLimiter[] = [];
  afterEach(async () => {
    for (const l of open.splice(0)) await l.close();
  });

  it("allows `points` turns per key per window in one process, then says how long to wait", async () => {
    const limiter = createTurnLimiter({ points: 2, durationSeconds: 30 });
    open.push(limiter);
    expect(await limiter.take("k1")).toEqual({ allowed: true });
    expect(await limiter.take("k1")).toEqual({ allowed: true });
    const third = await limiter.take("k1");
    expect(third.allowed).toBe(false);
    if (!third.allowed) expect(third.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(await limiter.take("k2")).toEqual({ allowed: true });
  });

  it("shares one budget between core processes through Redis", async () => {
    const a = createTurnLimiter({ points: 3, durationSeconds: 30, redisUrl: REDIS_URL });
    const b = createTurnLimiter({ points: 3, durationSeconds: 30, redisUrl: REDIS_URL });
    open.push(a, b);
    // Until its connection is up, a limiter counts per process (it never waits on Redis).
    await expect.poll(() => a.healthy() && b.healthy(), { timeout: 10_000, interval: 10 }).toBe(true);
    const key = `test-${randomUUID()}`;
    expect((await a.take(key)).allowed).toBe(true);
    expect((await b.take(key)).allowed).toBe(true);
    expect((await a.take(key)).allowed).toBe(true);
    const fourth = await b.take(key);
    expect(fourth.allowed).toBe(false);
    if (!fourth.allowed) expect(fourth.retryAfterSeconds).toBeGreaterThan(20);
  });
});
