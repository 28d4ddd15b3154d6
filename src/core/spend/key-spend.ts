/**
 * What GET /api/v1/key (IdentityService.GetCaller) reports of a key's spend (docs/limits.md): usage summed from
 * its generations (what the account pays: `costFemtoUsd`; BYOK-served ones at the provider's price apart), over
 * all time, today, this week (from Monday) and this month, UTC; and its limit with what is left of it in the
 * current window, from the key's spend counter (settled spend and live reservations).
 *
 * The sums are read from the key's spend counters per window (key-spend-windows.ts: kept by the generation
 * records' writer as it inserts them), not from the generations: a few rows whatever the key's history. ONE raw
 * statement reads them with the key's own fields, on SQLite and PostgreSQL alike: for each window kind the rows
 * whose start is at or after the current window's start (a range of the table's primary key; normally one row),
 * the key LEFT JOINed, sent past the Prisma client (DatabaseHandle.queryRaw: on PostgreSQL a named prepared
 * statement). The figures are those of the sums over the key's generations it replaced (`"createdAt" >= <window
 * start>`, bench/README.md, issue 24), the reasoning in key-spend-windows.ts; test/integration/spend compares them.
 *
 * Money is exact: each counter keeps its sum as whole micro-dollars and the femto-dollar remainder (BIGINTs that
 * leave the database as text), recombined and added here with BigInt, so no sum overflows.
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { DatabaseHandle, DbProvider } from "../../db/client.js";
import type { KeySpend } from "../../gen/portico/identity/v1/identity_service_pb.js";
import type { Init } from "../proto-init.js";
import { keyCounterId, type SpendStore } from "./spend-store.js";
import { windowStarts } from "./windows.js";
import { SUM_COLUMNS, WINDOW_KINDS } from "./key-spend-windows.js";
import { splitMoneyValue } from "../../db/sql-values.js";
import { usdString } from "../../contract/money.js";

const INT64_MAX = 2n ** 63n - 1n;

/** The key's own columns, first in every row (the counter rows follow: kind, then the four parts). */
const KEY_COLUMNS = 5;

/**
 * The statement for `provider`, and the parameters it takes in order as indexes into (the three window starts in
 * Unix ms, the organization, the key hash, the key id): SQLite's `?` are numbered by their place in the text
 * (better-sqlite3 takes no `?NNN`), so there a value used several times is passed as often. One row per counter
 * row read (none read: one row, its counter columns null).
 */
