/**
 * USD amounts on the HTTP wire (numbers, as the real-world service writes `limit`) ⇄ femto-USD (1e-15 USD, the
 * integers the core stores and gRPC carries). Exact: a number converts as its shortest decimal reads.
 */

/** `usd` (a number ≥ 0 with at most 15 decimals) in femto-USD; undefined when it is not one. */
export function femtoOfUsd(usd: unknown): bigint | undefined {
  if (typeof usd !== "number" || !Number.isFinite(usd) || usd < 0) return undefined;
  const text = String(usd).includes("e") ? usd.toFixed(15) : String(usd);
  const m = /^(\d+)(?:\.(\d+))?$/.exec(text);
  if (!m) return undefined;
  const decimals = (m[2] ?? "").replace(/0+$/, "");
  if (decimals.length > 15) return undefined;
  return BigInt(m[1]!) * 10n ** 15n + BigInt(decimals.padEnd(15, "0") || "0");
}

/** femto-USD as the USD number the wire carries. */
export const usdOfFemto = (femtos: bigint): number => Number(femtos) / 1e15;

const FEMTO_PER_USD = 10n ** 15n;
/** Integer femto-dollars → the exact USD decimal string (`"0.3"`, `"10000"`, `"0"`). */
export function usdString(femtos: bigint): string {
  const sign = femtos < 0n ? "-" : "";
  const abs = femtos < 0n ? -femtos : femtos;
  const frac = (abs % FEMTO_PER_USD).toString().padStart(15, "0").replace(/0+$/, "");
  return `${sign}${abs / FEMTO_PER_USD}${frac ? `.${frac}` : ""}`;
}
