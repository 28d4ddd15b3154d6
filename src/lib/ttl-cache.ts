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

/**
 * {@link TtlCache} keyed by a pair of strings, with the same loads, sharing, forgetting and eviction as one
 * keyed by the pair's joined text — without the joined string made and hashed on every call (bench/README.md,
 * "serve's CPU per non-streamed request, second round"). `load` gets the pair, so a caller needs no closure.
 */
export interface TtlPairCache<T> {
  get(a: string, b: string, load: (a: string, b: string) => Promise<T>): Promise<T>;
  clear(): void;
}

interface PairSlot<T> {
  readonly a: string;
  readonly b: string;
  at: number;
  value: Promise<T>;
}

export function createTtlPairCache<T>(opts: { ttlMs: number; maxEntries?: number }): TtlPairCache<T> {
  const max = opts.maxEntries ?? 10_000;
  const byA = new Map<string, Map<string, PairSlot<T>>>();
  // The pairs in the order they were first stored (a reload keeps a pair's place, as `Map.set` does).
  const order = new Set<PairSlot<T>>();
  const remove = (slot: PairSlot<T>) => {
    const inner = byA.get(slot.a);
    if (inner?.get(slot.b) === slot) {
      inner.delete(slot.b);
      if (inner.size === 0) byA.delete(slot.a);
    }
    order.delete(slot);
  };
  return {
    get(a, b, load) {
      let inner = byA.get(a);
      const hit = inner?.get(b);
      const now = performance.now();
      if (hit && now - hit.at < opts.ttlMs) return hit.value;
      const value = load(a, b);
      let slot: PairSlot<T>;
      if (hit) {
        slot = hit;
        slot.at = now;
        slot.value = value;
      } else {
        slot = { a, b, at: now, value };
        if (inner === undefined) byA.set(a, (inner = new Map()));
        inner.set(b, slot);
        order.add(slot);
      }
      value.catch(() => {
        if (slot.value === value && order.has(slot)) remove(slot);
      });
      if (order.size > max) remove(order.values().next().value!);
      return value;
    },
    clear: () => {
      byA.clear();
      order.clear();
    },
  };
}
