/**
 * Credential cool-downs: a provider that answered 429 (or 503) with `Retry-After` is not called with the same
 * credential again until that wait is over. The execute stage asks once per request for the waits of the
 * credentials it plans to call, and tells the store about each new wait.
 *
 * The store is an interface so that a shared one (Redis, issue 29) can back it: `waits` is asynchronous and
 * takes every credential of the request at once (one round trip), `coolDown` is fire-and-forget. The one
 * here is per process, in memory: another process may still call a cooling credential once and learn the
 * wait itself.
 */

export interface CredentialCooldowns {
  /** For each of `ids` still inside a wait: the epoch ms at which the wait ends. Ids without a wait are absent. */
  waits(ids: readonly string[]): Promise<ReadonlyMap<string, number>>;
  /** Records that `id` must not be called before `untilMs` (epoch ms); a later end than the one known wins. */
  coolDown(id: string, untilMs: number): void;
}

const NONE: ReadonlyMap<string, number> = new Map();

/** In-memory cool-downs of this process, at most `maxEntries` credentials (the least recently set are dropped first). */
export function createMemoryCooldowns(opts: { maxEntries?: number; now?: () => number } = {}): CredentialCooldowns {
  const until = new Map<string, number>();
  const max = opts.maxEntries ?? 10_000;
  const now = opts.now ?? Date.now;
  return {
    waits(ids) {
      if (until.size === 0) return Promise.resolve(NONE);
      const t = now();
      let out: Map<string, number> | undefined;
      for (const id of ids) {
        const end = until.get(id);
        if (end === undefined) continue;
        if (end <= t) until.delete(id);
        else (out ??= new Map()).set(id, end);
      }
      return Promise.resolve(out ?? NONE);
    },
    coolDown(id, untilMs) {
      const known = until.get(id);
      if (known !== undefined && known >= untilMs) return;
      until.delete(id); // re-inserted last: insertion order is the eviction order
      until.set(id, untilMs);
      while (until.size > max) until.delete(until.keys().next().value!);
    },
  };
}
