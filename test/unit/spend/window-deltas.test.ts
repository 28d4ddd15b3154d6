/**
 * The key spend counters' increments (src/core/spend/key-spend-windows.ts `windowDeltas`): records of several keys and
 * days, in runs and interleaved, add up to the sums of a plain per-record computation, one delta per key, kind and
 * window start, in the upserts' lock order.
 */
import { describe, expect, it } from "vitest";
import { WINDOW_KINDS, windowDeltas, type SpendRecord } from "../../../src/core/spend/key-spend-windows.js";
import { windowStart } from "../../../src/core/spend/windows.js";

const DAY = 86_400_000;

/** The sums per (organization, key, kind, start), computed record by record. */
function reference(records: SpendRecord[]): Map<string, { cost: bigint; byok: bigint }> {
  const out = new Map<string, { cost: bigint; byok: bigint }>();
  for (const r of records) {
    for (const reset of WINDOW_KINDS) {
      const id = `${r.organizationId}|${r.keyHash}|${reset}|${windowStart(reset, r.createdAt.getTime())}`;
      const e = out.get(id) ?? { cost: 0n, byok: 0n };
      e.cost += r.costFemtoUsd ?? 0n;
      e.byok += r.credentialSource === "byok" ? (r.upstreamCostFemtoUsd ?? 0n) : 0n;
      out.set(id, e);
    }
  }
  return out;
}

describe("windowDeltas", () => {
  it("sums records of keys and days in runs and interleaved as a per-record computation does", () => {
    const t0 = Date.UTC(2026, 10, 30, 23, 59, 59, 990); // a Monday's eve and a month's last day
    const keys = [
      ["org-a", "key-1"],
      ["org-a", "key-2"],
      ["org-b", "key-1"],
    ] as const;
    const records: SpendRecord[] = [];
    for (let i = 0; i < 120; i++) {
      const [organizationId, keyHash] = keys[i < 40 ? 0 : i % 3]!;
      records.push({
        organizationId,
        keyHash,
        createdAt: new Date(t0 + (i % 7) * 5 + (i % 11 === 0 ? -DAY : 0) + (i > 90 ? DAY * 3 : 0)),
        costFemtoUsd: i % 5 === 0 ? null : BigInt(i) * 1_000_000_007n,
        upstreamCostFemtoUsd: i % 4 === 0 ? null : BigInt(i) * 3_000_000_011n,
        credentialSource: i % 2 === 0 ? "byok" : "shared",
      });
    }
    const deltas = windowDeltas(records);
    const expected = reference(records);
    expect(deltas).toHaveLength(expected.size);
    for (const d of deltas) {
      expect({ cost: d.cost, byok: d.byok }).toEqual(expected.get(`${d.organizationId}|${d.keyHash}|${d.reset}|${d.startMs}`));
    }
    const order = deltas.map((d) => [d.organizationId, d.keyHash, d.reset, d.startMs] as const);
    const sorted = [...order].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : a[2] < b[2] ? -1 : a[2] > b[2] ? 1 : a[3] - b[3]));
    expect(order).toEqual(sorted);
  });
});
