/**
 * The spend store on SQLite and PostgreSQL (src/core/spend/spend-store.ts), with an injected clock: a daily limit's
 * spend starts from 0 on the next UTC day inside the reserving statement; a reservation that does not fit is
 * refused with what is left; settling releases the reservation and counts the cost; an expired reservation is
 * released by the next reservation; a settlement after its reservation expired still counts the cost once.
 */
import { afterEach, describe, expect, it } from "vitest";
import { dbProviders } from "../../helpers/db.js";
import type { DatabaseHandle } from "../../../src/db/client.js";
import { createSpendStore } from "../../../src/core/spend/spend-store.js";

describe.each(dbProviders)("spend store (%s)", (_name, fresh) => {
  let handle: DatabaseHandle | undefined;
  afterEach(async () => {
    await handle?.close();
    handle = undefined;
  });

  it("rolls a daily window over, refuses what does not fit, releases expired reservations", async () => {
    handle = await fresh();
    const db = handle.db;
    let now = Date.UTC(2026, 10, 26, 23, 0);
    const store = createSpendStore({ db, reservationTtlMs: 60_000, now: () => now });
    await db.$transaction((tx) => store.setLimit(tx, "key:k1", 100n, "daily", async () => 30n));
    expect(await store.state("key:k1")).toEqual({ limit: 100n, reset: "daily", spent: 30n, reserved: 0n });

    const a = await store.reserve({ key: "key:k1", workspace: null, amount: 60n });
    expect(a.ok).toBe(true);
    const refused = await store.reserve({ key: "key:k1", workspace: null, amount: 20n });
    expect(refused).toEqual({ ok: false, refusedBy: "key", limit: 100n, remaining: 10n });
    await store.settle((a as { id: string }).id, 45n, { key: "key:k1", ws: null });
    expect(await store.state("key:k1")).toMatchObject({ spent: 75n, reserved: 0n });

    // Next UTC day: the spend starts again from 0, in the same statement that reserves.
    now = Date.UTC(2026, 10, 27, 0, 5);
    expect(await store.state("key:k1")).toMatchObject({ spent: 0n, reserved: 0n });
    const b = await store.reserve({ key: "key:k1", workspace: null, amount: 90n });
    expect(b.ok).toBe(true);
    const row = await db.spendCounter.findUnique({ where: { id: "key:k1" } });
    expect(row).toMatchObject({ spentFemtoUsd: 0n, reservedFemtoUsd: 90n, windowStartMs: BigInt(Date.UTC(2026, 10, 27)) });

    // The process holding b dies: after the expiry the next reservation releases it.
    now += 60_001;
    const c = await store.reserve({ key: "key:k1", workspace: null, amount: 100n });
    expect(c.ok).toBe(true);
    expect(await db.spendReservation.count({ where: { id: (b as { id: string }).id } })).toBe(0);
    // b's late settlement counts its cost once, without releasing anything a second time.
    await store.settle((b as { id: string }).id, 5n, { key: "key:k1", ws: null });
    expect(await store.state("key:k1")).toMatchObject({ spent: 5n, reserved: 100n });
  });

  it("a reservation needs both counters: a workspace that refuses leaves the key's untouched", async () => {
    handle = await fresh();
    const db = handle.db;
    const store = createSpendStore({ db, reservationTtlMs: 60_000 });
    await db.$transaction(async (tx) => {
      await store.setLimit(tx, "key:k", 1000n, "none", async () => 0n);
      await store.setLimit(tx, "ws:w", 50n, "monthly", async () => 0n);
    });
    const r = await store.reserve({ key: "key:k", workspace: "ws:w", amount: 60n });
    expect(r).toEqual({ ok: false, refusedBy: "workspace", limit: 50n, remaining: 50n });
    expect(await store.state("key:k")).toMatchObject({ reserved: 0n });
    expect(await db.spendReservation.count()).toBe(0);
    // A counter that does not exist bounds nothing.
    expect((await store.reserve({ key: "key:unlimited", workspace: null, amount: 10n ** 18n })).ok).toBe(true);
  });
});
