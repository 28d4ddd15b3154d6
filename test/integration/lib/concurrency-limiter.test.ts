/**
 * The concurrency slots of src/lib/concurrency-limiter.ts: in memory, and in the real Redis shared by two
 * limiters (two core processes): one bound for both, a release frees a slot for the other, the slots of a
 * limiter that went away without releasing free themselves when their lease runs out, a held slot's lease is
 * renewed, and with Redis unreachable each limiter bounds its own process instead of refusing everything.
 */
import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { Redis } from "ioredis";
import { createMemoryConcurrencyLimiter, createRedisConcurrencyLimiter, type ConcurrencyLimiter } from "../../../src/lib/concurrency-limiter.js";

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

describe("concurrency limiter", () => {
  const open: ConcurrencyLimiter[] = [];
  const raw = new Redis(REDIS_URL, { lazyConnect: true });
  afterAll(async () => {
    await Promise.all(open.map((l) => l.close()));
    raw.disconnect();
  });
  const redisLimiter = (prefix: string, leaseMs?: number) => {
    const l = createRedisConcurrencyLimiter({ redisUrl: REDIS_URL, prefix, ...(leaseMs ? { leaseMs } : {}) });
    open.push(l);
    return l;
  };

  it("memory: at most `limit` per key, keys apart, release idempotent", async () => {
    const l = createMemoryConcurrencyLimiter();
    const a = await l.acquire("k", 2);
    const b = await l.acquire("k", 2);
    expect(a && b).toBeTruthy();
    expect(await l.acquire("k", 2)).toBeNull();
    expect(await l.acquire("other", 2)).not.toBeNull();
    a!.release();
    a!.release();
    expect(await l.acquire("k", 2)).not.toBeNull();
    expect(await l.acquire("k", 2)).toBeNull();
  });

  it("redis: two limiters share one bound; a release on one frees a slot for the other", async () => {
    const prefix = `test-${randomUUID()}:`;
    const one = redisLimiter(prefix);
    const two = redisLimiter(prefix);
    const a = await one.acquire("key", 2);
    const b = await two.acquire("key", 2);
    expect(a).not.toBeNull();
    expect(b).not.toBeNull();
    expect(await one.acquire("key", 2)).toBeNull();
    expect(await two.acquire("key", 2)).toBeNull();
    expect(await two.acquire("another", 2)).not.toBeNull();
    a!.release();
    await expect.poll(async () => (await two.acquire("key", 2)) !== null, { timeout: 5_000, interval: 10 }).toBe(true);
  });

  it("redis: the slots of a limiter gone without releasing free themselves when their lease runs out; held leases are renewed", async () => {
    const prefix = `test-${randomUUID()}:`;
    const gone = redisLimiter(prefix, 400);
    const alive = redisLimiter(prefix, 400);
    expect(await gone.acquire("dead", 1)).not.toBeNull();
    expect(await alive.acquire("held", 1)).not.toBeNull();
    await gone.close(); // a process that died: no release, no renewal
    // The dead limiter's slot runs out and the next acquire sweeps it.
    await expect.poll(async () => (await alive.acquire("dead", 1)) !== null, { timeout: 10_000, interval: 50 }).toBe(true);
    // The live slot's lease is moved forward past its first expiry, and it is still held.
    await raw.connect();
    const set = `${prefix}chat-slots:held`;
    const [member, score] = await raw.zrange(set, 0, -1, "WITHSCORES");
    await expect.poll(async () => Number(await raw.zscore(set, member!)), { timeout: 10_000, interval: 50 }).toBeGreaterThan(Number(score) + 400);
    expect(await redisLimiter(prefix, 400).acquire("held", 1)).toBeNull();
  });

  it("redis unreachable: each limiter bounds its own process", async () => {
    const l = createRedisConcurrencyLimiter({ redisUrl: "redis://127.0.0.1:1", prefix: "unreachable:" });
    open.push(l);
    const a = await l.acquire("key", 1);
    expect(a).not.toBeNull();
    expect(await l.acquire("key", 1)).toBeNull();
    a!.release();
    expect(await l.acquire("key", 1)).not.toBeNull();
  });
});
