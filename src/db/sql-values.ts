/**
 * Values and SQL fragments shared by the raw statements that bypass the Prisma client (activity totals, the key's
 * spend, the generation records, the migration runner).
 */

/** The second formatted last (Unix seconds) and its ISO text up to the milliseconds (`2026-11-22T03:03:06.`). */
let lastSecond = NaN;
let lastSecondText = "";

/**
 * `d`'s ISO text up to its milliseconds, the text of the second (`toISOString()`'s, ≈ 0.4 µs) kept from the last call:
 * the generation records format one time per row, most of them in the second of the row before (bench/README.md,
 * "Generation records: binding, dates and the record's shape"). An invalid date throws toISOString()'s RangeError.
 */
function isoUpToMilliseconds(d: Date): string {
  const ms = d.getTime();
  const second = Math.floor(ms / 1000);
  if (second !== lastSecond) {
    // "…T03:03:06.000Z" without "000Z"; NaN (an invalid date) never equals lastSecond and throws here.
    lastSecondText = new Date(second * 1000).toISOString().slice(0, -4);
    lastSecond = second;
  }
  const milli = ms - second * 1000;
  return `${lastSecondText}${milli < 10 ? "00" : milli < 100 ? "0" : ""}${milli}`;
}

/** `d.toISOString()` (e.g. `2026-11-22T03:03:06.149Z`), made as {@link isoUpToMilliseconds} says. */
export const isoDateTime = (d: Date): string => `${isoUpToMilliseconds(d)}Z`;

/** A time as Prisma (adapter-better-sqlite3) stores a SQLite DATETIME: ISO text with `+00:00`, e.g. `2026-11-22T03:03:06.149+00:00`. */
export const sqliteDateTime = (d: Date): string => `${isoUpToMilliseconds(d)}+00:00`;

/** Femto-dollars per micro-dollar: the split of an exact money sum on SQLite (below). */
export const FEMTOS_PER_MICRO = 1_000_000_000n;

/** SQL: the sum of a femto-dollar expression as decimal text in the column `<as>_hi` (exact where SUM is: PostgreSQL always, SQLite until it raises "integer overflow"). */
export const moneySum = (expr: string, as: string): string => `CAST(COALESCE(SUM(${expr}), 0) AS TEXT) AS "${as}_hi"`;

/**
 * SQL: the sum of a femto-dollar expression in two text columns that never overflow SQLite's 64-bit SUM: whole
 * micro-dollars in `<as>_hi`, the femto remainders in `<as>_lo` (exact up to $9.2 trillion). Read back with
 * {@link splitMoneyValue}.
 */
export const splitMoneySum = (expr: string, as: string): string =>
  `CAST(COALESCE(SUM((${expr}) / ${FEMTOS_PER_MICRO}), 0) AS TEXT) AS "${as}_hi", CAST(COALESCE(SUM((${expr}) % ${FEMTOS_PER_MICRO}), 0) AS TEXT) AS "${as}_lo"`;

/** The femto-dollars of a {@link splitMoneySum}'s two columns, or of a key spend counter's two parts (null or absent read as 0). */
export const splitMoneyValue = (hi: unknown, lo: unknown): bigint =>
  BigInt((hi ?? "0") as string) * FEMTOS_PER_MICRO + BigInt((lo ?? "0") as string);
