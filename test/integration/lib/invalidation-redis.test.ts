/**
 * The Redis invalidation bus against the machine's Redis: a message published by one process's bus
 * reaches every other bus on the same prefix once, is delivered locally without waiting for Redis,
 * and never crosses into another prefix.
 */
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { createRedisInvalidationBus, type InvalidationBus } from "../../../src/lib/invalidation.js";

const REDIS_URL = process.env.PORTICO_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

describe("Redis invalidation bus", () => {
  const buses: InvalidationBus[] = [];
  afterEach(async () => {
    for (const b of buses.splice(0)) await b.close();
  });
  const open = (prefix: string) => {
    let ready!: () => void;
    const subscribed = new Promise<void>((r) => (ready = r));
    const bus = createRedisInvalidationBus({ redisUrl: REDIS_URL, prefix, onStatus: (up) => up && ready() });
    buses.push(bus);
    return { bus, subscribed };
  };
  const next = (bus: InvalidationBus, topic: string) => new Promise<string>((resolve) => {
    const off = bus.subscribe(topic, (key) => {
      off();
      resolve(key);
    });
  });

  it("delivers to the other processes' buses and to its own once", async () => {
    const prefix = `test-${randomUUID()}:`;
    const a = open(prefix);
    const b = open(prefix);
    const other = open(`test-${randomUUID()}:`);
    await Promise.all([a.subscribed, b.subscribed, other.subscribed]);

    const own: string[] = [];
    a.bus.subscribe("auth", (k) => own.push(k));
    const strays: string[] = [];
    other.bus.subscribe("auth", (k) => strays.push(k));
    const atB = next(b.bus, "auth");
    await a.bus.publish("auth", "hash-1");
    expect(own).toEqual(["hash-1"]); // delivered locally before publish resolved
    expect(await atB).toBe("hash-1");
    // A second message proves the first was not echoed back to A, nor sent to another prefix.
    const atB2 = next(b.bus, "auth");
    await a.bus.publish("auth", "hash-2");
    expect(await atB2).toBe("hash-2");
    expect(own).toEqual(["hash-1", "hash-2"]);
    expect(strays).toEqual([]);
  });
});
