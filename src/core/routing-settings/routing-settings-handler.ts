/**
 * RoutingSettingsService over Connect: proto ⇄ domain only. Management keys only; the patch is checked with
 * the HTTP body's definition (src/contract/requests/management.ts), then by the domain (provider names,
 * quantizations), so gRPC and HTTP callers meet one rule and one message.
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { UpdateRoutingSettingsRequest } from "../../contract/requests/management.js";
import { validate } from "../../contract/requests/kit.js";
import type { RoutingSettings } from "../../gen/portico/routing/v1/routing_settings_pb.js";
import { RoutingSettingsService, StringListSchema } from "../../gen/portico/routing/v1/routing_settings_pb.js";
import { checkRules } from "../errors.js";
import { managerOf } from "../management/manager.js";
import type { Init } from "../proto-init.js";
import type { RoutingSettingsPatch, RoutingSettingsService as Domain, StoredRoutingSettings } from "./routing-settings.js";

const listOf = (v: string[]) => create(StringListSchema, { values: v });

export function routingSettingsToProto(s: StoredRoutingSettings): Init<RoutingSettings> {
  return {
    ...(s.workspaceId !== "" ? { workspaceId: s.workspaceId } : {}),
    ...(s.allowedProviders ? { allowedProviders: listOf(s.allowedProviders) } : {}),
    ...(s.ignoredProviders ? { ignoredProviders: listOf(s.ignoredProviders) } : {}),
    ...(s.allowedQuantizations ? { allowedQuantizations: listOf(s.allowedQuantizations) } : {}),
    dataCollection: s.dataCollection,
    zdr: s.zdr,
    ...(s.updatedAt ? { updatedAt: timestampFromDate(s.updatedAt) } : {}),
  };
}

export function createRoutingSettingsHandler(deps: { service: Domain }): ServiceImpl<typeof RoutingSettingsService> {
  return {
    async getRoutingSettings(req, ctx) {
      const { caller } = managerOf(ctx);
      return { settings: routingSettingsToProto(await deps.service.get(caller.organizationId, req.workspaceId ?? "")) };
    },
    async updateRoutingSettings(req, ctx) {
      const { caller, actor } = managerOf(ctx);
      const body = checkRules(() => validate(UpdateRoutingSettingsRequest, req.patch ?? {}));
      const patch: RoutingSettingsPatch = {
        ...("allowed_providers" in body ? { allowedProviders: body.allowed_providers } : {}),
        ...("ignored_providers" in body ? { ignoredProviders: body.ignored_providers } : {}),
        ...("allowed_quantizations" in body ? { allowedQuantizations: body.allowed_quantizations } : {}),
        ...("data_collection" in body ? { dataCollection: body.data_collection } : {}),
        ...("zdr" in body ? { zdr: body.zdr } : {}),
      };
      return { settings: routingSettingsToProto(await deps.service.update(actor, caller.organizationId, req.workspaceId ?? "", patch)) };
    },
  };
}
