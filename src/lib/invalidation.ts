/**
 * The invalidation bus: how a process tells every process (itself included) that a cached thing changed
 * (an API key revoked, a credential edited). Caches subscribe per topic and drop the named key; the bus
 * carries names only, never values or secrets (the health memory of `portico serve` workers without Redis sends
 * its cool-downs on topic `health`: a credential id or endpoint name with an end and a count).
 *
 * Implementations: in-process (one process, tests), and the cross-process ones (Redis pub/sub with
 * REDIS_URL, PostgreSQL LISTEN/NOTIFY, the cluster primary for `npm start` workers) built on this seam.
 * A cache that relies on the bus must also bound staleness on its own (a TTL) so a lost message or a
 * broken connection cannot keep a revoked key alive for more than the documented bound.
 */
import { randomUUID } from "node:crypto";
import { createRedisClient } from "./redis.js";

export interface InvalidationBus {
  /** Announces that `key` under `topic` changed. Resolves once the message is handed to the transport. */
  publish(topic: string, key: string): Promise<void>;
  /** Calls `fn` for every key published under `topic` by any process. Returns the unsubscribe. */
  subscribe(topic: string, fn: (key: string) => void): () => void;
  close(): Promise<void>;
}

/** The bus of a single process: publish calls the subscribers synchronously. */
export function createLocalInvalidationBus(): InvalidationBus {
  const topics = new Map<string, Set<(key: string) => void>>();
  return {
    async publish(topic, key) {
      for (const fn of topics.get(topic) ?? []) fn(key);
    },
    subscribe(topic, fn) {
      let set = topics.get(topic);
      if (!set) topics.set(topic, (set = new Set()));
      set.add(fn);
      return () => {
        set.delete(fn);
      };
    },
    async close() {
      topics.clear();
    },
  };
}

export interface RedisInvalidationBusOptions {
  redisUrl: string;
  /** Prefix of the channel (PORTICO_REDIS_PREFIX); the channel is `<prefix>invalidate`. */
  prefix: string;
  /** Told when the subscription is lost or back (never with a URL or a password). */
  onStatus?: (connected: boolean) => void;
}

/**
 * The bus of several processes sharing Redis: a message is delivered to this process's subscribers at
 * once and published on one Redis channel for the others. Redis pub/sub does not store messages, so a
 * process that is disconnected misses them; caches on this bus bound their staleness on their own.
 */
export function createRedisInvalidationBus(opts: RedisInvalidationBusOptions): InvalidationBus {
  const local = createLocalInvalidationBus();
  // Marks this bus's own messages, which it has already delivered locally (unique even for two buses in one process).
  const origin = randomUUID();
  const channel = `${opts.prefix}invalidate`;
  const redisOptions = { lazyConnect: false, maxRetriesPerRequest: 1, connectTimeout: 2_000, commandTimeout: 1_000 };
  const pub = createRedisClient(opts.redisUrl, { ...redisOptions, enableOfflineQueue: false });
  const sub = createRedisClient(opts.redisUrl, redisOptions);
  pub.on("error", () => undefined);
  sub.on("error", () => opts.onStatus?.(false));
  sub.on("ready", () => opts.onStatus?.(true));
  void sub.subscribe(channel).catch(() => undefined);
  sub.on("message", (ch: string, raw: string) => {
    if (ch !== channel) return;
    try {
      const msg = JSON.parse(raw) as { from?: string; topic?: string; key?: string };
      if (msg.from === origin || typeof msg.topic !== "string" || typeof msg.key !== "string") return;
      void local.publish(msg.topic, msg.key);
    } catch {
      // not one of ours
    }
  });
  return {
    async publish(topic, key) {
      await local.publish(topic, key);
      if (pub.status !== "ready") await ready(pub, 1_000);
      await pub.publish(channel, JSON.stringify({ from: origin, topic, key })).catch(() => undefined);
    },
    subscribe: (topic, fn) => local.subscribe(topic, fn),
    async close() {
      await local.close();
      sub.disconnect();
      pub.disconnect();
    },
  };
}

/** Resolves when the client is ready or after `ms`, whichever comes first (a publish then fails fast). */
function ready(client: { once(ev: "ready", fn: () => void): unknown; off(ev: "ready", fn: () => void): unknown }, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      client.off("ready", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    client.once("ready", done);
  });
}

/** The bus a process of this deployment uses: Redis pub/sub with REDIS_URL, else this process only. */
export function createInvalidationBus(
  config: { redisUrl: string | undefined; interns: { redisPrefix: string } },
  logger?: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void },
): InvalidationBus {
  if (!config.redisUrl) return createLocalInvalidationBus();
  let connected = true;
  return createRedisInvalidationBus({
    redisUrl: config.redisUrl,
    prefix: config.interns.redisPrefix,
    onStatus(up) {
      if (up === connected) return;
      connected = up;
      if (up) logger?.info({}, "invalidation bus: Redis subscription restored");
      else logger?.warn({}, "invalidation bus: Redis is not reachable; cached API keys fall back to their time bound");
    },
  });
}
