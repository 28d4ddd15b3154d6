/**
 * What GET /api/v1/key (IdentityService.GetCaller) reports of a key's spend (docs/limits.md): usage summed from
 * its generations (what the account pays: `costFemtoUsd`; BYOK-served ones at the provider's price apart), over
 * all time, today, this week (from Monday) and this month, UTC; and its limit with what is left of it in the
 * current window, from the key's spend counter (settled spend and live reservations).
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Db } from "../../db/client.js";
import type { KeySpend } from "../../gen/portico/identity/v1/identity_service_pb.js";
import type { Init } from "../proto-init.js";
import { keyCounterId, type SpendStore } from "./spend-store.js";
import { windowStarts } from "./windows.js";

export function createKeySpendReader(deps: { db: Db; store: SpendStore; now?: () => number }) {
  const { db, store } = deps;
  const now = deps.now ?? Date.now;
  /** `organizationId`: the key's organization, so that the sums read the request log's (organization, key, time) index. */
  return async function keySpend(keyId: string, keyHash: string, organizationId: string): Promise<Init<KeySpend>> {
    const w = windowStarts(now());
    const since = [null, w.daily, w.weekly, w.monthly] as const;
    const sums = await db.$transaction([
      ...since.map((s) =>
        db.generation.aggregate({ _sum: { costFemtoUsd: true }, where: { organizationId, keyHash, ...(s === null ? {} : { createdAt: { gte: new Date(s) } }) } }),
      ),
      ...since.map((s) =>
        db.generation.aggregate({
          _sum: { upstreamCostFemtoUsd: true },
          where: { organizationId, keyHash, credentialSource: "byok", ...(s === null ? {} : { createdAt: { gte: new Date(s) } }) },
        }),
      ),
    ]);
    const cost = (i: number) => (sums[i] as { _sum: { costFemtoUsd: bigint | null } })._sum.costFemtoUsd ?? 0n;
    const byok = (i: number) => (sums[i + 4] as { _sum: { upstreamCostFemtoUsd: bigint | null } })._sum.upstreamCostFemtoUsd ?? 0n;
    const key = await db.apiKey.findUnique({
      where: { id: keyId },
      select: { limitFemtoUsd: true, limitReset: true, expiresAt: true, rateLimitRpm: true, rateLimitTpm: true },
    });
    const out: Init<KeySpend> = {
      usageFemtoUsd: cost(0),
      usageDailyFemtoUsd: cost(1),
      usageWeeklyFemtoUsd: cost(2),
      usageMonthlyFemtoUsd: cost(3),
      byokUsageFemtoUsd: byok(0),
      byokUsageDailyFemtoUsd: byok(1),
      byokUsageWeeklyFemtoUsd: byok(2),
      byokUsageMonthlyFemtoUsd: byok(3),
      limitReset: key?.limitReset ?? "none",
    };
    if (key?.expiresAt) out.expiresAt = timestampFromDate(key.expiresAt);
    if (key?.rateLimitRpm != null) out.rateLimitRpm = key.rateLimitRpm;
    if (key?.rateLimitTpm != null) out.rateLimitTpm = key.rateLimitTpm;
    if (key?.limitFemtoUsd != null) {
      out.limitFemtoUsd = key.limitFemtoUsd;
      const state = await store.state(keyCounterId(keyId));
      const left = key.limitFemtoUsd - (state?.spent ?? 0n) - (state?.reserved ?? 0n);
      out.limitRemainingFemtoUsd = left > 0n ? left : 0n;
    }
    return out;
  };
}

export type KeySpendReader = ReturnType<typeof createKeySpendReader>;
