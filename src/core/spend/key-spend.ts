/**
 * What GET /api/v1/key (IdentityService.GetCaller) reports of a key's spend (docs/limits.md): usage summed from
 * its generations (what the account pays: `costFemtoUsd`; BYOK-served ones at the provider's price apart), over
 * all time, today, this week (from Monday) and this month, UTC; and its limit with what is left of it in the
 * current window, from the key's spend counter (settled spend and live reservations).
 *
 * The eight sums and the key's own fields are read in ONE raw statement, on SQLite and PostgreSQL alike: each
 * window is a conditional sum (`CASE WHEN "createdAt" >= <window start>`) over the key's rows of the request log's
 * `(organizationId, keyHash, createdAt, id)` index. It ran as eight Prisma `aggregate` queries and a key read,
 * each compiled by Prisma's query compiler: ≈ 3.5 ms of CPU per request (bench/README.md, issue 24).
 *
 * Money is summed exactly, as in the activity totals (src/core/activity/activity-repository.ts): costs are integer
 * femto-dollars (BIGINT). PostgreSQL's SUM of a BIGINT is an exact NUMERIC; SQLite's SUM of integers is a 64-bit
 * integer that raises "integer overflow" past $9,223, so there each cost is summed in two parts, whole
 * micro-dollars (`c / 10^9`) and the femto remainder (`c % 10^9`), recombined here with BigInt (exact up to
 * $9.2 trillion). Every sum leaves the database as text and is read with BigInt, never as a float.
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Db, DbProvider } from "../../db/client.js";
import type { KeySpend } from "../../gen/portico/identity/v1/identity_service_pb.js";
import type { Init } from "../proto-init.js";
import { keyCounterId, type SpendStore } from "./spend-store.js";
import { windowStarts } from "./windows.js";

const MICRO = 1_000_000_000n;

/** The sums' column names, in KeySpend's order: all time, today, this week, this month; paid, then BYOK. */
const SUMS = ["u", "ud", "uw", "um", "b", "bd", "bw", "bm"] as const;

/**
 * The statement for `provider`, and the parameters it takes in order as indexes into (the three window starts, the
 * organization, the key hash, the key id): SQLite's `?` are numbered by their place in the text (better-sqlite3
 * takes no `?NNN`), so there a value used several times is passed as often.
 */
function keySpendStatement(provider: DbProvider): { sql: string; order: number[] } {
  const sqlite = provider === "sqlite";
  /** A parameter's marker, made a placeholder once the text is whole. */
  const ph = (i: number) => `{{${i}}}`;
  // PostgreSQL: the window starts are ISO text cast to the column's type (a trailing Z is ignored by the cast).
  const since = (i: number) => (sqlite ? ph(i) : `${ph(i)}::timestamp(3)`);
  const money = (expr: string, as: string): string =>
    sqlite
      ? `CAST(COALESCE(SUM((${expr}) / ${MICRO}), 0) AS TEXT) AS "${as}_hi", CAST(COALESCE(SUM((${expr}) % ${MICRO}), 0) AS TEXT) AS "${as}_lo"`
      : `CAST(COALESCE(SUM(${expr}), 0) AS TEXT) AS "${as}_hi"`;
  const windowed = (column: string, extra: string) => [
    extra ? `CASE WHEN ${extra} THEN ${column} END` : column,
    ...[1, 2, 3].map((i) => `CASE WHEN ${extra ? `${extra} AND ` : ""}"createdAt" >= ${since(i)} THEN ${column} END`),
  ];
  const exprs = [...windowed(`"costFemtoUsd"`, ""), ...windowed(`"upstreamCostFemtoUsd"`, `"credentialSource" = 'byok'`)];
  // The sums are one row (an aggregate without GROUP BY), whatever the key; the key is LEFT JOINed to it.
  const text =
    `SELECT s.*, CAST(k."limitFemtoUsd" AS TEXT) AS "limitFemtoUsd", k."limitReset" AS "limitReset", ` +
    `k."expiresAt" AS "expiresAt", k."rateLimitRpm" AS "rateLimitRpm", k."rateLimitTpm" AS "rateLimitTpm" ` +
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

export function createKeySpendReader(deps: { db: Db; provider: DbProvider; store: SpendStore; now?: () => number }) {
  const { db, store } = deps;
  const now = deps.now ?? Date.now;
  const sqlite = deps.provider === "sqlite";
  const { sql, order } = keySpendStatement(deps.provider);
  /** A window start in the column's stored form: SQLite keeps ISO text with `+00:00`, PostgreSQL a timestamp(3). */
  const time = (ms: number): string => {
    const iso = new Date(ms).toISOString();
    return sqlite ? `${iso.slice(0, -1)}+00:00` : iso;
  };
  /** `organizationId`: the key's organization, so that the sums read the request log's (organization, key, time) index. */
  return async function keySpend(keyId: string, keyHash: string, organizationId: string): Promise<Init<KeySpend>> {
    const w = windowStarts(now());
    const values = [time(w.daily), time(w.weekly), time(w.monthly), organizationId, keyHash, keyId];
    const rows = await db.$queryRawUnsafe<Array<Record<string, unknown>>>(sql, ...order.map((i) => values[i]));
    const row = rows[0] ?? {};
    const sum = (as: (typeof SUMS)[number]): bigint => {
      const hi = row[`${as}_hi`];
      const lo = row[`${as}_lo`];
      return (hi == null ? 0n : BigInt(hi as string)) * (sqlite ? MICRO : 1n) + (lo == null ? 0n : BigInt(lo as string));
    };
    const out: Init<KeySpend> = {
      usageFemtoUsd: sum("u"),
      usageDailyFemtoUsd: sum("ud"),
      usageWeeklyFemtoUsd: sum("uw"),
      usageMonthlyFemtoUsd: sum("um"),
      byokUsageFemtoUsd: sum("b"),
      byokUsageDailyFemtoUsd: sum("bd"),
      byokUsageWeeklyFemtoUsd: sum("bw"),
      byokUsageMonthlyFemtoUsd: sum("bm"),
      limitReset: (row["limitReset"] as string | null | undefined) ?? "none",
    };
    const expiresAt = dateOrNull(row["expiresAt"]);
    if (expiresAt) out.expiresAt = timestampFromDate(expiresAt);
    const rpm = intOrNull(row["rateLimitRpm"]);
    const tpm = intOrNull(row["rateLimitTpm"]);
    if (rpm !== null) out.rateLimitRpm = rpm;
    if (tpm !== null) out.rateLimitTpm = tpm;
    const limit = row["limitFemtoUsd"];
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
