/**
 * The key's spend as GET /api/v1/key and GetCaller report it (src/core/spend/key-spend.ts), on SQLite and
 * PostgreSQL, with an injected clock: a generation made exactly at the start of today, of this week (Monday) or of
 * this month (UTC) counts in that window, one a millisecond before does not; BYOK-served generations are summed
 * apart at the provider's price; other keys' and other organizations' generations and unpriced ones count 0; the
 * key's own fields (limit, reset, expiry, rate limits) come back as stored. The figures are read from the key's
 * spend counters per window (key-spend-windows.ts), which the generation records' writer keeps: the generations
 * are written through it, and the figures compared with eight Prisma `aggregate` queries over the generations and
 * a key read (how they were read before the counters), on randomized records too, with records written twice and
 * by two writers at once, and after the migration that counts the generations written before it. Sums past a
 * 64-bit integer of femto-dollars ($9,223) come back exact.
 */
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { usdString } from "../../../src/contract/money.js";
import { KeySpendSchema } from "../../../src/gen/portico/identity/v1/identity_service_pb.js";
import { dbProviders } from "../../helpers/db.js";
import { createGenerationStore } from "../../../src/core/chat/generations.js";
import type { GenerationRecord } from "../../../src/core/chat/seams.js";
import { createLogger } from "../../../src/log.js";
import { migrationsDirFor, runMigrations } from "../../../src/db/migrate.js";
import { WINDOW_KINDS, keyCostSince } from "../../../src/core/spend/key-spend-windows.js";
import type { DatabaseHandle, Db } from "../../../src/db/client.js";
import { createKeySpendReader } from "../../../src/core/spend/key-spend.js";
import { createSpendStore } from "../../../src/core/spend/spend-store.js";
import { windowStart, windowStarts } from "../../../src/core/spend/windows.js";
import { createIdentityRepository } from "../../../src/core/identity/identity-repository.js";

const DAY = 86_400_000;

/** An org, a workspace, a user and a key; returns what the reader takes. */
async function newKey(db: Db, name = "org") {
  const repo = createIdentityRepository(db);
  const org = await repo.createOrganization({ name, internsProgramme: false });
  const user = await repo.findOrCreateUser({ email: `${name}-${org.id}@example.test`, name });
  await repo.addMember(org.id, user.id, "owner");
  const ws = await repo.createWorkspace({ organizationId: org.id, name: `${name}-ws`, isDefault: true });
  const { record } = await repo.createApiKey({ organizationId: org.id, workspaceId: ws.id, creatorUserId: user.id, name, isManagement: false });
  return { keyId: record.id, keyHash: record.hash, organizationId: org.id, workspaceId: ws.id };
}

let seq = 0;
type Key = Awaited<ReturnType<typeof newKey>>;
/** One generation of `key` at `at` (Unix ms). */
function gen(key: Key, at: number, cost: bigint | null, upstream: bigint | null, source: "byok" | "shared" | null): GenerationRecord {
  return {
    id: `gen-test-${++seq}`, organizationId: key.organizationId, workspaceId: key.workspaceId, keyHash: key.keyHash,
    requestedModel: "m", model: null, provider: null, credentialId: null, credentialSource: source, presetSlug: null,
    presetVersion: null, streamed: false, promptTokens: null, completionTokens: null, totalTokens: null, latencyMs: 1,
    timeToFirstTokenMs: null, status: "success", finishReason: null, errorCode: null, attempts: 1, createdAt: new Date(at),
    cachedTokens: null, cacheWriteTokens: null, reasoningTokens: null, costFemtoUsd: cost, upstreamCostFemtoUsd: upstream,
  };
}

/**
 * A generation records' writer as the core makes it (past the Prisma client), flushed by hand; `viaPrisma`: one
 * without the handle's raw paths (the Prisma client's raw calls; on SQLite in a Prisma transaction).
 */
function writer(h: DatabaseHandle, viaPrisma = false) {
  const raw = viaPrisma ? {} : { execute: h.executeRaw, writeSqlite: h.writeSqlite, executePrepared: h.executePrepared };
  return createGenerationStore({ db: h.db, provider: h.provider, logger: createLogger({ level: "silent" }), flushMs: 60_000, batch: 1_000_000, ...raw });
}

