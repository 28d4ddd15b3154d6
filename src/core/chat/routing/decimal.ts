/**
 * Exact non-negative decimals for price comparisons (docs/routing.md, `max_price`): a value is `digits × 10^exp`
 * with integer digits, so "0.000003" per token and "3" per million tokens compare without floating point.
 */
export interface Decimal {
  digits: bigint;
  exp: number;
}

const DECIMAL = /^(\d*)(?:\.(\d*))?(?:[eE]([-+]?\d+))?$/;

/** "0.5", "3", ".25", "1e-7", "2.5E3" → a Decimal; anything else (negative, empty, text) → undefined. */
export function parseDecimal(s: string): Decimal | undefined {
  const m = DECIMAL.exec(s.trim());
  if (!m || (!m[1] && !m[2])) return undefined;
  const frac = m[2] ?? "";
  const exp = Number(m[3] ?? "0");
  if (!Number.isSafeInteger(exp) || Math.abs(exp) > 400) return undefined;
  return { digits: BigInt((m[1] ?? "") + frac || "0"), exp: exp - frac.length };
}

/** a × 10^shift, exactly. */
export function shift(a: Decimal, by: number): Decimal {
  return { digits: a.digits, exp: a.exp + by };
}

/** -1, 0 or 1 as a < b, a = b, a > b. */
export function compareDecimal(a: Decimal, b: Decimal): number {
  const e = Math.min(a.exp, b.exp);
  const x = a.digits * 10n ** BigInt(a.exp - e);
  const y = b.digits * 10n ** BigInt(b.exp - e);
  return x < y ? -1 : x > y ? 1 : 0;
}
