/**
 * Concurrency slots per key: at most `limit` held at once for one key. Used for the per-API-key bound on chat
 * completions in flight (src/core/chat/pipeline/limits.ts; docs/chat.md "Limits").
 *
 * Where the count lives, as for the intern turn limit:
 * - one process: a map in memory (exact);
 * - the workers of one `portico serve` without Redis: the primary (src/cluster/ipc.ts `createIpcSlots`), which
 *   drops a worker's slots when the worker exits;
 * - REDIS_URL: a sorted set per key (`<prefix>chat-slots:<key>`, one member per slot, scored by its lease's
 *   expiry); the process that holds a slot renews its lease every third of the lease time, so the slots of a
 *   process that died free themselves within one lease time (30 s). While Redis is unreachable each process
 *   counts on its own (the bound holds per process) rather than refusing every request.
 */
import { randomUUID } from "node:crypto";
import { createRedisClient, type Redis } from "./redis.js";
import type { Logger } from "../log.js";

export interface Slot {
  /** Gives the slot back; calling it again does nothing. */
  release(): void;
}

export interface ConcurrencyLimiter {
  /** A slot for `key` when fewer than `limit` are held for it; null when all are taken. */
  acquire(key: string, limit: number): Promise<Slot | null>;
  close(): Promise<void>;
}

/** Exact in one process. */
export function createMemoryConcurrencyLimiter(): ConcurrencyLimiter {
  const held = new Map<string, number>();
  return {
    async acquire(key, limit) {
      return take(held, key, limit);
    },
    async close() {},
  };
}

/** Synchronous take on a count map (shared by the memory limiter and the fallbacks). */
export function take(held: Map<string, number>, key: string, limit: number): Slot | null {
  const n = held.get(key) ?? 0;
  if (n >= limit) return null;
  held.set(key, n + 1);
  return once(() => {
    const left = (held.get(key) ?? 1) - 1;
    if (left <= 0) held.delete(key);
    else held.set(key, left);
  });
}

export function once(fn: () => void): Slot {
  let done = false;
  return {
    release() {
      if (done) return;
      done = true;
      fn();
    },
  };
}

/** Lease of a slot in Redis; renewed every third of it while held. */
export const SLOT_LEASE_MS = 30_000;
const REDIS_CONNECT_TIMEOUT_MS = 1_000;
const REDIS_COMMAND_TIMEOUT_MS = 250;

/** KEYS[1] the key's sorted set; ARGV: lease ms, limit, member. Returns 1 when the slot was taken. */
const ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return 1
end
return 0
`;

/** KEYS: the sorted sets; ARGV[1] lease ms, ARGV[2..] the members, one per key. Renews leases still present. */
const RENEW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', now + tonumber(ARGV[1]), ARGV[i + 1])
  redis.call('PEXPIRE', key, ARGV[1])
end
return 0
`;

export function createRedisConcurrencyLimiter(opts: { redisUrl: string; prefix: string; logger?: Logger; leaseMs?: number }): ConcurrencyLimiter {
  const leaseMs = opts.leaseMs ?? SLOT_LEASE_MS;
  const redis: Redis = createRedisClient(opts.redisUrl, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    retryStrategy: (attempt) => Math.min(100 * attempt, 2_000),
  });
  let warned = false;
  // The first connection is awaited (bounded by the connect timeout) so that a process just started counts in
  // Redis rather than on its own; after that, an unreachable Redis falls back at once.
  const firstAnswer = new Promise<void>((resolve) => {
    redis.once("ready", resolve);
    redis.once("error", resolve);
    setTimeout(resolve, REDIS_CONNECT_TIMEOUT_MS).unref();
  });
  redis.on("error", (err: Error) => {
    if (warned) return;
    warned = true;
    opts.logger?.warn({ component: "chat-limits", err: { message: err.message } }, "redis unreachable; chat concurrency is bounded per process until it is back");
  });
  redis.on("ready", () => {
    if (warned) opts.logger?.info({ component: "chat-limits" }, "redis reachable again; chat concurrency is bounded across processes again");
    warned = false;
  });
  const local = new Map<string, number>(); // the fallback while Redis is unreachable
  const leases = new Map<string, string>(); // member → sorted set key, for renewal
  const redisKey = (key: string) => `${opts.prefix}chat-slots:${key}`;
  // EVALSHA with a fallback to EVAL (ioredis), so the script is not sent with every request.
  redis.defineCommand("porticoAcquireSlot", { numberOfKeys: 1, lua: ACQUIRE });
  const acquireSlot = (set: string, limit: number, member: string) =>
    (redis as unknown as { porticoAcquireSlot(k: string, lease: number, limit: number, member: string): Promise<unknown> }).porticoAcquireSlot(
      set,
      leaseMs,
      limit,
      member,
    );

  const renew = setInterval(() => {
    if (leases.size === 0 || redis.status !== "ready") return;
    const keys = [...leases.values()];
    redis.eval(RENEW, keys.length, ...keys, leaseMs, ...leases.keys()).catch(() => {});
  }, Math.max(10, Math.floor(leaseMs / 3)));
  renew.unref();

  return {
    async acquire(key, limit) {
      const set = redisKey(key);
      const member = randomUUID();
      let granted: unknown;
      await firstAnswer;
      try {
        granted = await acquireSlot(set, limit, member);
      } catch {
        return take(local, key, limit);
      }
      if (granted !== 1) return null;
      leases.set(member, set);
      return once(() => {
        leases.delete(member);
        redis.zrem(set, member).catch(() => {}); // unreachable: the lease runs out on its own
      });
    },
    async close() {
      clearInterval(renew);
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