/** Writes `rows` as the core does: through the generation records' writer, which keeps the spend counters. */
async function write(h: DatabaseHandle, rows: readonly GenerationRecord[]): Promise<void> {
  const store = writer(h);
  for (const r of rows) store.record(r);
  await store.flush();
  await store.close();
}

/** How the figures were read before (eight Prisma aggregates and a key read): the reference. */
async function byAggregates(db: Db, key: Key, nowMs: number) {
  const w = windowStarts(nowMs);
  const since = [null, w.daily, w.weekly, w.monthly];
  const where = (s: number | null) => ({ organizationId: key.organizationId, keyHash: key.keyHash, ...(s === null ? {} : { createdAt: { gte: new Date(s) } }) });
  const paid = await Promise.all(since.map((s) => db.generation.aggregate({ _sum: { costFemtoUsd: true }, where: where(s) })));
  const byok = await Promise.all(since.map((s) => db.generation.aggregate({ _sum: { upstreamCostFemtoUsd: true }, where: { ...where(s), credentialSource: "byok" } })));
  const k = await db.apiKey.findUnique({ where: { id: key.keyId } });
  return {
    usage: paid.map((a) => a._sum.costFemtoUsd ?? 0n),
    byok: byok.map((a) => a._sum.upstreamCostFemtoUsd ?? 0n),
    limitReset: k?.limitReset ?? "none",
    expiresAt: k?.expiresAt ? timestampFromDate(k.expiresAt) : undefined,
    rateLimitRpm: k?.rateLimitRpm ?? undefined,
    rateLimitTpm: k?.rateLimitTpm ?? undefined,
    limitFemtoUsd: k?.limitFemtoUsd ?? undefined,
  };
}

/** A deterministic pseudo-random source (xorshift32): a failure replays from its seed. */
function random(seed: number) {
  let x = seed >>> 0 || 1;
  const next = () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 2 ** 32;
  };
  const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!;
  return { next, pick, int: (n: number) => Math.floor(next() * n) };
}

/**
 * `n` generations of `keys` at times around `nows`: on and a millisecond either side of every window boundary, at
 * random over ±70 days, a few in a later window (an instance's clock ahead); costs from unpriced to 2^50
 * femto-dollars (a key's sums stay below 2^63, where SQLite's SUM in the reference aggregates would overflow).
 */
function randomRows(seed: number, keys: readonly Key[], nows: readonly number[], n: number): GenerationRecord[] {
  const r = random(seed);
  const costs = () => r.pick([null, 0n, 1n, 999_999_999n, 1_000_000_000n, 1_000_000_001n, BigInt(r.int(2 ** 30)) * 1_000_003n, BigInt(r.int(2 ** 30)) << 20n]);
  const rows: GenerationRecord[] = [];
  for (let i = 0; i < n; i++) {
    const now = r.pick(nows);
    const w = windowStarts(now);
    const at = r.pick([
      () => r.pick([w.daily, w.weekly, w.monthly]) + r.pick([-1, 0, 1]),
      () => now - r.int(70 * DAY),
      () => now + r.int(3 * DAY),
    ])();
    rows.push(gen(r.pick(keys), at, costs(), costs(), r.pick(["byok", "shared", null] as const)));
  }
  return rows;
}

