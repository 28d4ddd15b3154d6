/**
 * Account-wide routing settings under /api/v1/routing-settings (docs/routing.md#account-wide-settings): GET
 * and PUT, of the organization or, with `workspace_id`, of one of its workspaces. Management keys only.
 */
import { createClient } from "@connectrpc/connect";
import type { JsonObject } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { FastifyInstance } from "fastify";
import { UpdateRoutingSettingsRequest } from "../../contract/requests/management.js";
import { RoutingSettingsService, type RoutingSettings } from "../../gen/portico/routing/v1/routing_settings_pb.js";
import type { GatewayContext } from "../context.js";
import { callOptionsFor } from "../rpc.js";
import { contractRoute, errorResponses } from "../schemas.js";
import { dataOf, MANAGEMENT } from "./management-schemas.js";

const nullableList = { type: ["array", "null"], items: { type: "string" } } as const;

export const routingSettingsSchema = {
  type: "object",
  required: ["workspace_id", "allowed_providers", "ignored_providers", "allowed_quantizations", "data_collection", "zdr", "updated_at"],
  properties: {
    workspace_id: { type: ["string", "null"], description: "null: the organization's own settings." },
    allowed_providers: { ...nullableList, description: "Providers that alone may serve; null = any." },
    ignored_providers: { ...nullableList, description: "Providers that never serve; null = none." },
    allowed_quantizations: { ...nullableList, description: "Quantizations that alone may serve; null = any." },
    data_collection: { type: "string", enum: ["allow", "deny"] },
    zdr: { type: "boolean" },
    updated_at: { type: ["string", "null"], format: "date-time", description: "null when never set." },
  },
} as const;

export function presentRoutingSettings(s: RoutingSettings) {
  return {
    workspace_id: s.workspaceId ?? null,
    allowed_providers: s.allowedProviders ? [...s.allowedProviders.values] : null,
    ignored_providers: s.ignoredProviders ? [...s.ignoredProviders.values] : null,
    allowed_quantizations: s.allowedQuantizations ? [...s.allowedQuantizations.values] : null,
    data_collection: s.dataCollection,
    zdr: s.zdr,
    updated_at: s.updatedAt ? timestampDate(s.updatedAt).toISOString() : null,
  };
}

export async function registerRoutingSettingsRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(RoutingSettingsService, ctx.transport);
  const tags = ["routing"];
  const scope = (q: unknown) => {
    const w = (q as { workspace_id?: string }).workspace_id;
    return w !== undefined ? { workspaceId: w } : {};
  };

  const getContract = contractRoute("getRoutingSettings");
  api.get(
    "/routing-settings",
    {
      config: MANAGEMENT,
      validatorCompiler: getContract.validatorCompiler,
      schema: {
        operationId: "getRoutingSettings",
        summary: "Get the account-wide routing settings of the organization or a workspace",
        tags,
        ...getContract.schema,
        response: { 200: dataOf(routingSettingsSchema), ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req) => {
      const res = await client.getRoutingSettings(scope(req.query), callOptionsFor(req));
      return { data: presentRoutingSettings(res.settings!) };
    },
  );

  const putContract = contractRoute("updateRoutingSettings", UpdateRoutingSettingsRequest);
  api.put(
    "/routing-settings",
    {
      config: MANAGEMENT,
      validatorCompiler: putContract.validatorCompiler,
      schema: {
        operationId: "updateRoutingSettings",
        summary: "Change the account-wide routing settings of the organization or a workspace",
        description:
          "Omitted fields stay unchanged; null clears a list. Applied to every chat request of the account's keys before the request's own provider preferences (docs/routing.md). Audited.",
        tags,
        ...putContract.schema,
        response: { 200: dataOf(routingSettingsSchema), ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req) => {
      const res = await client.updateRoutingSettings({ ...scope(req.query), patch: (req.body ?? {}) as JsonObject }, callOptionsFor(req));
      return { data: presentRoutingSettings(res.settings!) };
    },
  );
}
