/**
 * Spend counters and reservations (docs/limits.md), in the database every instance shares, so that limits hold
 * across processes and machines without a coordinator:
 *
 *   reserve   one transaction: release the expired reservations of the counters involved, then for the key's
 *             counter and the workspace's one a single conditional UPDATE
 *               SET reserved = reserved + amount WHERE spent(window) + reserved + amount <= limit
 *             (PostgreSQL re-evaluates the WHERE on the newest row version under its row lock, SQLite runs one
 *             writer at a time), then the reservation row; a counter that refuses rolls everything back.
 *   settle    one transaction: delete the reservation; if it was still there, reserved −= amount; spent += cost.
 *   extend    pushes a live reservation's expiry (a long stream keeps its reservation).
 *
 * A reservation whose process died is released by the next reservation or read on its counters once its expiry
 * (`reservationTtlMs`) has passed. Counter ids: `key:<key id>`, `ws:<workspace id>`. Amounts are femto-USD.
 * Windows (daily / weekly / monthly, UTC) are applied inside the statements: a counter whose window start is
 * older than the current one counts its spend as 0 and moves its window on the same write.
 */
import { randomUUID } from "node:crypto";
import type { Db } from "../../db/client.js";
import { Prisma, type DbTransaction } from "../../db/prisma.js";
import { windowStart, windowStarts, type LimitReset } from "./windows.js";

export const keyCounterId = (keyId: string) => `key:${keyId}`;
export const workspaceCounterId = (workspaceId: string) => `ws:${workspaceId}`;

export interface SpendStoreOptions {
  /**
   * Writes this process's queued generation records (generations.ts batches them for up to its flush
   * interval). Called before a limit change recounts a window's spend from the records, outside its transaction.
   */
  writeQueuedRecords?: () => Promise<void>;
  db: Db;
  /** A reservation not settled within this long is released (its process is presumed dead). */
  reservationTtlMs: number;
  now?: () => number;
}

export type ReserveResult = { ok: true; id: string } | { ok: false; refusedBy: "key" | "workspace"; limit: bigint; remaining: bigint };

export interface CounterState {
  limit: bigint | null;
  reset: LimitReset;
  /** Settled in the current window. */
  spent: bigint;
  reserved: bigint;
}

class Refused extends Error {
  constructor(readonly by: "key" | "workspace") {
    super("refused");
  }
}

/** A bigint SQL parameter, typed as such on PostgreSQL too. */
const int = (v: number | bigint) => Prisma.sql`CAST(${BigInt(v)} AS BIGINT)`;

const big = (v: unknown): bigint => (typeof v === "bigint" ? v : BigInt(Math.trunc(Number(v ?? 0))));

