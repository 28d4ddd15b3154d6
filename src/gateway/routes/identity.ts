import { createClient } from "@connectrpc/connect";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { usdOfFemto } from "../../contract/money.js";
import type { FastifyInstance } from "fastify";
import { IdentityService } from "../../gen/portico/identity/v1/identity_service_pb.js";
import type { GatewayContext } from "../context.js";
import { callOptionsFor } from "../rpc.js";
import { contractRoute, errorResponses } from "../schemas.js";

/**
 * GET /api/v1/key: the calling key (label and hash, never the key), with every field the published
 * SDK's key metadata requires, each holding what Portico really enforces or records (docs/limits.md):
 * - `usage*`: what the key's generations cost the account in USD (total, today, this week from Monday, this
 *   month; UTC); `byok_usage*` the provider's price of the BYOK-served ones;
 * - `limit` (USD or null), `limit_remaining` (the limit less the window's settled spend and the reservations of
 *   requests in flight; null without a limit), `limit_reset` (daily, weekly, monthly, or null for none);
 * - `rate_limit` is the intern turn limit the core enforces per key; `rate_limit_rpm` / `rate_limit_tpm` the key's
 *   chat-completions bounds;
 * - `expires_at`: when the key stops working, or null; there is no free tier and no free-model allowance;
 * - requests are not pinned to a data region (`allowed_data_regions: ["global"]`);
 * - management keys are what the SDK calls provisioning keys.
 */
const usageFields = ["usage", "usage_daily", "usage_weekly", "usage_monthly", "byok_usage", "byok_usage_daily", "byok_usage_weekly", "byok_usage_monthly"] as const;

const keyDataSchema = {
  type: "object",
  required: [
    "label", "hash", "is_management_key", "is_provisioning_key", "organization_id", "workspace_id", "user_id", "creator_user_id",
    "limit", "limit_remaining", "limit_reset", "include_byok_in_limit", "is_free_tier", "rate_limit", "free_model_daily_requests",
    "allowed_data_regions", "expires_at", "rate_limit_rpm", "rate_limit_tpm", ...usageFields,
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
    limit: { type: ["number", "null"], description: "Spend limit in USD; null = none." },
    limit_remaining: { type: ["number", "null"], description: "USD left in the current window (settled spend and in-flight reservations deducted); null without a limit." },
    limit_reset: { type: ["string", "null"], description: "daily, weekly or monthly (UTC); null when the limit never resets." },
    rate_limit_rpm: { type: ["integer", "null"], description: "Chat requests per minute with this key; null = unbounded." },
    rate_limit_tpm: { type: ["integer", "null"], description: "Tokens per minute with this key; null = unbounded." },
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
    expires_at: { type: ["string", "null"], description: "ISO 8601 time after which the key answers 401; null = never." },
    ...Object.fromEntries(usageFields.map((f) => [f, { type: "number", description: "USD." }])),
  },
} as const;

export async function registerIdentityRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(IdentityService, ctx.transport);
  const contract = contractRoute("getCurrentKey");
  api.get(
    "/key",
    {
      // A bad query is 400 only for a caller the core accepts (401/403 first), as on /activity.
      config: { authorizeFirst: { management: false } },
      validatorCompiler: contract.validatorCompiler,
      schema: {
        operationId: "getCurrentKey",
        summary: "Describe the calling API key",
        tags: ["identity"],
        ...contract.schema,
        response: {
          200: { type: "object", required: ["data"], properties: { data: keyDataSchema } },
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (req) => {
      const c = await client.getCaller({}, callOptionsFor(req));
      const s = c.spend;
      /** The exact decimal text when the core sent it (a sum past an int64 of femto-USD), else the femto-USD field. */
      const usd = (text: string | undefined, f: bigint | undefined) => (text ? Number(text) : usdOfFemto(f ?? 0n));
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
          limit: s?.limitFemtoUsd !== undefined ? usdOfFemto(s.limitFemtoUsd) : null,
          limit_remaining: s?.limitRemainingFemtoUsd !== undefined ? usdOfFemto(s.limitRemainingFemtoUsd) : null,
          limit_reset: s?.limitFemtoUsd !== undefined && s.limitReset !== "none" ? s.limitReset : null,
          rate_limit_rpm: s?.rateLimitRpm ?? null,
          rate_limit_tpm: s?.rateLimitTpm ?? null,
          include_byok_in_limit: false,
          is_free_tier: false,
          rate_limit: {
            requests: c.rateLimitRequests,
            interval: `${c.rateLimitIntervalSeconds}s`,
            note: "intern turns per key",
          },
          free_model_daily_requests: { limit: 0, remaining: 0, used: 0 },
          allowed_data_regions: ["global"],
          expires_at: s?.expiresAt ? timestampDate(s.expiresAt).toISOString() : null,
          usage: usd(s?.usageUsd, s?.usageFemtoUsd),
          usage_daily: usd(s?.usageDailyUsd, s?.usageDailyFemtoUsd),
          usage_weekly: usd(s?.usageWeeklyUsd, s?.usageWeeklyFemtoUsd),
          usage_monthly: usd(s?.usageMonthlyUsd, s?.usageMonthlyFemtoUsd),
          byok_usage: usd(s?.byokUsageUsd, s?.byokUsageFemtoUsd),
          byok_usage_daily: usd(s?.byokUsageDailyUsd, s?.byokUsageDailyFemtoUsd),
          byok_usage_weekly: usd(s?.byokUsageWeeklyUsd, s?.byokUsageWeeklyFemtoUsd),
          byok_usage_monthly: usd(s?.byokUsageMonthlyUsd, s?.byokUsageMonthlyFemtoUsd),
        },
      };
    },
  );
}