export function keySpendStatement(provider: DbProvider): { sql: string; order: number[] } {
  const sqlite = provider === "sqlite";
  /** A parameter's marker, made a placeholder once the text is whole. */
  const ph = (i: number) => `{{${i}}}`;
  const text = (c: string) => `CAST(${c} AS TEXT)`;
  // One arm per window kind, each a range of the primary key (organizationId, keyHash, reset, startMs).
  const arms = WINDOW_KINDS.map(
    (kind, i) =>
      `SELECT "reset", ${SUM_COLUMNS.map((c) => `${text(`"${c}"`)} AS "${c}"`).join(", ")} ` +
      `FROM "KeySpendWindow" WHERE "organizationId" = ${ph(4)} AND "keyHash" = ${ph(5)} AND "reset" = '${kind}'` +
      (i === 0 ? "" : ` AND "startMs" >= ${sqlite ? ph(i) : `${ph(i)}::bigint`}`),
  );
  const sql =
    `SELECT ${text(`k."limitFemtoUsd"`)} AS "limitFemtoUsd", k."limitReset" AS "limitReset", ` +
    // PostgreSQL: the time as ISO text (pg would read a timestamp without time zone in the process's zone).
    `${sqlite ? `k."expiresAt"` : `to_char(k."expiresAt", 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`} AS "expiresAt", ` +
    `k."rateLimitRpm" AS "rateLimitRpm", k."rateLimitTpm" AS "rateLimitTpm", s.* ` +
    `FROM (SELECT 1 AS "one") o LEFT JOIN "ApiKey" k ON k."id" = ${sqlite ? ph(6) : `${ph(6)}::text`} ` +
    `LEFT JOIN (${arms.join(" UNION ALL ")}) s ON 1 = 1`;
  const order: number[] = [];
  const out = sql.replace(/\{\{(\d)\}\}/g, (_, i: string) => {
    order.push(Number(i) - 1);
    return sqlite ? "?" : `$${i}`;
  });
  return { sql: out, order: sqlite ? order : [0, 1, 2, 3, 4, 5] };
}

/** A DateTime column read raw: a Date (PostgreSQL), ms or an ISO string (SQLite). */
function dateOrNull(v: unknown): Date | null {
  if (v === null || v === undefined) return null;
  if (v instanceof Date) return v;
  if (typeof v === "number" || typeof v === "bigint") return new Date(Number(v));
  const t = Date.parse(String(v));
  return Number.isNaN(t) ? null : new Date(t);
}

const intOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

/** The eight sums in KeySpend's order (paid: all time, today, this week, this month; then BYOK) from the statement's rows. */
function windowSums(rows: unknown[][]): bigint[] {
  const sums: bigint[] = new Array<bigint>(8).fill(0n);
  for (const r of rows) {
    const kind = WINDOW_KINDS.indexOf(r[KEY_COLUMNS] as (typeof WINDOW_KINDS)[number]);
    if (kind < 0) continue; // no counter row: the LEFT JOIN's nulls
    sums[kind]! += splitMoneyValue(r[KEY_COLUMNS + 1], r[KEY_COLUMNS + 2]);
    sums[4 + kind]! += splitMoneyValue(r[KEY_COLUMNS + 3], r[KEY_COLUMNS + 4]);
  }
  return sums;
}

export function createKeySpendReader(deps: {
  /** DatabaseHandle.queryRaw: the statement past the Prisma client. */
  query: DatabaseHandle["queryRaw"];
  provider: DbProvider;
  store: SpendStore;
  now?: () => number;
}) {
  const { query, store } = deps;
  const now = deps.now ?? Date.now;
  const statement = keySpendStatement(deps.provider);
  /** `organizationId`: the key's organization, as the request log and the counters name the key with its hash. */
  return async function keySpend(keyId: string, keyHash: string, organizationId: string): Promise<Init<KeySpend>> {
    const w = windowStarts(now());
    const values = [w.daily, w.weekly, w.monthly, organizationId, keyHash, keyId];
    const rows = await query("portico_key_spend", statement.sql, statement.order.map((i) => values[i]));
    const sums = windowSums(rows);
    /** The int64 field: the sum while it fits, else INT64_MAX (the `*_usd` text field is exact). */
    const fits = (i: number): bigint => (sums[i]! > INT64_MAX ? INT64_MAX : sums[i]!);
    const text = (i: number): string => usdString(sums[i]!);
    const row = rows[0] ?? [];
    const out: Init<KeySpend> = {
      usageFemtoUsd: fits(0),
      usageDailyFemtoUsd: fits(1),
      usageWeeklyFemtoUsd: fits(2),
      usageMonthlyFemtoUsd: fits(3),
      byokUsageFemtoUsd: fits(4),
      byokUsageDailyFemtoUsd: fits(5),
      byokUsageWeeklyFemtoUsd: fits(6),
      byokUsageMonthlyFemtoUsd: fits(7),
      usageUsd: text(0),
      usageDailyUsd: text(1),
      usageWeeklyUsd: text(2),
      usageMonthlyUsd: text(3),
      byokUsageUsd: text(4),
      byokUsageDailyUsd: text(5),
      byokUsageWeeklyUsd: text(6),
      byokUsageMonthlyUsd: text(7),
      limitReset: (row[1] as string | null | undefined) ?? "none",
    };
    const expiresAt = dateOrNull(row[2]);
    if (expiresAt) out.expiresAt = timestampFromDate(expiresAt);
    const rpm = intOrNull(row[3]);
    const tpm = intOrNull(row[4]);
    if (rpm !== null) out.rateLimitRpm = rpm;
    if (tpm !== null) out.rateLimitTpm = tpm;
    const limit = row[0];
    if (limit !== null && limit !== undefined) {
      const limitFemtoUsd = BigInt(limit as string);
      out.limitFemtoUsd = limitFemtoUsd;
      const state = await store.state(keyCounterId(keyId));
      const left = limitFemtoUsd - (state?.spent ?? 0n) - (state?.reserved ?? 0n);
      out.limitRemainingFemtoUsd = left > 0n ? left : 0n;
    }
    return out;
  };
}

export type KeySpendReader = ReturnType<typeof createKeySpendReader>;
