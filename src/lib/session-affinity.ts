/**
 * Sticky routing's memory (docs/routing.md, "Sticky sessions"): which endpoint and credential last served a
 * session, so the next request of the same session goes there while it is healthy and the provider's prompt
 * cache keeps hitting. Each entry lives `ttlMs` after the last request that used it. Two implementations: memory
 * (this process only, at most `maxEntries`, the least recently used dropped first) and Redis with REDIS_URL
 * (`<prefix>sticky:<sha-256 of scope and session>`, `SET … PX`), shared by every instance. Redis being slow or
 * unreachable never fails a request: a read that does not answer within its command timeout is "no pin".
 */
import { createHash } from "node:crypto";
import { createRedisClient, type Redis } from "./redis.js";

/** Where a session was last served. */
export interface SessionPin {
  provider: string;
  /** The provider's model id (the endpoint is provider + this). */
  model: string;
  credentialId: string;
}

export interface SessionAffinity {
  /** The pin of `session` within `scope` (organization and requested model), when one is remembered. */
  get(scope: string, session: string): Promise<SessionPin | undefined>;
  /** Remembers (or refreshes) the pin; never waits on the network. */
  set(scope: string, session: string, pin: SessionPin): void;
  close(): Promise<void>;
}

export interface SessionAffinityOptions {
  /** How long a pin lives after its last use, ms (PORTICO_STICKY_TTL_MS). */
  ttlMs: number;
  /** Pins kept in memory at most (PORTICO_STICKY_MAX_SESSIONS); memory implementation only. */
  maxEntries?: number;
  now?: () => number;
}

export const DEFAULT_STICKY_TTL_MS = 3_600_000;
export const DEFAULT_STICKY_MAX_SESSIONS = 10_000;

const keyOf = (scope: string, session: string) => createHash("sha256").update(scope).update("\u0000").update(session).digest("base64url");
const encode = (p: SessionPin) => JSON.stringify([p.provider, p.model, p.credentialId]);
function decode(text: string | null | undefined): SessionPin | undefined {
  if (!text) return undefined;
  try {
    const v = JSON.parse(text) as unknown;
    if (Array.isArray(v) && v.length === 3 && v.every((x) => typeof x === "string")) return { provider: v[0] as string, model: v[1] as string, credentialId: v[2] as string };
  } catch {
    /* not a pin */
  }
  return undefined;
}

/** Pins of this process alone, bounded. */
export function createMemorySessionAffinity(opts: SessionAffinityOptions): SessionAffinity & { readonly size: number } {
  const now = opts.now ?? Date.now;
  const max = Math.max(1, opts.maxEntries ?? DEFAULT_STICKY_MAX_SESSIONS);
  const pins = new Map<string, { pin: SessionPin; until: number }>();
  return {
    async get(scope, session) {
      const k = keyOf(scope, session);
      const e = pins.get(k);
      if (e === undefined) return undefined;
      if (e.until <= now()) {
        pins.delete(k);
        return undefined;
      }
      return e.pin;
    },
    set(scope, session, pin) {
      const k = keyOf(scope, session);
      pins.delete(k); // re-inserted last: insertion order is the eviction order
      pins.set(k, { pin, until: now() + opts.ttlMs });
      while (pins.size > max) pins.delete(pins.keys().next().value!);
    },
    get size() {
      return pins.size;
    },
    async close() {
      pins.clear();
    },
  };
}

/** Pins shared by every instance through Redis. */
export function createRedisSessionAffinity(opts: SessionAffinityOptions & { redisUrl: string; prefix: string }): SessionAffinity {
  const redis: Redis = createRedisClient(opts.redisUrl, {
    maxRetriesPerRequest: 0,
    connectTimeout: 2_000,
    commandTimeout: 250,
    enableOfflineQueue: false,
    retryStrategy: (n: number) => Math.min(100 * n, 2_000),
  });
  // Unreachable, pins are simply not found (requests are routed afresh); the error is not worth an unhandled event.
  redis.on("error", () => undefined);
  const prefix = `${opts.prefix}sticky:`;
  return {
    async get(scope, session) {
      if (redis.status !== "ready") return undefined;
      try {
        return decode(await redis.get(prefix + keyOf(scope, session)));
      } catch {
        return undefined;
      }
    },
    set(scope, session, pin) {
      if (redis.status !== "ready") return;
      redis.set(prefix + keyOf(scope, session), encode(pin), "PX", opts.ttlMs).catch(() => undefined);
    },
    async close() {
      redis.disconnect();
    },
  };
}