export function createSpendStore(opts: SpendStoreOptions) {
  const { db } = opts;
  const now = opts.now ?? Date.now;

  /** The current window's start for the row's own reset kind, and its spend in that window (SQL fragments). */
  const windowSql = (t: number) => {
    const w = windowStarts(t);
    // Parameters are cast: PostgreSQL would otherwise type them as text inside CASE.
    const start = Prisma.sql`(CASE "limitReset" WHEN 'daily' THEN ${int(w.daily)} WHEN 'weekly' THEN ${int(w.weekly)} WHEN 'monthly' THEN ${int(w.monthly)} ELSE ${int(0)} END)`;
    const spent = Prisma.sql`(CASE WHEN "windowStartMs" < ${start} THEN ${int(0)} ELSE "spentFemtoUsd" END)`;
    const movedStart = Prisma.sql`(CASE WHEN "windowStartMs" < ${start} THEN ${start} ELSE "windowStartMs" END)`;
    return { spent, movedStart };
  };

  /** Releases the expired reservations on `counters` (inside `tx`). */
  async function sweep(tx: DbTransaction, counters: string[], t: number): Promise<void> {
    const expired = await tx.spendReservation.findMany({
      where: { expiresAtMs: { lt: BigInt(t) }, OR: [{ keyCounterId: { in: counters } }, { wsCounterId: { in: counters } }] },
    });
    for (const r of expired) await release(tx, r.id, 0n, t);
  }

  /** Deletes reservation `id` and moves `cost` into spent; returns whether it was still live. */
  async function release(tx: DbTransaction, id: string, cost: bigint, t: number, counters?: { key?: string | null; ws?: string | null }): Promise<boolean> {
    const r = await tx.spendReservation.findUnique({ where: { id } });
    const gone = r ? (await tx.spendReservation.deleteMany({ where: { id } })).count === 1 : false;
    const amount = gone && r ? r.amountFemtoUsd : 0n;
    const { spent, movedStart } = windowSql(t);
    const ids = [r?.keyCounterId ?? counters?.key ?? null, r?.wsCounterId ?? counters?.ws ?? null].filter((c): c is string => c !== null);
    for (const c of ids) {
      await tx.$executeRaw`UPDATE "SpendCounter" SET "spentFemtoUsd" = ${spent} + ${int(cost)}, "windowStartMs" = ${movedStart}, "reservedFemtoUsd" = "reservedFemtoUsd" - ${int(amount)} WHERE "id" = ${c}`;
    }
    return gone;
  }

  return {
    /**
     * Reserves `amount` against the key's counter and, when given, the workspace's. A counter that does not exist
     * (no limit was ever set) does not bound the request.
     */
    async reserve(input: { key: string | null; workspace: string | null; amount: bigint }): Promise<ReserveResult> {
      const t = now();
      const id = randomUUID();
      const counters = [input.key, input.workspace].filter((c): c is string => c !== null);
      const { spent, movedStart } = windowSql(t);
      try {
        await db.$transaction(async (tx) => {
          await sweep(tx, counters, t);
          for (const [c, by] of [[input.key, "key"], [input.workspace, "workspace"]] as const) {
            if (c === null) continue;
            const n = await tx.$executeRaw`UPDATE "SpendCounter" SET "spentFemtoUsd" = ${spent}, "windowStartMs" = ${movedStart}, "reservedFemtoUsd" = "reservedFemtoUsd" + ${int(input.amount)}
              WHERE "id" = ${c} AND ("limitFemtoUsd" IS NULL OR ${spent} + "reservedFemtoUsd" + ${int(input.amount)} <= "limitFemtoUsd")`;
            if (n === 0 && (await tx.spendCounter.findUnique({ where: { id: c }, select: { id: true } }))) throw new Refused(by);
          }
          await tx.spendReservation.create({
            data: { id, keyCounterId: input.key, wsCounterId: input.workspace, amountFemtoUsd: input.amount, expiresAtMs: BigInt(t + opts.reservationTtlMs) },
          });
        });
      } catch (err) {
        if (!(err instanceof Refused)) throw err;
        const c = (err.by === "key" ? input.key : input.workspace)!;
        const state = await this.state(c);
        const limit = state?.limit ?? 0n;
        const left = limit - (state?.spent ?? 0n) - (state?.reserved ?? 0n);
        return { ok: false, refusedBy: err.by, limit, remaining: left > 0n ? left : 0n };
      }
      return { ok: true, id };
    },

    /** Settles reservation `id` at `cost` (what the generation cost the account) and releases the rest. */
    async settle(id: string, cost: bigint, counters: { key: string | null; ws: string | null }): Promise<void> {
      const t = now();
      await db.$transaction((tx) => release(tx, id, cost, t, counters));
    },

    /** Keeps a live reservation for another `reservationTtlMs` from now. */
    async extend(id: string): Promise<void> {
      await db.spendReservation.updateMany({ where: { id }, data: { expiresAtMs: BigInt(now() + opts.reservationTtlMs) } });
    },

    /** A counter as it stands now (expired reservations released first); null when it does not exist. */
    async state(counter: string): Promise<CounterState | null> {
      const t = now();
      const row = await db.$transaction(async (tx) => {
        await sweep(tx, [counter], t);
        return tx.spendCounter.findUnique({ where: { id: counter } });
      });
      if (!row) return null;
      const reset = row.limitReset as LimitReset;
      const current = BigInt(windowStart(reset, t));
      return { limit: row.limitFemtoUsd, reset, spent: big(row.windowStartMs) < current ? 0n : big(row.spentFemtoUsd), reserved: big(row.reservedFemtoUsd) };
    },

    /**
     * Sets a counter's limit inside the caller's transaction (the key or workspace change that sets it). When the
     * counter is new or its reset kind changes, its spend in the current window is read from the generations
     * (`spentSince`), so a limit set mid-month counts the month's spend so far.
     */
    /**
     * Call before the transaction that sets a limit: the recount (`setLimit`'s `spentSince`) reads generation
     * records, and the ones this process has queued but not written yet would be missed. Records queued by other
     * instances are written within their flush interval (docs/limits.md).
     */
    async beforeLimitChange(): Promise<void> {
      await opts.writeQueuedRecords?.();
    },

    async setLimit(tx: DbTransaction, counter: string, limit: bigint | null, reset: LimitReset, spentSince: (sinceMs: number) => Promise<bigint>): Promise<void> {
      const t = now();
      const existing = await tx.spendCounter.findUnique({ where: { id: counter } });
      if (existing && existing.limitReset === reset) {
        await tx.spendCounter.update({ where: { id: counter }, data: { limitFemtoUsd: limit } });
        return;
      }
      if (!existing && limit === null) return;
      const start = windowStart(reset, t);
      const spentNow = await spentSince(start);
      await tx.spendCounter.upsert({
        where: { id: counter },
        create: { id: counter, limitFemtoUsd: limit, limitReset: reset, spentFemtoUsd: spentNow, windowStartMs: BigInt(start) },
        update: { limitFemtoUsd: limit, limitReset: reset, spentFemtoUsd: spentNow, windowStartMs: BigInt(start) },
      });
    },
  };
}

export type SpendStore = ReturnType<typeof createSpendStore>;
