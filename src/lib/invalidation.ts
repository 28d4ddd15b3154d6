/**
 * The invalidation bus: how a process tells every process (itself included) that a cached thing changed
 * (an API key revoked, a credential edited). Caches subscribe per topic and drop the named key; the bus
 * carries names only, never values or secrets.
 *
 * Implementations: in-process (one process, tests), and the cross-process ones (Redis pub/sub with
 * REDIS_URL, PostgreSQL LISTEN/NOTIFY, the cluster primary for `npm start` workers) built on this seam.
 * A cache that relies on the bus must also bound staleness on its own (a TTL) so a lost message or a
 * broken connection cannot keep a revoked key alive for more than the documented bound.
 */
export interface InvalidationBus {
  /** Announces that `key` under `topic` changed. Resolves once the message is handed to the transport. */
  publish(topic: string, key: string): Promise<void>;
  /** Calls `fn` for every key published under `topic` by any process. Returns the unsubscribe. */
  subscribe(topic: string, fn: (key: string) => void): () => void;
  close(): Promise<void>;
}

/** The bus of a single process: publish calls the subscribers synchronously. */
export function createLocalInvalidationBus(): InvalidationBus {
  const topics = new Map<string, Set<(key: string) => void>>();
  return {
    async publish(topic, key) {
      for (const fn of topics.get(topic) ?? []) fn(key);
    },
    subscribe(topic, fn) {
      let set = topics.get(topic);
      if (!set) topics.set(topic, (set = new Set()));
      set.add(fn);
      return () => {
        set.delete(fn);
      };
    },
    async close() {
      topics.clear();
    },
  };
}
