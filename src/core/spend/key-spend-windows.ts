/**
 * Per-key spend counters per window (the `KeySpendWindow` table; docs/limits.md, "Spend counters"), kept by the
 * generation records' writer (src/core/chat/generations.ts) as it inserts the records, so that reading a key's
 * spend (GetCaller, a key limit's recount) reads at most a few rows, however many generations the key has.
 *
 * Rows: one per key (organization and key hash, as the request log names it), window kind and window start. The
 * kinds are a limit's resets: "daily", "weekly", "monthly" (UTC, weeks from Monday; windows.ts) and "none" (all
 * time, start 0). A generation counts in the four rows whose start is `windowStart(kind, createdAt)`.
 *
 * Why the figures are those of the sums over the records they replace (`"createdAt" >= windowStart(kind, now)`):
 * a window start is a boundary of its kind and `windowStart(kind, ·)` is non-decreasing, so for any time t,
 * `t >= windowStart(kind, now)` exactly when `windowStart(kind, t) >= windowStart(kind, now)`. A reader therefore
 * sums the rows of a kind whose start is at or after the current window's start: normally one row, more only for
 * records dated in a later window (another instance's clock ahead), which the old sums counted too. Rows of past
 * windows are never read again; they are kept (≈ 430 rows a year per key in use against one row per request in
 * the request log; nothing prunes them, and deleting them would change no figure).
 *
 * Money: every sum is kept in two exact BIGINT parts, whole micro-dollars and the femto-dollar remainder (as
 * sql-values.ts splits sums), so no counter overflows before $9.2 trillion (a plain BIGINT of femto-dollars would
 * at $9,223); readers recombine them with BigInt. Written with upserts that add to the row in the database (never
 * read, then write), so writers in several processes on PostgreSQL add up; SQLite has one writer at a time.
 */
import type { DbTransaction } from "../../db/prisma.js";
import { FEMTOS_PER_MICRO, splitMoneyValue } from "../../db/sql-values.js";
import { windowStart, type LimitReset } from "./windows.js";

/** The kinds in KeySpend's order: all time, today, this week, this month. */
export const WINDOW_KINDS = ["none", "daily", "weekly", "monthly"] as const satisfies readonly LimitReset[];

/** What a generation record adds to its key's windows (the columns the writer has). */
export interface SpendRecord {
  organizationId: string;
  keyHash: string;
  createdAt: Date;
  costFemtoUsd: bigint | null;
  upstreamCostFemtoUsd: bigint | null;
  credentialSource: string | null;
}

/** One counter row's increment. */
export interface WindowDelta {
  organizationId: string;
  keyHash: string;
  reset: LimitReset;
  startMs: number;
  cost: bigint;
  byok: bigint;
}

const DAY_MS = 86_400_000;

/** The increments of `records`, one per counter row they touch, in key, kind and start order (the upserts' lock order). */
export function windowDeltas(records: Iterable<SpendRecord>): WindowDelta[] {
  // First by key and UTC day (arithmetic only: this runs for every record written), then each day into its four rows.
  // The entry of the record before: a flush's records mostly share its key and day, and then no map key is made.
  const days = new Map<string, WindowDelta>();
  let last: WindowDelta | undefined;
  for (const r of records) {
    const cost = r.costFemtoUsd ?? 0n;
    const byok = r.credentialSource === "byok" ? (r.upstreamCostFemtoUsd ?? 0n) : 0n;
    const at = r.createdAt.getTime();
    const startMs = at - (((at % DAY_MS) + DAY_MS) % DAY_MS);
    if (last !== undefined && last.startMs === startMs && last.keyHash === r.keyHash && last.organizationId === r.organizationId) {
      last.cost += cost;
      last.byok += byok;
      continue;
    }
    last = addDelta(days, `${r.organizationId}\n${r.keyHash}\n${startMs}`, { organizationId: r.organizationId, keyHash: r.keyHash, reset: "daily", startMs, cost, byok });
  }
  const rows = new Map<string, WindowDelta>();
  for (const day of days.values()) {
    for (const reset of WINDOW_KINDS) {
      const startMs = reset === "daily" ? day.startMs : windowStart(reset, day.startMs);
      addDelta(rows, `${day.organizationId}\n${day.keyHash}\n${reset}\n${startMs}`, { ...day, reset, startMs });
    }
  }
  return [...rows.values()].sort((a, b) => compare(a.organizationId, b.organizationId) || compare(a.keyHash, b.keyHash) || compare(a.reset, b.reset) || a.startMs - b.startMs);
}

