/**
 * Token bucket for intern turns, per API key. In one process an in-memory bucket is exact; with
 * several core processes (REDIS_URL set) the bucket lives in Redis so they share one budget.
 */
import { Redis } from "ioredis";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";

export interface TurnLimiter {
  /** Resolves when a turn is allowed; otherwise resolves the seconds to wait. */
  take(key: string): Promise<{ allowed: true } | { allowed: false; retryAfterSeconds: number }>;
  close(): Promise<void>;
}

export interface TurnLimiterOptions {
  points: number;
  durationSeconds: number;
  redisUrl?: string | undefined;
}

export function createTurnLimiter(opts: TurnLimiterOptions): TurnLimiter {
  let redis: Redis | undefined;
  let limiter: RateLimiterAbstract;
  if (opts.redisUrl) {
    // The offline queue holds calls made while the connection is still opening; one retry bounds an outage.
    redis = new Redis(opts.redisUrl, { maxRetriesPerRequest: 1 });
    // Errors are reported per call; a dropped connection reconnects on its own.
    redis.on("error", () => undefined);
    limiter = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: "portico:intern-turns",
      points: opts.points,
      duration: opts.durationSeconds,
      // While Redis is unreachable, fall back to a per-process bucket rather than refusing every turn.
      insuranceLimiter: new RateLimiterMemory({ points: opts.points, duration: opts.durationSeconds }),
    });
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
    async close() {
      if (redis) await redis.quit().catch(() => redis?.disconnect());
    },
  };
}
