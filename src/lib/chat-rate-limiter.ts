/**
 * Requests and tokens per minute on chat completions, per API key and per workspace (docs/limits.md), with
 * rate-limiter-flexible as the intern turn limiter uses it: in memory in one process, through the `portico serve`
 * primary (RateLimiterCluster) for its workers without Redis, in Redis (RateLimiterRedis, a per-process bucket as
 * insurance while Redis is unreachable) when several processes share REDIS_URL.
 *
 * Each distinct bound gets its own limiter (rate-limiter-flexible's points are per limiter), keyed
 * `<prefix>chat-rpm:<n>` / `<prefix>chat-tpm:<n>`, so changing a key's bound starts it on a fresh bucket.
 * Requests: one point per request, taken before the request (a request over the bound is refused).
 * Tokens: a request is refused while the minute's tokens already reached the bound; each answer's
 * prompt + completion tokens are added after it (a request's own tokens are not known before it runs).
 */
import { RateLimiterCluster, RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import { createRedisClient, type Redis } from "./redis.js";

export interface RateBucket {
  /** `key:<key id>` or `ws:<workspace id>`. */
  id: string;
  /** What the refusal names: "API key" or "workspace". */
  label: string;
  rpm: number | null;
  tpm: number | null;
}

export type Admission = { ok: true } | { ok: false; retryAfterSeconds: number; message: string };

export interface ChatRateLimiter {
  admit(buckets: readonly RateBucket[]): Promise<Admission>;
  addTokens(buckets: readonly RateBucket[], tokens: number): Promise<void>;
  close(): Promise<void>;
}

export interface ChatRateLimiterOptions {
  redisUrl?: string | undefined;
  redisPrefix?: string;
  shareWithServeWorkers?: boolean;
}

const WINDOW_SECONDS = 60;

export function createChatRateLimiter(opts: ChatRateLimiterOptions): ChatRateLimiter {
  let redis: Redis | undefined;
  if (opts.redisUrl) {
    redis = createRedisClient(opts.redisUrl, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: 1_000,
      commandTimeout: 250,
      retryStrategy: (attempt) => Math.min(100 * attempt, 2_000),
    });
    redis.on("error", () => undefined); // the insurance bucket decides while Redis is away
  }
  const prefix = opts.redisPrefix ?? "portico:";
  const limiters = new Map<string, RateLimiterAbstract>();
  const limiter = (kind: "rpm" | "tpm", points: number): RateLimiterAbstract => {
    const keyPrefix = `${prefix}chat-${kind}:${points}`;
    let l = limiters.get(keyPrefix);
    if (!l) {
      const o = { keyPrefix, points, duration: WINDOW_SECONDS };
      l = redis
        ? new RateLimiterRedis({ ...o, storeClient: redis, rejectIfRedisNotReady: true, insuranceLimiter: new RateLimiterMemory(o) })
        : opts.shareWithServeWorkers
          ? new RateLimiterCluster({ ...o, timeoutMs: 2_000 })
          : new RateLimiterMemory(o);
      limiters.set(keyPrefix, l);
    }
    return l;
  };
  const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

  return {
    async admit(buckets) {
      for (const b of buckets) {
        if (b.tpm !== null) {
          const res = await limiter("tpm", b.tpm).get(b.id);
          if (res && res.consumedPoints >= b.tpm) {
            return { ok: false, retryAfterSeconds: seconds(res.msBeforeNext), message: `Token rate limit of this ${b.label} reached (${b.tpm} tokens per minute)` };
          }
        }
        if (b.rpm !== null) {
          try {
            await limiter("rpm", b.rpm).consume(b.id, 1);
          } catch (res) {
            if (!(res instanceof RateLimiterRes)) throw res;
            return { ok: false, retryAfterSeconds: seconds(res.msBeforeNext), message: `Request rate limit of this ${b.label} reached (${b.rpm} requests per minute)` };
          }
        }
      }
      return { ok: true };
    },
    async addTokens(buckets, tokens) {
      if (!(tokens > 0)) return;
      for (const b of buckets) if (b.tpm !== null) await limiter("tpm", b.tpm).penalty(b.id, Math.floor(tokens));
    },
    async close() {
      if (redis) await redis.quit().catch(() => redis?.disconnect());
    },
  };
}
