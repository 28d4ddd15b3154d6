import { createClient } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { IdentityService } from "../../gen/portico/identity/v1/identity_service_pb.js";
import type { GatewayContext } from "../context.js";
import { callOptionsFor } from "../rpc.js";
import { errorResponses } from "../schemas.js";

/**
 * GET /api/v1/key: the calling key (label and hash, never the key), with every field the published
 * SDK's key metadata requires, each holding what Portico really enforces or records:
 * - no credit limit is enforced on a key and no spend is metered: `limit`, `limit_remaining` and
 *   `limit_reset` are null and every usage counter is 0;
 * - `rate_limit` is the intern turn limit the core enforces per key;
 * - keys never expire (`expires_at` null); there is no free tier and no free-model allowance;
 * - requests are not pinned to a data region (`allowed_data_regions: ["global"]`);
 * - management keys are what the SDK calls provisioning keys.
 */
const usageFields = ["usage", "usage_daily", "usage_weekly", "usage_monthly", "byok_usage", "byok_usage_daily", "byok_usage_weekly", "byok_usage_monthly"] as const;

const keyDataSchema = {
  type: "object",
  required: [
    "label", "hash", "is_management_key", "is_provisioning_key", "organization_id", "workspace_id", "user_id", "creator_user_id",
    "limit", "limit_remaining", "limit_reset", "include_byok_in_limit", "is_free_tier", "rate_limit", "free_model_daily_requests",
    "allowed_data_regions", "expires_at", ...usageFields,
  ],
  properties: {
    label: { type: "string" },
    hash: { type: "string" },
    is_management_key: { type: "boolean" },
    is_provisioning_key: { type: "boolean", description: "Same as is_management_key." },
    organization_id: { type: "string" },
    workspace_id: { type: "string" },
    user_id: { type: "string" },
    creator_user_id: { type: "string", description: "The user who created the key." },
    interns_programme: { type: "boolean" },
    limit: { type: "null", description: "No credit limit is enforced on keys." },
    limit_remaining: { type: "null" },
    limit_reset: { type: "null" },
    include_byok_in_limit: { type: "boolean" },
    is_free_tier: { type: "boolean" },
    rate_limit: {
      type: "object",
      required: ["requests", "interval", "note"],
      properties: { requests: { type: "integer" }, interval: { type: "string" }, note: { type: "string" } },
    },
    free_model_daily_requests: {
      type: "object",
      required: ["limit", "remaining", "used"],
      properties: { limit: { type: "integer" }, remaining: { type: "integer" }, used: { type: "integer" } },
    },
    allowed_data_regions: { type: "array", items: { type: "string" } },
    expires_at: { type: "null", description: "Keys do not expire." },
    ...Object.fromEntries(usageFields.map((f) => [f, { type: "number", description: "No spend is metered: 0." }])),
  },
} as const;

export async function registerIdentityRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(IdentityService, ctx.transport);
  api.get(
    "/key",
    {
      schema: {
        operationId: "getCurrentKey",
        summary: "Describe the calling API key",
        tags: ["identity"],
        response: {
          200: { type: "object", required: ["data"], properties: { data: keyDataSchema } },
          ...errorResponses(401, 403),
        },
      },
    },
    async (req) => {
      const c = await client.getCaller({}, callOptionsFor(req));
      return {
        data: {
          label: c.keyLabel,
          hash: c.keyHash,
          is_management_key: c.isManagementKey,
          is_provisioning_key: c.isManagementKey,
          organization_id: c.organizationId,
          workspace_id: c.workspaceId,
          user_id: c.userId,
          creator_user_id: c.userId,
          interns_programme: c.internsProgramme,
          limit: null,
          limit_remaining: null,
          limit_reset: null,
          include_byok_in_limit: false,
          is_free_tier: false,
          rate_limit: {
            requests: c.rateLimitRequests,
            interval: `${c.rateLimitIntervalSeconds}s`,
            note: "intern turns per key",
          },
          free_model_daily_requests: { limit: 0, remaining: 0, used: 0 },
          allowed_data_regions: ["global"],
          expires_at: null,
          ...Object.fromEntries(usageFields.map((f) => [f, 0])),
        },
      };
    },
  );
}
