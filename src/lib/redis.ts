/**
 * Redis clients, loaded on first use: ioredis (and its dependencies) is only brought into a process
 * that is configured with REDIS_URL, so the embedded single-process default does not carry it.
 */
import { createRequire } from "node:module";
import type { Redis, RedisOptions } from "ioredis";

const load = createRequire(import.meta.url);

export type { Redis, RedisOptions };

export function createRedisClient(url: string, options: RedisOptions): Redis {
  const { Redis: RedisClient } = load("ioredis") as typeof import("ioredis");
  return new RedisClient(url, options);
}
