/**
 * Portico's own time for a model request, made visible (docs/chat.md, "Overhead"): the response header the
 * gateway sets, and the response metadata (a gRPC trailer over the network) in which the core reports, with a
 * chat error, how long it waited on providers before it (a successful answer carries `upstream_ms`).
 */
export const OVERHEAD_HEADER = "x-portico-overhead-ms";
export const UPSTREAM_MS_METADATA = "x-portico-upstream-ms";

/**
 * The response cache's verdict on a chat answer (docs/operations.md, "Response cache"): `hit` (answered from the
 * cache, no provider called) or `miss` (the request asked for the cache; a provider answered). Absent when the
 * request did not ask for the cache.
 */
export const CACHE_HEADER = "x-portico-cache";

/** The cache header of an answer whose core response says `cache` ("hit", "miss" or empty). */
export function cacheHeaders(cache: string): Record<string, string> {
  return cache ? { [CACHE_HEADER]: cache } : {};
}
