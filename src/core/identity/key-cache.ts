/**
 * API keys authenticated from memory. The auth interceptor asks this cache instead of the database;
 * an entry (a key's record, or "no such key") is served for at most `ttlMs` after the read that
 * produced it began, so a key revoked, disabled or whose creator left is refused by every process
 * within `ttlMs` (1 s by default, never more) even when no invalidation message arrives. Changes made
 * through a process on the invalidation bus take effect at once: the bus clears the entry (or all of
 * them), and a read that began before the clear never fills the cache.
 *
 * Concurrent misses for one key share one database read; the cache holds at most `maxEntries` keys
 * (oldest first out), so a flood of unknown keys costs memory only up to that bound.
 */
import type { KeyLookup, KeyRecord } from "../auth.js";
import type { InvalidationBus } from "../../lib/invalidation.js";

/** The bus topic of API-key changes; the key is a key hash, or `*` for "anything may have changed". */
export const AUTH_TOPIC = "auth";
export const ALL_KEYS = "*";

export interface KeyCacheOptions {
  lookup: KeyLookup;
  /** Longest time an entry is trusted, in ms (0 disables the cache). */
  ttlMs: number;
  maxEntries?: number;
  bus?: InvalidationBus;
  now?: () => number;
}

interface Entry {
  record: KeyRecord | null;
  /** When the read that produced it began. */
  readAt: number;
}

export interface KeyCache {
  lookup: KeyLookup;
  /** Drops one key's entry, or every entry with ALL_KEYS. */
  invalidate(keyHash: string): void;
  size(): number;
  close(): void;
}

export function createKeyCache(opts: KeyCacheOptions): KeyCache {
  const now = opts.now ?? (() => performance.now());
  const max = opts.maxEntries ?? 50_000;
  const entries = new Map<string, Entry>();
  const inflight = new Map<string, Promise<KeyRecord | null>>();
  /** Bumped by every invalidation: a read that began in an older epoch does not fill the cache. */
  let epoch = 0;

  const invalidate = (keyHash: string): void => {
    epoch++;
    inflight.clear();
    if (keyHash === ALL_KEYS) entries.clear();
    else entries.delete(keyHash);
  };
  const unsubscribe = opts.bus?.subscribe(AUTH_TOPIC, invalidate);

  const load = (keyHash: string): Promise<KeyRecord | null> => {
    const pending = inflight.get(keyHash);
    if (pending) return pending;
    const startedEpoch = epoch;
    const readAt = now();
    const read = opts.lookup(keyHash).then(
      (record) => {
        if (inflight.get(keyHash) === read) inflight.delete(keyHash);
        if (epoch === startedEpoch) {
          entries.delete(keyHash);
          entries.set(keyHash, { record, readAt });
          if (entries.size > max) entries.delete(entries.keys().next().value!);
        }
        return record;
      },
      (err: unknown) => {
        if (inflight.get(keyHash) === read) inflight.delete(keyHash);
        throw err;
      },
    );
    inflight.set(keyHash, read);
    return read;
  };

  return {
    lookup(keyHash) {
      if (opts.ttlMs <= 0) return opts.lookup(keyHash);
      const hit = entries.get(keyHash);
      if (hit && now() - hit.readAt < opts.ttlMs) return Promise.resolve(hit.record);
      return load(keyHash);
    },
    invalidate,
    size: () => entries.size,
    close() {
      unsubscribe?.();
      entries.clear();
      inflight.clear();
    },
  };
}