describe.each(dbProviders)("key spend (%s)", (_name, fresh) => {
  let handle: DatabaseHandle | undefined;
  afterEach(async () => {
    await handle?.close();
    handle = undefined;
  });

  const reader = (h: DatabaseHandle, nowMs: number) =>
    createKeySpendReader({ query: h.queryRaw, provider: h.provider, store: createSpendStore({ db: h.db, reservationTtlMs: 60_000, now: () => nowMs }), now: () => nowMs });

  it("counts a generation in a window from the window's first millisecond, BYOK apart, only the key's own", async () => {
    handle = await fresh();
    const db = handle.db;
    const key = await newKey(db, "a");
    const other = await newKey(db, "b");
    // Wednesday 2 December 2026, 15:00 UTC: the week (Monday 30 November) starts before the month.
    const nowA = Date.UTC(2026, 11, 2, 15);
    // Wednesday 4 November 2026, 15:00 UTC: the month (Sunday 1 November) starts before the week (Monday 2).
    const nowB = Date.UTC(2026, 10, 4, 15);
    const rows: Array<ReturnType<typeof gen>> = [];
    let cb = 0n; // cost bits
    let ub = 0n; // upstream cost bits
    // Each generation's cost is its own power of two, so each sum says which generations it counted.
    for (const nowMs of [nowA, nowB]) {
      const w = windowStarts(nowMs);
      for (const t of [w.daily, w.weekly, w.monthly]) {
        for (const at of [t, t - 1]) {
          for (const source of ["byok", "shared", null] as const) {
            const cost = source === "byok" ? 0n : 1n << cb++;
            rows.push(gen(key, at, cost, 1n << ub++, source));
          }
        }
      }
    }
    rows.push(gen(key, nowA - 400 * DAY, 1n << cb++, 1n << ub++, "byok"));
    rows.push(gen(key, nowA - 1, null, null, "byok")); // unpriced
    rows.push(gen(key, nowA - 1, null, null, null));
    rows.push(gen(other, nowA - 1, 1n << cb++, 1n << ub++, "byok")); // another key
    rows.push({ ...gen(key, nowA - 1, 1n << cb++, 1n << ub++, "byok"), organizationId: other.organizationId }); // same hash, another organization
    await write(handle, rows);
    await db.apiKey.update({ where: { id: key.keyId }, data: { limitFemtoUsd: 5_000_000_000_000_000n, limitReset: "weekly", expiresAt: new Date(Date.UTC(2027, 0, 2, 3, 4, 5, 678)), rateLimitRpm: 60, rateLimitTpm: 10_000 } });

    for (const nowMs of [nowA, nowB]) {
      const spend = await reader(handle, nowMs)(key.keyId, key.keyHash, key.organizationId);
      const ref = await byAggregates(db, key, nowMs);
      expect([spend.usageFemtoUsd, spend.usageDailyFemtoUsd, spend.usageWeeklyFemtoUsd, spend.usageMonthlyFemtoUsd]).toEqual(ref.usage);
      expect([spend.byokUsageFemtoUsd, spend.byokUsageDailyFemtoUsd, spend.byokUsageWeeklyFemtoUsd, spend.byokUsageMonthlyFemtoUsd]).toEqual(ref.byok);
      expect(spend).toMatchObject({ limitReset: ref.limitReset, expiresAt: ref.expiresAt, rateLimitRpm: ref.rateLimitRpm, rateLimitTpm: ref.rateLimitTpm, limitFemtoUsd: ref.limitFemtoUsd });
      expect(spend).toMatchObject({ limitReset: "weekly", rateLimitRpm: 60, rateLimitTpm: 10_000, limitFemtoUsd: 5_000_000_000_000_000n, limitRemainingFemtoUsd: 5_000_000_000_000_000n });
      expect(spend.expiresAt).toEqual(timestampFromDate(new Date(Date.UTC(2027, 0, 2, 3, 4, 5, 678))));

      // Explicitly: which generations each window counts.
      const w = windowStarts(nowMs);
      const inWindow = (start: number | null, byok: boolean) =>
        rows
          .filter((r) => r.organizationId === key.organizationId && r.keyHash === key.keyHash && (start === null || r.createdAt.getTime() >= start))
          .filter((r) => !byok || r.credentialSource === "byok")
          .reduce((s, r) => s + ((byok ? r.upstreamCostFemtoUsd : r.costFemtoUsd) ?? 0n), 0n);
      expect(spend.usageDailyFemtoUsd).toBe(inWindow(w.daily, false));
      expect(spend.usageWeeklyFemtoUsd).toBe(inWindow(w.weekly, false));
      expect(spend.usageMonthlyFemtoUsd).toBe(inWindow(w.monthly, false));
      expect(spend.usageFemtoUsd).toBe(inWindow(null, false));
      expect(spend.byokUsageDailyFemtoUsd).toBe(inWindow(w.daily, true));
      expect(spend.byokUsageWeeklyFemtoUsd).toBe(inWindow(w.weekly, true));
      expect(spend.byokUsageMonthlyFemtoUsd).toBe(inWindow(w.monthly, true));
      expect(spend.byokUsageFemtoUsd).toBe(inWindow(null, true));
      expect(spend.usageDailyFemtoUsd).not.toBe(0n);
      // The decimal text fields say the same figures.
      expect([spend.usageUsd, spend.usageDailyUsd, spend.usageWeeklyUsd, spend.usageMonthlyUsd]).toEqual(ref.usage.map(usdString));
      expect([spend.byokUsageUsd, spend.byokUsageDailyUsd, spend.byokUsageWeeklyUsd, spend.byokUsageMonthlyUsd]).toEqual(ref.byok.map(usdString));
    }

    // A key with no generation and no limit: zeros, "none", no optional field.
    const empty = await newKey(db, "c");
    const none = await reader(handle, nowA)(empty.keyId, empty.keyHash, empty.organizationId);
    expect(none).toEqual({
      usageFemtoUsd: 0n, usageDailyFemtoUsd: 0n, usageWeeklyFemtoUsd: 0n, usageMonthlyFemtoUsd: 0n,
      byokUsageFemtoUsd: 0n, byokUsageDailyFemtoUsd: 0n, byokUsageWeeklyFemtoUsd: 0n, byokUsageMonthlyFemtoUsd: 0n, limitReset: "none",
      usageUsd: "0", usageDailyUsd: "0", usageWeeklyUsd: "0", usageMonthlyUsd: "0",
      byokUsageUsd: "0", byokUsageDailyUsd: "0", byokUsageWeeklyUsd: "0", byokUsageMonthlyUsd: "0",
    });
  });

  it("sums past a 64-bit integer of femto-dollars exactly (SQLite's SUM would raise integer overflow)", async () => {
    handle = await fresh();
    const db = handle.db;
    const key = await newKey(db);
    const nowMs = Date.UTC(2026, 10, 26, 12);
    const max = 9_223_372_036_854_775_807n; // the largest BIGINT: $9,223.372036854775807
    const costs = [max, max, 123_456_789n, 999_999_999n, 1n];
    await write(handle, costs.map((c, i) => gen(key, nowMs - 1000 - i, c, max - BigInt(i), "byok")));
    const spend = await reader(handle, nowMs)(key.keyId, key.keyHash, key.organizationId);
    const total = costs.reduce((a, b) => a + b, 0n);
    expect(total > max).toBe(true);
    // Exact in the decimal text fields; the int64 fields hold INT64_MAX (the sums do not fit them).
    expect(spend.usageUsd).toBe(usdString(total));
    expect(spend.usageDailyUsd).toBe(usdString(total));
    expect(spend.usageMonthlyUsd).toBe(usdString(total));
    expect(spend.byokUsageWeeklyUsd).toBe(usdString(5n * max - 10n));
    expect(spend.usageUsd).toBe("18446.744074833008403");
    expect(spend.usageFemtoUsd).toBe(max);
    expect(spend.byokUsageWeeklyFemtoUsd).toBe(max);
    // The answer encodes for gRPC (a split deployment's gateway, gRPC clients) and decodes to the same figures.
    const back = fromBinary(KeySpendSchema, toBinary(KeySpendSchema, create(KeySpendSchema, spend)));
    expect(back.usageUsd).toBe(usdString(total));
    expect(back.usageFemtoUsd).toBe(max);
    // What the HTTP answer carries (USD as a number) is as near as a double gets.
    expect(Number(spend.usageUsd)).toBe(Number(total) / 1e15);
  });
  /** Every figure of `key` from the counters against the reference, at each of `nows`; and a key limit's recount. */
  async function expectSameAsAggregates(h: DatabaseHandle, key: Key, nows: readonly number[]) {
    for (const nowMs of nows) {
      const spend = await reader(h, nowMs)(key.keyId, key.keyHash, key.organizationId);
      const ref = await byAggregates(h.db, key, nowMs);
      const at = new Date(nowMs).toISOString();
      expect({ at, usage: [spend.usageFemtoUsd, spend.usageDailyFemtoUsd, spend.usageWeeklyFemtoUsd, spend.usageMonthlyFemtoUsd] }).toEqual({ at, usage: ref.usage });
      expect({ at, byok: [spend.byokUsageFemtoUsd, spend.byokUsageDailyFemtoUsd, spend.byokUsageWeeklyFemtoUsd, spend.byokUsageMonthlyFemtoUsd] }).toEqual({ at, byok: ref.byok });
      expect([spend.usageUsd, spend.usageDailyUsd, spend.usageWeeklyUsd, spend.usageMonthlyUsd]).toEqual(ref.usage.map(usdString));
      for (const reset of WINDOW_KINDS) {
        // A limit's recount (keys-service.ts) summed the key's generations since the window's start, by hash alone
        // (a key's generations are all in its organization; here the organization too, for the test's twin key).
        const since = windowStart(reset, nowMs);
        const where = { organizationId: key.organizationId, keyHash: key.keyHash, createdAt: { gte: new Date(since) } };
        const old = await h.db.generation.aggregate({ _sum: { costFemtoUsd: true }, where });
        const counted = await h.db.$transaction((tx) => keyCostSince(tx, { organizationId: key.organizationId, keyHash: key.keyHash }, reset, since));
        expect({ at, reset, counted }).toEqual({ at, reset, counted: old._sum.costFemtoUsd ?? 0n });
      }
    }
  }

  it("gives the figures of the sums over the generations on randomized records, written twice and by two writers at once", async () => {
    handle = await fresh();
    const h = handle;
    const keys = [await newKey(h.db, "r1"), await newKey(h.db, "r2")];
    const other = await newKey(h.db, "r3");
    // Same key hash in another organization: its generations are not the key's.
    const twin: Key = { ...other, keyHash: keys[0]!.keyHash };
    // Monday 30 November 2026 00:00 UTC (a week's and a day's first millisecond), the last of a month, a Sunday, a leap day.
    const nows = [Date.UTC(2026, 10, 30), Date.UTC(2026, 10, 30, 23, 59, 59, 999), Date.UTC(2027, 0, 3, 12), Date.UTC(2028, 1, 29, 6), Date.UTC(2026, 11, 1) - 1];
    const rows = randomRows(7, [...keys, other, twin], nows, 1200);
    const r = random(11);
    // Two writers, each flushing at random points, running at once (on PostgreSQL on two pooled connections); the
    // second through the Prisma client.
    const [a, b] = [writer(h), writer(h, true)];
    const flushes: Promise<void>[] = [];
    for (const row of rows) {
      const w = r.next() < 0.5 ? a : b;
      w.record(row);
      if (r.next() < 0.02) flushes.push(w.flush());
    }
    // Some records written again (a re-sent INSERT whose commit was not seen): counted once.
    for (let i = 0; i < 40; i++) a.record(r.pick(rows));
    await Promise.all([...flushes, a.flush(), b.flush()]);
    await Promise.all([a.close(), b.close()]);
    for (const key of [...keys, other]) await expectSameAsAggregates(h, key, [...nows, Date.UTC(2026, 8, 1)]);
  });

  it("counts the generations written before the counters when the migration applies", async () => {
    handle = await fresh({ migrate: false });
    const h = handle;
    // The history up to the migration before the counters', then generations written as before (no counters).
    const before = mkdtempSync(join(tmpdir(), "portico-migrations-"));
    try {
      cpSync(migrationsDirFor(h.provider), before, { recursive: true });
      rmSync(join(before, "20261126230000_key_spend_windows"), { recursive: true });
      await runMigrations({ provider: h.provider, url: h.url, migrationsDir: before });
    } finally {
      rmSync(before, { recursive: true, force: true });
    }
    const keys = [await newKey(h.db, "m1"), await newKey(h.db, "m2")];
    const nows = [Date.UTC(2026, 10, 30), Date.UTC(2026, 11, 31, 23, 59, 59, 999), Date.UTC(2028, 1, 29, 6)];
    const rows = randomRows(23, keys, nows, 600);
    for (let i = 0; i < rows.length; i += 100) await h.db.generation.createMany({ data: rows.slice(i, i + 100) });
    expect((await runMigrations({ provider: h.provider, url: h.url })).applied).toEqual(["20261126230000_key_spend_windows"]);
    for (const key of keys) await expectSameAsAggregates(h, key, nows);
    // And the writer adds to the counted windows from there.
    await write(h, randomRows(29, keys, nows, 200));
    for (const key of keys) await expectSameAsAggregates(h, key, nows);
  });
});
