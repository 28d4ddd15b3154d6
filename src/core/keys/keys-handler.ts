/**
 * KeysService over Connect: proto ⇄ domain only. Management keys only; the plaintext of a new key
 * appears in CreateKeyResponse and nowhere else.
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { ApiKey as ApiKeyRow } from "../../db/prisma.js";
import type { ApiKey } from "../../gen/portico/keys/v1/api_key_pb.js";
import { KeysService } from "../../gen/portico/keys/v1/keys_service_pb.js";
import { managerOf } from "../management/manager.js";
import { maskPaths } from "../management/rules.js";
import { pageFields } from "../paging.js";
import type { KeysService as KeysDomain } from "./keys-service.js";
import type { Init } from "../proto-init.js";

export function keyToProto(k: ApiKeyRow): Init<ApiKey> {
  return {
    hash: k.hash,
    name: k.name,
    label: k.label,
    disabled: k.disabled,
    isManagementKey: k.isManagement,
    workspaceId: k.workspaceId,
    creatorUserId: k.creatorUserId,
    createdAt: timestampFromDate(k.createdAt),
    updatedAt: timestampFromDate(k.updatedAt),
  };
}

export function createKeysHandler(deps: { service: KeysDomain }): ServiceImpl<typeof KeysService> {
  const { service } = deps;
  return {
    async listKeys(req, ctx) {
      const { actor } = managerOf(ctx);
      const { items, total, ...page } = await service.list(actor, {
        offset: req.offset,
        limit: req.limit,
        startingAfter: req.startingAfter,
        includeDisabled: req.includeDisabled,
        workspaceId: req.workspaceId,
      });
      return { keys: items.map(keyToProto), totalCount: total, ...pageFields(page) };
    },
    async createKey(req, ctx) {
      const { caller, actor } = managerOf(ctx);
      const { record, plaintext } = await service.create(actor, {
        name: req.name,
        workspaceId: req.workspaceId,
        isManagement: req.isManagementKey,
        creatorUserId: caller.userId,
      });
      return { key: keyToProto(record), secret: plaintext };
    },
    async getKey(req, ctx) {
      const { actor } = managerOf(ctx);
      return { key: keyToProto(await service.get(actor, req.hash)) };
    },
    async updateKey(req, ctx) {
      const { actor } = managerOf(ctx);
      const paths = maskPaths(req.updateMask?.paths, ["name", "disabled"]);
      const changes: { name?: string; disabled?: boolean } = {};
      if (paths.has("name")) changes.name = req.name;
      if (paths.has("disabled")) changes.disabled = req.disabled;
      return { key: keyToProto(await service.update(actor, req.hash, changes)) };
    },
    async deleteKey(req, ctx) {
      const { actor } = managerOf(ctx);
      await service.revoke(actor, req.hash);
      return { deleted: true };
    },
  };
}
