import { describe, expect, it } from "vitest";
import type { KeyRecord } from "../../../src/core/auth.js";
import { ALL_KEYS, AUTH_TOPIC, createKeyCache } from "../../../src/core/identity/key-cache.js";
import { createLocalInvalidationBus } from "../../../src/lib/invalidation.js";

const record = (hash: string, over: Partial<KeyRecord> = {}): KeyRecord => ({
  keyId: `id-${hash}`,
  keyHash: hash,
  keyLabel: "pk-v1-…",
  organizationId: "org",
  workspaceId: "ws",
  userId: "user",
  isManagement: false,
  internsProgramme: false,
  disabled: false,
  revoked: false,
  creatorIsMember: true,
  workspaceDeleted: false,
  ...over,
});

/** A key store whose reads the test answers by hand, counting them. */
function store() {
  const rows = new Map<string, KeyRecord>();
  const pending: Array<() => void> = [];
  let reads = 0;
  let manual = false;
  const lookup = (hash: string) => {
    reads++;
    const answer = rows.get(hash) ?? null; // the row as it is when the read runs; the answer may arrive later
    if (!manual) return Promise.resolve(answer);
    return new Promise<KeyRecord | null>((resolve) => pending.push(() => resolve(answer)));
  };
  return {
    rows,
    lookup,
    reads: () => reads,
    hold: () => void (manual = true),
    release: () => {
      manual = false;
      for (const p of pending.splice(0)) p();
    },
  };
}

describe("key cache", () => {
  it("serves a key from memory until its time bound, then reads it again", async () => {
    const s = store();
    s.rows.set("a", record("a"));
    let t = 0;
    const cache = createKeyCache({ lookup: s.lookup, ttlMs: 1000, now: () => t });
    expect((await cache.lookup("a"))?.keyId).toBe("id-a");
    t = 999;
    await cache.lookup("a");
    expect(s.reads()).toBe(1);
    s.rows.set("a", record("a", { revoked: true }));
    t = 1000;
    expect((await cache.lookup("a"))?.revoked).toBe(true);
    expect(s.reads()).toBe(2);
  });

  it("remembers unknown keys too, within the same bound", async () => {
    const s = store();
    let t = 0;
    const cache = createKeyCache({ lookup: s.lookup, ttlMs: 1000, now: () => t });
    expect(await cache.lookup("nope")).toBeNull();
    expect(await cache.lookup("nope")).toBeNull();
    expect(s.reads()).toBe(1);
    s.rows.set("nope", record("nope"));
    t = 1500;
    expect(await cache.lookup("nope")).not.toBeNull();
  });

  it("concurrent misses share one read", async () => {
    const s = store();
    s.rows.set("a", record("a"));
    s.hold();
    const cache = createKeyCache({ lookup: s.lookup, ttlMs: 1000 });
    const all = Promise.all(Array.from({ length: 20 }, () => cache.lookup("a")));
    s.release();
    expect((await all).every((r) => r?.keyId === "id-a")).toBe(true);
    expect(s.reads()).toBe(1);
  });

  it("a bus message drops the key at once; ALL_KEYS drops every key", async () => {
    const s = store();
    s.rows.set("a", record("a"));
    s.rows.set("b", record("b"));
    const bus = createLocalInvalidationBus();
    const cache = createKeyCache({ lookup: s.lookup, ttlMs: 1000, bus, now: () => 0 });
    await cache.lookup("a");
    await cache.lookup("b");
    s.rows.set("a", record("a", { disabled: true }));
    await bus.publish(AUTH_TOPIC, "a");
    expect((await cache.lookup("a"))?.disabled).toBe(true);
    expect(cache.size()).toBe(2);
    await bus.publish(AUTH_TOPIC, ALL_KEYS);
    expect(cache.size()).toBe(0);
  });

  it("a read that began before an invalidation does not put its stale answer in the cache", async () => {
    const s = store();
    s.rows.set("a", record("a"));
    const bus = createLocalInvalidationBus();
    const cache = createKeyCache({ lookup: s.lookup, ttlMs: 1000, bus, now: () => 0 });
    s.hold();
    const early = cache.lookup("a"); // reads the row before the revocation commits
    s.rows.set("a", record("a", { revoked: true }));
    await bus.publish(AUTH_TOPIC, "a");
    s.release();
    expect((await early)?.revoked).toBe(false); // that caller asked before the change
    expect((await cache.lookup("a"))?.revoked).toBe(true); // the next one reads again
    expect(s.reads()).toBe(2);
  });

  it("holds at most maxEntries keys, dropping the oldest", async () => {
    const s = store();
    const cache = createKeyCache({ lookup: s.lookup, ttlMs: 1000, maxEntries: 3, now: () => 0 });
    for (const k of ["a", "b", "c", "d"]) await cache.lookup(k);
    expect(cache.size()).toBe(3);
    await cache.lookup("a");
    expect(s.reads()).toBe(5);
    await cache.lookup("d");
    expect(s.reads()).toBe(5);
  });

  it("a time bound of 0 reads every time", async () => {
    const s = store();
    const cache = createKeyCache({ lookup: s.lookup, ttlMs: 0 });
    await cache.lookup("a");
    await cache.lookup("a");
    expect(s.reads()).toBe(2);
  });
});
