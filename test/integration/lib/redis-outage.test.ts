/**
 * Redis going away: intern turns keep being limited (per process) without waiting on Redis, the
 * outage and the recovery are logged once each, and /readyz names redis while it is unreachable.
 * Uses a private redis-server on a free port (the shared one on 6379 is never touched).
 */
import { afterAll, describe, expect, it } from "vitest";
import { createTurnLimiter } from "../../../src/lib/turn-limiter.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { freePort, startPrivateRedis, type PrivateRedis } from "../../helpers/private-services.js";

describe("Redis outage", () => {
  let h: Harness | undefined;
  let redis: PrivateRedis | undefined;
  afterAll(async () => {
    await h?.close();
    await redis?.dispose();
  });

  it("a limiter whose Redis is unreachable answers from its per-process bucket", async () => {
    const port = await freePort(); // nothing listens here
    const limiter = createTurnLimiter({ points: 2, durationSeconds: 60, redisUrl: `redis://127.0.0.1:${port}` });
    try {
      expect(limiter.healthy()).toBe(false);
      expect(await limiter.take("k")).toEqual({ allowed: true });
      expect(await limiter.take("k")).toEqual({ allowed: true });
      expect((await limiter.take("k")).allowed).toBe(false);
      expect(await limiter.take("other")).toEqual({ allowed: true });
    } finally {
      await limiter.close();
    }
  });

  it("/readyz reports redis while it is down and recovers; the outage is logged once", async () => {
    redis = await startPrivateRedis();
    h = await startHarness({ env: { REDIS_URL: redis.url } });
    const ready = async () => (await fetch(`${h!.baseUrl}/readyz`)).status;
    await expect.poll(ready, { timeout: 10_000, interval: 50 }).toBe(200);

    // Count the outage's lines only: on a loaded machine the first connection may time out once at start-up
    // (logged then too, as it should be) before Redis answers.
    const before = h.logs.length;
    // Each component with a Redis connection (intern turn limiter, chat concurrency slots, health memory) says so once.
    const unreachableLines = () => {
      const perComponent: Record<string, number> = {};
      for (const line of h!.logs.slice(before)) {
        if (!line.includes("redis unreachable")) continue;
        const component = String((JSON.parse(line) as { component?: string }).component);
        perComponent[component] = (perComponent[component] ?? 0) + 1;
      }
      return perComponent;
    };
    await redis.stop();
    await expect.poll(ready, { timeout: 10_000, interval: 50 }).toBe(503);
    const down = await fetch(`${h.baseUrl}/readyz`);
    expect(((await down.json()) as any).error.message).toContain("redis");
    // Authenticated traffic still flows while Redis is down.
    expect((await api(h, "GET", "/key", { key: h.tenant.apiKey })).status).toBe(200);
    await expect.poll(() => unreachableLines()["turn-limiter"], { timeout: 10_000 }).toBe(1);

    await redis.start();
    await expect.poll(ready, { timeout: 15_000, interval: 100 }).toBe(200);
    await expect.poll(() => h!.logs.some((l) => l.includes("redis reachable again")), { timeout: 5_000 }).toBe(true);
    const lines = unreachableLines();
    expect(lines["turn-limiter"]).toBe(1);
    expect(lines["health-memory"]).toBe(1); // the cool-downs go on per process meanwhile
    expect(Object.values(lines).every((n) => n === 1), JSON.stringify(lines)).toBe(true);
  });
});
