/**
 * What GET /api/v1/key (IdentityService.GetCaller) reports of a key's spend (docs/limits.md): usage summed from
 * its generations (what the account pays: `costFemtoUsd`; BYOK-served ones at the provider's price apart), over
 * all time, today, this week (from Monday) and this month, UTC; and its limit with what is left of it in the
 * current window, from the key's spend counter (settled spend and live reservations).
 *
 * The eight sums and the key's own fields are read in ONE raw statement, on SQLite and PostgreSQL alike: each
 * window is a conditional sum (`CASE WHEN "createdAt" >= <window start>`) over the key's rows of the request log's
 * `(organizationId, keyHash, createdAt, id)` index, sent past the Prisma client (DatabaseHandle.queryRaw: on
 * PostgreSQL a named prepared statement). It ran as eight Prisma `aggregate` queries and a key read, each compiled
 * by Prisma's query compiler: ≈ 3.5 ms of CPU per request (bench/README.md, issue 24).
 *
 * Money is summed exactly, as in the activity totals (src/core/activity/activity-repository.ts): costs are integer
 * femto-dollars (BIGINT). PostgreSQL's SUM of a BIGINT is an exact NUMERIC; SQLite's SUM of integers is a 64-bit
 * integer, exact until it raises "integer overflow" past $9,223: then the statement runs again with each cost
 * summed in two parts, whole micro-dollars (`c / 10^9`) and the femto remainder (`c % 10^9`), recombined here
 * with BigInt (exact up to $9.2 trillion; split always, the sums cost ≈ 1.5× as much per generation of the key).
 * Every sum leaves the database as text and is read with BigInt, never as a float.
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { DatabaseHandle, DbProvider } from "../../db/client.js";
import type { KeySpend } from "../../gen/portico/identity/v1/identity_service_pb.js";
import type { Init } from "../proto-init.js";
import { keyCounterId, type SpendStore } from "./spend-store.js";
import { windowStarts } from "./windows.js";
import { usdString } from "../../contract/money.js";
import { moneySum, splitMoneySum, splitMoneyValue, sqliteDateTime } from "../../db/sql-values.js";

const INT64_MAX = 2n ** 63n - 1n;

/** The sums' column names, in KeySpend's order: all time, today, this week, this month; paid, then BYOK. Read by place. */
const SUMS = ["u", "ud", "uw", "um", "b", "bd", "bw", "bm"] as const;

/**
 * The statement for `provider`, and the parameters it takes in order as indexes into (the three window starts, the
 * organization, the key hash, the key id): SQLite's `?` are numbered by their place in the text (better-sqlite3
 * takes no `?NNN`), so there a value used several times is passed as often. `split` (SQLite): each sum in two
 * parts, micro-dollars and the femto remainder (two columns per sum), which never overflows.
 */
