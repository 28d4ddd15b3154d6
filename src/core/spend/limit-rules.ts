/**
 * The input rules of limits set through the management API, gRPC and `portico admin` (docs/limits.md): a spend
 * limit is femto-USD ≥ 0 (at most 9.2e18, $9,223), a reset is "daily", "weekly", "monthly" or "none", an expiry
 * lies in the future, a rate bound is a whole number from 1 to 1e9. Errors name the field as the HTTP body does.
 */
import { invalidArgument } from "../errors.js";
import { isLimitReset, type LimitReset } from "./windows.js";

const MAX_FEMTO = 2n ** 63n - 1n;

export function checkSpendLimit(field: string, v: bigint | null): bigint | null {
  if (v === null) return null;
  if (v < 0n || v > MAX_FEMTO) throw invalidArgument(field, `${field} must be at least 0 and at most $9,223`);
  return v;
}

export function checkReset(field: string, v: string): LimitReset {
  const r = v === "" ? "none" : v;
  if (!isLimitReset(r)) throw invalidArgument(field, `${field} must be one of daily, weekly, monthly, none`);
  return r;
}

export function checkExpiry(field: string, v: Date | null, now = Date.now()): Date | null {
  if (v === null) return null;
  if (Number.isNaN(v.getTime()) || v.getTime() <= now) throw invalidArgument(field, `${field} must be a time in the future`);
  return v;
}

export function checkRate(field: string, v: number | null): number | null {
  if (v === null) return null;
  if (!Number.isInteger(v) || v < 1 || v > 1_000_000_000) throw invalidArgument(field, `${field} must be a whole number from 1 to 1000000000`);
  return v;
}
