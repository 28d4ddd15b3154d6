import type { ServiceImpl } from "@connectrpc/connect";
import { IdentityService } from "../../gen/portico/identity/v1/identity_service_pb.js";
import { callerOf, requireManagement } from "../auth.js";
import type { KeySpendReader } from "../spend/key-spend.js";

/** The limits the core enforces per key, reported by GetCaller. */
export interface KeyLimits {
  rateLimitRequests: number;
  rateLimitIntervalSeconds: number;
}

export function createIdentityHandler(limits: KeyLimits & { keySpend: KeySpendReader }): ServiceImpl<typeof IdentityService> {
  return {
    async getCaller(_req, ctx) {
      const c = callerOf(ctx);
      return {
        organizationId: c.organizationId,
        workspaceId: c.workspaceId,
        userId: c.userId,
        keyLabel: c.keyLabel,
        isManagementKey: c.isManagement,
        internsProgramme: c.internsProgramme,
        keyHash: c.keyHash,
        rateLimitRequests: limits.rateLimitRequests,
        rateLimitIntervalSeconds: limits.rateLimitIntervalSeconds,
        spend: await limits.keySpend(c.keyId, c.keyHash, c.organizationId),
      };
    },
    authorize(req, ctx) {
      const caller = callerOf(ctx);
      if (req.requireManagement) requireManagement(caller);
      return {};
    },
  };
}
