/**
 * Tracks fire-and-forget database work (link bookkeeping, run endings noticed off-request) so the
 * core can wait for it before the database closes; an interrupted statement would otherwise leave a
 * PostgreSQL connection idle in a transaction and hang the pool's shutdown.
 */
export interface Background {
  /** Runs `work` without awaiting it; failures go to `onError`. */
  run(work: () => Promise<unknown>): void;
  /** Resolves once everything started so far has settled. */
  drain(): Promise<void>;
}

export function createBackground(onError: (err: unknown) => void): Background {
  const inFlight = new Set<Promise<unknown>>();
  return {
    run(work) {
      const p = work()
        .catch(onError)
        .finally(() => inFlight.delete(p));
      inFlight.add(p);
    },
    async drain() {
      while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
    },
  };
}
