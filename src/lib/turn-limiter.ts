/**
 * Token bucket for intern turns, per API key. In one process an in-memory bucket is exact; with
 * several core processes (REDIS_URL set) the bucket lives in Redis so they share one budget.
 */
import { createRedisClient, type Redis } from "./redis.js";
import { RateLimiterCluster, RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import type { Logger } from "../log.js";

export interface TurnLimiter {
  /** Resolves when a turn is allowed; otherwise resolves the seconds to wait. */
  take(key: string): Promise<{ allowed: true } | { allowed: false; retryAfterSeconds: number }>;
  /** false while the shared store (Redis) is unreachable; true without one. */
  healthy(): boolean;
  close(): Promise<void>;
}

export interface TurnLimiterOptions {
  points: number;
  durationSeconds: number;
  redisUrl?: string | undefined;
  /**
   * Without Redis, share one budget among the worker processes of `portico serve` through their
   * primary (rate-limiter-flexible's cluster limiter; its master runs in the primary).
   */
  shareWithServeWorkers?: boolean;
  logger?: Logger;
}

/** Bounds on every Redis call, so an outage costs a request at most this long, not seconds. */
const REDIS_CONNECT_TIMEOUT_MS = 1_000;
const REDIS_COMMAND_TIMEOUT_MS = 250;

export function createTurnLimiter(opts: TurnLimiterOptions): TurnLimiter {
  let redis: Redis | undefined;
  let limiter: RateLimiterAbstract;
  let reachable = true;
  if (opts.redisUrl) {
    // No offline queue and no retries: while Redis is unreachable a call fails at once and the
    // per-process insurance bucket decides; the connection keeps reconnecting in the background.
    redis = createRedisClient(opts.redisUrl, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
      commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
      retryStrategy: (attempt) => Math.min(100 * attempt, 2_000),
    });
    reachable = false;
    let everReady = false;
    redis.on("ready", () => {
      if (everReady && !reachable) opts.logger?.info({ component: "turn-limiter" }, "redis reachable again; the turn limit is shared again");
      everReady = true;
      reachable = true;
    });
    redis.on("error", (err: Error) => {
      if (reachable || !everReady) {
        opts.logger?.warn(
          { component: "turn-limiter", err: { message: err.message } },
          "redis unreachable; intern turns are limited per process until it is back",
        );
      }
      reachable = false;
      everReady = true;
    });
    redis.on("end", () => {
      reachable = false;
    });
    limiter = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: "portico:intern-turns",
      points: opts.points,
      duration: opts.durationSeconds,
      rejectIfRedisNotReady: true,
      // While Redis is unreachable, fall back to a per-process bucket rather than refusing every turn.
      insuranceLimiter: new RateLimiterMemory({ points: opts.points, duration: opts.durationSeconds }),
    });
  } else if (opts.shareWithServeWorkers) {
    limiter = new RateLimiterCluster({ keyPrefix: "portico:intern-turns", points: opts.points, duration: opts.durationSeconds, timeoutMs: 2_000 });
  } else {
    limiter = new RateLimiterMemory({ points: opts.points, duration: opts.durationSeconds });
  }
  return {
    async take(key) {
      try {
        await limiter.consume(key, 1);
        return { allowed: true };
      } catch (res) {
        if (res instanceof RateLimiterRes) {
          return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)) };
        }
        throw res;
      }
    },
    healthy: () => reachable,
    async close() {
      if (redis) await redis.quit().catch(() => redis?.disconnect());
    },
  };
}
