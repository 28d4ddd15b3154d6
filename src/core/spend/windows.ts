/**
 * Spend windows (docs/limits.md): a limit's spend starts again from 0 at 00:00 UTC every day ("daily"), every
 * Monday ("weekly") or on the 1st of every month ("monthly"); "none" never resets. Pure.
 */
export const LIMIT_RESETS = ["none", "daily", "weekly", "monthly"] as const;
export type LimitReset = (typeof LIMIT_RESETS)[number];

export const isLimitReset = (v: string): v is LimitReset => (LIMIT_RESETS as readonly string[]).includes(v);

/** The start of the current day, week (Monday) and month, UTC, in Unix ms. */
export function windowStarts(nowMs: number): { daily: number; weekly: number; monthly: number } {
  const d = new Date(nowMs);
  const daily = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  const sinceMonday = (d.getUTCDay() + 6) % 7;
  const weekly = daily - sinceMonday * 86_400_000;
  const monthly = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  return { daily, weekly, monthly };
}

/** The start of `reset`'s current window in Unix ms; 0 for "none" (one window forever). */
export function windowStart(reset: LimitReset, nowMs: number): number {
  return reset === "none" ? 0 : windowStarts(nowMs)[reset];
}
