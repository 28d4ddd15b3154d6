/**
 * A small read-through cache of promises: a value is loaded at most once per `ttlMs` per key (concurrent
 * readers share the pending load), a failed load is forgotten at once, the oldest entry goes past
 * `maxEntries`, and `clear()` drops everything (an invalidation from another process).
 */
export interface TtlCache<T> {
  get(key: string, load: () => Promise<T>): Promise<T>;
  clear(): void;
}

export function createTtlCache<T>(opts: { ttlMs: number; maxEntries?: number }): TtlCache<T> {
  const max = opts.maxEntries ?? 10_000;
  const entries = new Map<string, { at: number; value: Promise<T> }>();
  return {
    get(key, load) {
      const hit = entries.get(key);
      const now = performance.now();
      if (hit && now - hit.at < opts.ttlMs) return hit.value;
      const value = load();
      const entry = { at: now, value };
      entries.set(key, entry);
      value.catch(() => {
        if (entries.get(key) === entry) entries.delete(key);
      });
      if (entries.size > max) entries.delete(entries.keys().next().value!);
      return value;
    },
    clear: () => entries.clear(),
  };
}
