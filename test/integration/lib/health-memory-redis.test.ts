/**
 * The health memory shared through the machine's Redis (src/lib/health-memory.ts): two instances on one prefix;
 * a cool-down set on one reaches the other by its subscription (waited for, never slept on), and reading it
 * there sends nothing to Redis (MONITOR sees no command between two markers around a thousand reads); Redis
 * keeps the later end; an instance started afterwards loads what is cooling; a success's reset travels too;
 * another prefix sees nothing; an unreachable Redis leaves an instance working on its own map, and once Redis
 * is back (a private redis-server stopped and started) the instances share again.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { createRedisHealthMemory, type RedisHealthMemory } from "../../../src/lib/health-memory.js";
import { credentialKey, endpointKey } from "../../../src/core/chat/routing/health.js";
import { freePort, startPrivateRedis } from "../../helpers/private-services.js";

const REDIS_URL = process.env.PORTICO_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

describe("health memory over Redis", () => {
  const closers: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });

  /** An instance, with a way to wait for the next message of another instance about `key`. */
  const open = async (prefix: string, url = REDIS_URL) => {
    const waiting = new Map<string, Array<() => void>>();
    const seen: string[] = [];
    const memory: RedisHealthMemory = createRedisHealthMemory({
      redisUrl: url,
      prefix,
      onShared: (key) => {
        seen.push(key);
        for (const fn of waiting.get(key)?.splice(0) ?? []) fn();
      },
    });
    closers.push(() => memory.close());
    await memory.loaded;
    const shared = (key: string) => new Promise<void>((resolve) => waiting.set(key, [...(waiting.get(key) ?? []), resolve]));
    return { memory, shared, seen };
  };

  it("a cool-down set on one instance is seen by the other through its subscription, and read there without Redis", async () => {
    const prefix = `test-${randomUUID()}:`;
    const a = await open(prefix);
    const b = await open(prefix);
    const stranger = await open(`test-${randomUUID()}:`);
    const cred = credentialKey("cred-1");
    // Endpoint keys hold any character a provider's model id may (slashes, colons, the separator of messages).
    const endpoint = endpointKey("together", "meta-llama/Llama-3.3-70B|Turbo:free");

    const atB = b.shared(cred);
    const end = a.memory.failed(cred, 30_000);
    expect(a.memory.coolingUntil(cred)).toBe(end); // at once where it happened
    await atB;
    expect(b.memory.coolingUntil(cred)).toBe(end);

    const endpointAtB = b.shared(endpoint);
    const endpointEnd = a.memory.failed(endpoint);
    await endpointAtB;
    expect(b.memory.coolingUntil(endpoint)).toBe(endpointEnd);

    // Reads are local: MONITOR sees no command of this prefix between two markers around many reads.
    const monitored: string[] = [];
    const client = new Redis(REDIS_URL);
    closers.push(() => client.quit());
    const monitor = await new Redis(REDIS_URL).monitor();
    closers.push(async () => monitor.disconnect());
    const marker = (name: string) =>
      new Promise<void>((resolve) => {
        const on = (_time: string, args: string[]) => {
          if (args[1] === `${prefix}${name}`) {
            monitor.off("monitor", on);
            resolve();
          }
        };
        monitor.on("monitor", on);
        void client.get(`${prefix}${name}`);
      });
    monitor.on("monitor", (_time: string, args: string[]) => {
      if (args.some((x) => x.includes(prefix))) monitored.push(args.join(" "));
    });
    await marker("before");
    const from = monitored.length;
    for (let i = 0; i < 1_000; i++) {
      expect(b.memory.coolingUntil(cred)).toBe(end);
      expect(b.memory.coolingUntil(endpoint)).toBe(endpointEnd);
      b.memory.succeeded(credentialKey(`healthy-${i % 10}`)); // successes of keys that never failed: nothing to share
    }
    await new Promise((r) => setImmediate(r));
    await marker("after");
    expect(monitored.slice(from)).toEqual([`get ${prefix}after`]);

    // A shorter wait from B, known to be shorter, is not even written.
    expect(b.memory.failed(cred, 5_000)).toBe(end);
    expect((await client.get(`${prefix}health:${cred}`))?.split(":")[0]).toBe(String(end));
    expect(await client.pttl(`${prefix}health:${cred}`)).toBeGreaterThan(25_000);
    // Two instances cooling one key at once, neither knowing the other's: Redis and both keep the later end.
    const raced = credentialKey("cred-raced");
    const atA = a.shared(raced);
    const atB2 = b.shared(raced);
    const longer = a.memory.failed(raced, 30_000);
    const shorter = b.memory.failed(raced, 5_000);
    expect(shorter).toBeLessThan(longer);
    await Promise.all([atA, atB2]);
    expect(a.memory.coolingUntil(raced)).toBe(longer);
    expect(b.memory.coolingUntil(raced)).toBe(longer);
    expect((await client.get(`${prefix}health:${raced}`))?.split(":")[0]).toBe(String(longer));

    // An instance started now loads what is cooling, without any message.
    const c = await open(prefix);
    expect(c.memory.coolingUntil(cred)).toBe(end);
    expect(c.memory.coolingUntil(endpoint)).toBe(endpointEnd);
    expect(c.seen).toEqual([]);

    // A success on A (the endpoint answered again) ends the grown cool-down everywhere.
    const resetAtB = b.shared(endpoint);
    const resetAtC = c.shared(endpoint);
    a.memory.succeeded(endpoint);
    await Promise.all([resetAtB, resetAtC]);
    expect(b.memory.coolingUntil(endpoint)).toBeUndefined();
    expect(c.memory.coolingUntil(endpoint)).toBeUndefined();
    expect(await client.exists(`${prefix}health:${endpoint}`)).toBe(0);

    // Nothing crossed into another prefix.
    expect(stranger.seen).toEqual([]);
    expect(stranger.memory.coolingUntil(cred)).toBeUndefined();
  });

  it("the count of consecutive failures is shared: the next failure on the other instance cools for the next step", async () => {
    const prefix = `test-${randomUUID()}:`;
    const a = await open(prefix);
    const b = await open(prefix);
    const key = endpointKey("groq", "m");
    const first = b.shared(key);
    const t0 = Date.now();
    const end1 = a.memory.failed(key, undefined, t0); // 1 s
    await first;
    // B fails it once the first cool-down is over: its second, 2 s.
    const second = a.shared(key);
    expect(b.memory.failed(key, undefined, end1) - end1).toBe(2_000);
    await second;
    expect(a.memory.coolingUntil(key, end1)).toBe(end1 + 2_000);
  });

  it("while Redis is down each instance keeps its own cool-downs; once it is back they are shared again", async () => {
    const redis = await startPrivateRedis();
    closers.push(() => redis.dispose());
    const prefix = `test-${randomUUID()}:`;
    const a = await open(prefix, redis.url);
    const b = await open(prefix, redis.url);
    const before = b.shared("k1");
    a.memory.failed("k1", 10_000);
    await before;

    await redis.stop();
    const end = a.memory.failed("k2", 10_000); // no Redis: kept here, nothing thrown, nothing awaited
    expect(a.memory.coolingUntil("k2")).toBe(end);
    expect(b.memory.coolingUntil("k2")).toBeUndefined();
    expect(b.memory.coolingUntil("k1")).toBeDefined(); // what B knew stays

    await redis.start();
    // B resubscribes on its own: a change on A reaches it again (A retries until its connection is back too).
    await expect.poll(() => (a.memory.failed("k3", 10_000), b.memory.coolingUntil("k3")), { timeout: 15_000, interval: 50 }).toBeDefined();
    const after = b.shared("k4"); // by message: B is subscribed again
    a.memory.failed("k4", 10_000);
    await after;
  });

  it("a cool-down set while Redis was down is written once it is back: the other instance and a later one learn it; one that ended is not", async () => {
    const redis = await startPrivateRedis();
    closers.push(() => redis.dispose());
    const prefix = `test-${randomUUID()}:`;
    const a = await open(prefix, redis.url);
    const b = await open(prefix, redis.url);

    await redis.stop(); // SIGKILL, no persistence: Redis comes back empty
    const now = Date.now();
    const lasting = credentialKey("down-lasting");
    const brief = credentialKey("down-brief");
    const forgotten = credentialKey("down-forgotten");
    const end = a.memory.failed(lasting, 60_000, now);
    a.memory.failed(brief, 0, now); // a wait of 0: over before Redis is back
    a.memory.failed(forgotten, 60_000, now);
    a.memory.succeeded(forgotten, now); // a provider's wait: still cooling after the success
    expect(b.memory.coolingUntil(lasting)).toBeUndefined();

    const atB = b.shared(lasting);
    const forgottenAtB = b.shared(forgotten);
    await redis.start();
    await atB; // by message, once A reconnected, loaded and replayed
    expect(b.memory.coolingUntil(lasting)).toBe(end);
    await forgottenAtB;
    expect(b.memory.coolingUntil(forgotten)).toBe(end);
    // Stored too: an instance started now loads it; the cool-down that had ended was not written.
    const client = new Redis(redis.url);
    closers.push(() => client.quit());
    expect((await client.get(`${prefix}health:${lasting}`))?.split(":")[0]).toBe(String(end));
    expect(await client.get(`${prefix}health:${brief}`)).toBeNull();
    const c = await open(prefix, redis.url);
    expect(c.memory.coolingUntil(lasting)).toBe(end);
    expect(b.seen).not.toContain(brief);
  });

  it("without a reachable Redis an instance works on its own map and never throws", async () => {
    const port = await freePort(); // nothing listens here
    const { memory } = await open(`test-${randomUUID()}:`, `redis://127.0.0.1:${port}`);
    const key = credentialKey("lonely");
    const end = memory.failed(key, 10_000);
    expect(memory.coolingUntil(key)).toBe(end);
    memory.succeeded(key);
    expect(memory.coolingUntil(key)).toBe(end); // a provider's wait runs out on its own
  });
});
