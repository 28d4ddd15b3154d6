/**
 * The response cache's store (docs/operations.md, "Response cache"): stored answers by key, each readable until
 * its time to live ends. In Redis when `REDIS_URL` is set (`SET <prefix>response-cache:<key> <value> PX <ttl>`:
 * Redis expires it, every instance shares it), otherwise in the database's `CacheEntry` table (every instance on
 * the database shares it; an expired row is never served, is deleted when read, and a sweep deletes the expired
 * rows at most once a minute, started by a write).
 *
 * The key (pipeline/cache.ts) is a SHA-256 hex digest that already covers the organization and workspace; the
 * value is the canonical answer as JSON text. A store that fails (Redis away, database busy) never fails the
 * request: a read failure is a miss, a write failure is logged and the answer goes out unstored.
 */
import type { Logger } from "pino";
import type { Db } from "../../db/client.js";
import { createRedisClient, type Redis } from "../../lib/redis.js";

export interface CacheEntryScope {
  organizationId: string;
  workspaceId: string;
}

export interface ResponseCacheStore {
  /** Where entries live, for logs and docs: "redis" or "database". */
  readonly kind: "redis" | "database";
  /** The stored value of `key`, or null when there is none or it expired. */
  get(key: string): Promise<string | null>;
  /** Stores `value` under `key` for `ttlMs`, replacing what was there. */
  set(key: string, value: string, ttlMs: number, scope: CacheEntryScope): Promise<void>;
  close(): Promise<void>;
}

/** The database's expired rows are deleted at most this often (a write starts the sweep). */
const SWEEP_EVERY_MS = 60_000;

export function createDatabaseResponseCache(deps: { db: Db; logger?: Logger; now?: () => number }): ResponseCacheStore {
  const now = deps.now ?? Date.now;
  let lastSweep = 0;
  let sweeping: Promise<void> | undefined;
  const sweep = () => {
    const t = now();
    if (sweeping || t - lastSweep < SWEEP_EVERY_MS) return;
    lastSweep = t;
    sweeping = deps.db.cacheEntry
      .deleteMany({ where: { expiresAt: { lte: new Date(t) } } })
      .then(
        () => undefined,
        (err: unknown) => deps.logger?.warn({ err }, "response cache: the sweep of expired entries failed"),
      )
      .finally(() => (sweeping = undefined));
  };
  return {
    kind: "database",
    async get(key) {
      const row = await deps.db.cacheEntry.findUnique({ where: { key }, select: { value: true, expiresAt: true } });
      if (!row) return null;
      if (row.expiresAt.getTime() > now()) return row.value;
      // Expired: gone for good (only if no fresher answer replaced it meanwhile).
      await deps.db.cacheEntry.deleteMany({ where: { key, expiresAt: { lte: new Date(now()) } } }).catch(() => undefined);
      return null;
    },
    async set(key, value, ttlMs, scope) {
      const expiresAt = new Date(now() + ttlMs);
      const row = { value, expiresAt, organizationId: scope.organizationId, workspaceId: scope.workspaceId };
      await deps.db.cacheEntry.upsert({ where: { key }, create: { key, ...row }, update: row });
      sweep();
    },
    async close() {
      await sweeping;
    },
  };
}

export function createRedisResponseCache(opts: { redisUrl: string; prefix: string }): ResponseCacheStore {
  const redis: Redis = createRedisClient(opts.redisUrl, {
    // Commands wait for the connection (bounded by commandTimeout), so the first requests after a start are served.
    maxRetriesPerRequest: 1,
    connectTimeout: 1_000,
    commandTimeout: 500,
    retryStrategy: (attempt) => Math.min(100 * attempt, 2_000),
  });
  redis.on("error", () => undefined); // a failing read is a miss, a failing write is logged by the stage
  const keyOf = (key: string) => `${opts.prefix}response-cache:${key}`;
  return {
    kind: "redis",
    get: (key) => redis.get(keyOf(key)),
    async set(key, value, ttlMs) {
      await redis.set(keyOf(key), value, "PX", Math.max(1, Math.round(ttlMs)));
    },
    async close() {
      redis.disconnect();
    },
  };
}