export function keySpendStatement(provider: DbProvider, split = false): { sql: string; order: number[] } {
  const sqlite = provider === "sqlite";
  /** A parameter's marker, made a placeholder once the text is whole. */
  const ph = (i: number) => `{{${i}}}`;
  // PostgreSQL: the window starts are ISO text cast to the column's type (a trailing Z is ignored by the cast).
  const since = (i: number) => (sqlite ? ph(i) : `${ph(i)}::timestamp(3)`);
  const money = sqlite && split ? splitMoneySum : moneySum;
  const windowed = (column: string, extra: string) => [
    extra ? `CASE WHEN ${extra} THEN ${column} END` : column,
    ...[1, 2, 3].map((i) => `CASE WHEN ${extra ? `${extra} AND ` : ""}"createdAt" >= ${since(i)} THEN ${column} END`),
  ];
  const exprs = [...windowed(`"costFemtoUsd"`, ""), ...windowed(`"upstreamCostFemtoUsd"`, `"credentialSource" = 'byok'`)];
  // The sums are one row (an aggregate without GROUP BY), whatever the key; the key is LEFT JOINed to it.
  const text =
    `SELECT s.*, CAST(k."limitFemtoUsd" AS TEXT) AS "limitFemtoUsd", k."limitReset" AS "limitReset", ` +
    // PostgreSQL: the time as ISO text (pg would read a timestamp without time zone in the process's zone).
    `${sqlite ? `k."expiresAt"` : `to_char(k."expiresAt", 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`} AS "expiresAt", ` +
    `k."rateLimitRpm" AS "rateLimitRpm", k."rateLimitTpm" AS "rateLimitTpm" ` +
    `FROM (SELECT ${exprs.map((e, i) => money(e, SUMS[i]!)).join(", ")} FROM "Generation" ` +
    `WHERE "organizationId" = ${ph(4)} AND "keyHash" = ${ph(5)}) s ` +
    `LEFT JOIN "ApiKey" k ON k."id" = ${ph(6)}`;
  const order: number[] = [];
  const sql = text.replace(/\{\{(\d)\}\}/g, (_, i: string) => {
    order.push(Number(i) - 1);
    return sqlite ? "?" : `$${i}`;
  });
  return { sql, order: sqlite ? order : [0, 1, 2, 3, 4, 5] };
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

export function createKeySpendReader(deps: {
  /** DatabaseHandle.queryRaw: the statement past the Prisma client. */
  query: DatabaseHandle["queryRaw"];
  provider: DbProvider;
  store: SpendStore;
  now?: () => number;
}) {
  const { query, store } = deps;
  const now = deps.now ?? Date.now;
  const sqlite = deps.provider === "sqlite";
  const plain = keySpendStatement(deps.provider);
  const split = sqlite ? keySpendStatement(deps.provider, true) : plain;
  /** A window start in the column's stored form: SQLite keeps ISO text with `+00:00`, PostgreSQL a timestamp(3). */
  const time = (ms: number): string => (sqlite ? sqliteDateTime(new Date(ms)) : new Date(ms).toISOString());
  const big = (v: unknown): bigint => (v === null || v === undefined ? 0n : BigInt(v as string));
  /** `organizationId`: the key's organization, so that the sums read the request log's (organization, key, time) index. */
  return async function keySpend(keyId: string, keyHash: string, organizationId: string): Promise<Init<KeySpend>> {
    const w = windowStarts(now());
    const values = [time(w.daily), time(w.weekly), time(w.monthly), organizationId, keyHash, keyId];
    let parts = 1;
    let rows: unknown[][];
    try {
      rows = await query("portico_key_spend", plain.sql, plain.order.map((i) => values[i]));
    } catch (err) {
      if (!sqlite || !/integer overflow/i.test(String((err as Error)?.message))) throw err;
      parts = 2;
      rows = await query("", split.sql, split.order.map((i) => values[i]));
    }
    const row = rows[0] ?? [];
    /** The key's fields follow the sums. */
    const k = SUMS.length * parts;
    const sum = (i: number): bigint => (parts === 2 ? splitMoneyValue(row[2 * i], row[2 * i + 1]) : big(row[i]));
    const sums = SUMS.map((_, i) => sum(i));
    /** The int64 field: the sum while it fits, else INT64_MAX (the `*_usd` text field is exact). */
    const fits = (i: number): bigint => (sums[i]! > INT64_MAX ? INT64_MAX : sums[i]!);
    const text = (i: number): string => usdString(sums[i]!);
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
      limitReset: (row[k + 1] as string | null | undefined) ?? "none",
    };
    const expiresAt = dateOrNull(row[k + 2]);
    if (expiresAt) out.expiresAt = timestampFromDate(expiresAt);
    const rpm = intOrNull(row[k + 3]);
    const tpm = intOrNull(row[k + 4]);
    if (rpm !== null) out.rateLimitRpm = rpm;
    if (tpm !== null) out.rateLimitTpm = tpm;
    const limit = row[k];
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
