/**
 * The limit fields of keys and workspaces on the HTTP wire (docs/limits.md) ⇄ the gRPC messages: USD numbers
 * (`limit`, `budget`) ⇄ femto-USD integers, ISO times ⇄ Timestamps. A value of the wrong form is 400 naming it.
 * The fields themselves are defined in src/contract/requests/management.ts (validation and OpenAPI).
 */
import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Reason } from "../../contract/reasons.js";
import { femtoOfUsd, usdOfFemto } from "../../contract/money.js";
import { serviceError } from "../../lib/service-error.js";

const bad = (field: string, message: string) => serviceError(Reason.BAD_REQUEST, message, { field });

const femtoOf = (field: string, v: unknown): bigint | undefined => {
  if (v === null || v === undefined) return undefined;
  const f = femtoOfUsd(v);
  if (f === undefined) throw bad(field, `${field} must be a number of US dollars, at least 0, with at most 15 decimals`);
  return f;
};

const timeOf = (field: string, v: unknown): Timestamp | undefined => {
  if (v === null || v === undefined) return undefined;
  const t = typeof v === "string" ? Date.parse(v) : Number.NaN;
  if (Number.isNaN(t)) throw bad(field, `${field} must be an ISO 8601 time or null`);
  return timestampFromDate(new Date(t));
};

const intOf = (v: unknown): number | undefined => (typeof v === "number" ? v : undefined);

/** The gRPC fields of a key's limits given in `b`, and the mask paths they set. */
export function keyLimitsOf(b: Record<string, unknown>) {
  const fields: {
    limitFemtoUsd?: bigint;
    limitReset?: string;
    expiresAt?: Timestamp;
    rateLimitRpm?: number;
    rateLimitTpm?: number;
  } = {};
  const paths: string[] = [];
  const limit = femtoOf("limit", b.limit);
  if (limit !== undefined) fields.limitFemtoUsd = limit;
  if (Object.hasOwn(b, "limit")) paths.push("limit_femto_usd");
  if (typeof b.limit_reset === "string") {
    fields.limitReset = b.limit_reset;
    paths.push("limit_reset");
  }
  const exp = timeOf("expires_at", b.expires_at);
  if (exp !== undefined) fields.expiresAt = exp;
  if (Object.hasOwn(b, "expires_at")) paths.push("expires_at");
  for (const [wire, key] of [["rate_limit_rpm", "rateLimitRpm"], ["rate_limit_tpm", "rateLimitTpm"]] as const) {
    const n = intOf(b[wire]);
    if (n !== undefined) fields[key] = n;
    if (Object.hasOwn(b, wire)) paths.push(wire);
  }
  return { fields, paths };
}

/** The gRPC fields of a workspace's limits given in `b`, and the mask paths they set. */
export function workspaceLimitsOf(b: Record<string, unknown>) {
  const fields: { budgetFemtoUsd?: bigint; budgetReset?: string; rateLimitRpm?: number; rateLimitTpm?: number; responseCacheTtlSeconds?: number; contentLogRetentionDays?: number } = {};
  const paths: string[] = [];
  const budget = femtoOf("budget", b.budget);
  if (budget !== undefined) fields.budgetFemtoUsd = budget;
  if (Object.hasOwn(b, "budget")) paths.push("budget_femto_usd");
  if (typeof b.budget_reset === "string") {
    fields.budgetReset = b.budget_reset;
    paths.push("budget_reset");
  }
  for (const [wire, key] of [["rate_limit_rpm", "rateLimitRpm"], ["rate_limit_tpm", "rateLimitTpm"], ["response_cache_ttl_seconds", "responseCacheTtlSeconds"], ["content_log_retention_days", "contentLogRetentionDays"]] as const) {
    const n = intOf(b[wire]);
    if (n !== undefined) fields[key] = n;
    if (Object.hasOwn(b, wire)) paths.push(wire);
  }
  return { fields, paths };
}

export const usdOrNull = (f: bigint | undefined) => (f === undefined ? null : usdOfFemto(f));
export const isoOrNull = (t: Timestamp | undefined) => (t ? timestampDate(t).toISOString() : null);
