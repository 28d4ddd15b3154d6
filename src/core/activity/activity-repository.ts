/**
 * Daily activity totals of an organization's generations (docs/api.md, "Activity"): ONE aggregate query per
 * call, on SQLite and PostgreSQL alike, over the `Generation` table's `(organizationId, createdAt)` index.
 *
 * Days are UTC days. Money is summed exactly: costs are integer femto-dollars (1e-15 USD, BIGINT). PostgreSQL's
 * SUM of a BIGINT is an exact NUMERIC; SQLite's SUM of integers is a 64-bit integer that raises "integer
 * overflow" past $9,223 (a busy organization's month), so there each cost is summed in two parts, whole
 * micro-dollars (`c / 10^9`) and the femto remainder (`c % 10^9`), recombined here with BigInt: exact up to
 * $9.2 trillion. Every aggregate leaves the database as text and is read with BigInt, never as a float.
 */
import type { Db, DbProvider } from "../../db/client.js";
import { moneySum, splitMoneySum, splitMoneyValue, sqliteDateTime } from "../../db/sql-values.js";

/** How the rows are split (besides the day). */
export type ActivityGrouping = "endpoint" | "workspace" | "model" | "provider" | "key";

export interface ActivityQuery {
  organizationId: string;
  /** Inclusive start and exclusive end of the window, UTC midnights. */
  from: Date;
  to: Date;
  grouping: ActivityGrouping;
  keyHash?: string | undefined;
  workspaceId?: string | undefined;
  /** Only the generations of keys this member created. */
  creatorUserId?: string | undefined;
}

/** One aggregate row as the database grouped it (before canonical slugs are applied). */
export interface ActivityRow {
  date: string;
  provider: string | null;
  model: string | null;
  workspaceId: string | null;
  keyHash: string | null;
  usageFemtoUsd: bigint;
  byokUsageFemtoUsd: bigint;
  requests: bigint;
  promptTokens: bigint;
  completionTokens: bigint;
  reasoningTokens: bigint;
  cachedTokens: bigint;
}

export interface ActivityRepository {
  totals(q: ActivityQuery): Promise<ActivityRow[]>;
}

/** The grouping columns of each split, beside the day. */
const GROUP_COLUMNS: Record<ActivityGrouping, ReadonlyArray<"provider" | "model" | "workspaceId" | "keyHash">> = {
  endpoint: ["provider", "model"],
  workspace: ["provider", "model", "workspaceId"],
  model: ["provider", "model"],
  provider: ["provider"],
  key: ["keyHash"],
};

export function createActivityRepository(deps: { db: Db; provider: DbProvider }): ActivityRepository {
  const sqlite = deps.provider === "sqlite";
  const ph = (i: number) => (sqlite ? "?" : `$${i}`);
  /** A time bound in the column's stored form: SQLite keeps ISO text with `+00:00`, PostgreSQL a timestamp(3). */
  const time = (d: Date): unknown => (sqlite ? sqliteDateTime(d) : d);
  const day = sqlite ? `strftime('%Y-%m-%d', "createdAt")` : `to_char("createdAt", 'YYYY-MM-DD')`;
  /** An exact sum of a femto-dollar column, as one or two text aggregates (see the file comment). */
  const money = (expr: string, as: string): string =>
    sqlite ? splitMoneySum(expr, as) : `${moneySum(expr, as)}, '0' AS "${as}_lo"`;
  const count = (expr: string, as: string) => `CAST(COALESCE(SUM(${expr}), 0) AS TEXT) AS "${as}"`;

  return {
    async totals(q) {
      const columns = GROUP_COLUMNS[q.grouping];
      const args: unknown[] = [q.organizationId, time(q.from), time(q.to)];
      const where = [`"organizationId" = ${ph(1)}`, `"createdAt" >= ${ph(2)}`, `"createdAt" < ${ph(3)}`, `"provider" IS NOT NULL`];
      if (q.keyHash !== undefined) {
        args.push(q.keyHash);
        where.push(`"keyHash" = ${ph(args.length)}`);
      }
      if (q.workspaceId !== undefined) {
        args.push(q.workspaceId);
        where.push(`"workspaceId" = ${ph(args.length)}`);
      }
      if (q.creatorUserId !== undefined) {
        args.push(q.organizationId, q.creatorUserId);
        where.push(`"keyHash" IN (SELECT "hash" FROM "ApiKey" WHERE "organizationId" = ${ph(args.length - 1)} AND "creatorUserId" = ${ph(args.length)})`);
      }
      const groupBy = [day, ...columns.map((c) => `"${c}"`)];
      const sql =
        `SELECT ${day} AS "date", ${columns.map((c) => `"${c}"`).join(", ")}, ` +
        `${money(`"costFemtoUsd"`, "usage")}, ` +
        `${money(`CASE WHEN "credentialSource" = 'byok' THEN "upstreamCostFemtoUsd" END`, "byok")}, ` +
        `CAST(COUNT(*) AS TEXT) AS "requests", ${count(`"promptTokens"`, "prompt")}, ${count(`"completionTokens"`, "completion")}, ` +
        `${count(`"reasoningTokens"`, "reasoning")}, ${count(`"cachedTokens"`, "cached")} ` +
        `FROM "Generation" WHERE ${where.join(" AND ")} GROUP BY ${groupBy.join(", ")}`;
      const rows = await deps.db.$queryRawUnsafe<Array<Record<string, string | null>>>(sql, ...args);
      const femtos = (r: Record<string, string | null>, as: string) => sqlite ? splitMoneyValue(r[`${as}_hi`], r[`${as}_lo`]) : BigInt(r[`${as}_hi`] ?? "0");
      return rows.map((r) => ({
        date: String(r["date"]),
        provider: columns.includes("provider") ? (r["provider"] ?? null) : null,
        model: columns.includes("model") ? (r["model"] ?? null) : null,
        workspaceId: columns.includes("workspaceId") ? (r["workspaceId"] ?? null) : null,
        keyHash: columns.includes("keyHash") ? (r["keyHash"] ?? null) : null,
        usageFemtoUsd: femtos(r, "usage"),
        byokUsageFemtoUsd: femtos(r, "byok"),
        requests: BigInt(r["requests"] ?? "0"),
        promptTokens: BigInt(r["prompt"] ?? "0"),
        completionTokens: BigInt(r["completion"] ?? "0"),
        reasoningTokens: BigInt(r["reasoning"] ?? "0"),
        cachedTokens: BigInt(r["cached"] ?? "0"),
      }));
    },
  };
}