/** Adds `delta`'s sums to the entry `id` of `into`, or makes `delta` that entry; returns the entry. */
function addDelta(into: Map<string, WindowDelta>, id: string, delta: WindowDelta): WindowDelta {
  const d = into.get(id);
  if (d) {
    d.cost += delta.cost;
    d.byok += delta.byok;
    return d;
  }
  into.set(id, delta);
  return delta;
}

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** A counter row's sums, each in two parts: paid (micro-dollars, femto rest), then BYOK. */
export const SUM_COLUMNS = ["costMicroUsd", "costFemtoRest", "byokMicroUsd", "byokFemtoRest"] as const;

const COLUMNS = `"organizationId", "keyHash", "reset", "startMs", ${SUM_COLUMNS.map((c) => `"${c}"`).join(", ")}`;
const CONFLICT = `ON CONFLICT ("organizationId", "keyHash", "reset", "startMs") DO UPDATE SET ` +
  SUM_COLUMNS.map((c) => `"${c}" = w."${c}" + excluded."${c}"`).join(", ");

/** SQLite: one counter row's upsert; parameters from {@link deltaParams}. */
export const SQLITE_WINDOW_UPSERT = `INSERT INTO "KeySpendWindow" AS w (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ${CONFLICT}`;

/** A delta as {@link SQLITE_WINDOW_UPSERT}'s parameters (BIGINTs as BigInt; each sum split into micro-dollars and the rest). */
export const deltaParams = (d: WindowDelta): unknown[] => [
  d.organizationId, d.keyHash, d.reset, BigInt(d.startMs),
  d.cost / FEMTOS_PER_MICRO, d.cost % FEMTOS_PER_MICRO, d.byok / FEMTOS_PER_MICRO, d.byok % FEMTOS_PER_MICRO,
];

/**
 * PostgreSQL: `insert` (the generation records' multi-row INSERT … ON CONFLICT ("id") DO NOTHING) and the counter
 * upserts of the rows it inserted, in one statement (a data-modifying WITH): a re-sent INSERT whose first commit
 * was not seen inserts nothing and so adds nothing. The window starts are computed here from "createdAt" (a
 * timestamp without time zone holding UTC: date_trunc and EXTRACT(EPOCH …) read it as UTC whatever the session's
 * time zone; `week` truncates to Monday), as the migration's backfill does; windows.ts for the same in JS.
 */
export function withWindowUpserts(insert: string): string {
  const part = (expr: string, op: "/" | "%") => `COALESCE(SUM(${expr} ${op} ${FEMTOS_PER_MICRO}), 0)`;
  const byok = `CASE WHEN g."credentialSource" = 'byok' THEN g."upstreamCostFemtoUsd" END`;
  return (
    `WITH g AS (${insert} RETURNING "organizationId", "keyHash", "createdAt", "costFemtoUsd", "upstreamCostFemtoUsd", "credentialSource") ` +
    `INSERT INTO "KeySpendWindow" AS w (${COLUMNS}) ` +
    `SELECT g."organizationId", g."keyHash", k."reset", ` +
    `CASE k."reset" WHEN 'none' THEN 0 ELSE (EXTRACT(EPOCH FROM date_trunc(k."unit", g."createdAt")) * 1000)::bigint END, ` +
    `${part(`g."costFemtoUsd"`, "/")}, ${part(`g."costFemtoUsd"`, "%")}, ${part(byok, "/")}, ${part(byok, "%")} ` +
    `FROM g CROSS JOIN (VALUES ('none', 'day'), ('daily', 'day'), ('weekly', 'week'), ('monthly', 'month')) AS k ("reset", "unit") ` +
    `GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4 ${CONFLICT}`
  );
}

/**
 * What the key paid (`costFemtoUsd`) in the current `reset` window, from its counters, inside `tx` (a limit's
 * recount: spend-store.ts setLimit). `sinceMs` is that window's start (`windowStart(reset, now)`).
 */
export async function keyCostSince(tx: DbTransaction, key: { organizationId: string; keyHash: string }, reset: LimitReset, sinceMs: number): Promise<bigint> {
  const rows = await tx.keySpendWindow.findMany({
    where: { organizationId: key.organizationId, keyHash: key.keyHash, reset, startMs: { gte: BigInt(sinceMs) } },
    select: { costMicroUsd: true, costFemtoRest: true },
  });
  return rows.reduce((s, r) => s + splitMoneyValue(r.costMicroUsd, r.costFemtoRest), 0n);
}
