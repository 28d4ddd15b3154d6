/**
 * KeysService over Connect: proto ⇄ domain only. Management keys only; the plaintext of a new key
 * appears in CreateKeyResponse and nowhere else.
 */
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
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
    limitReset: k.limitReset,
    ...(k.limitFemtoUsd !== null ? { limitFemtoUsd: k.limitFemtoUsd } : {}),
    ...(k.expiresAt !== null ? { expiresAt: timestampFromDate(k.expiresAt) } : {}),
    ...(k.rateLimitRpm !== null ? { rateLimitRpm: k.rateLimitRpm } : {}),
    ...(k.rateLimitTpm !== null ? { rateLimitTpm: k.rateLimitTpm } : {}),
  };
}

const KEY_PATHS = ["name", "disabled", "limit_femto_usd", "limit_reset", "expires_at", "rate_limit_rpm", "rate_limit_tpm"];

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
        limits: {
          ...(req.limitFemtoUsd !== undefined ? { limitFemtoUsd: req.limitFemtoUsd } : {}),
          ...(req.limitReset !== "" ? { limitReset: req.limitReset } : {}),
          ...(req.expiresAt !== undefined ? { expiresAt: timestampDate(req.expiresAt) } : {}),
          ...(req.rateLimitRpm !== undefined ? { rateLimitRpm: req.rateLimitRpm } : {}),
          ...(req.rateLimitTpm !== undefined ? { rateLimitTpm: req.rateLimitTpm } : {}),
        },
      });
      return { key: keyToProto(record), secret: plaintext };
    },
    async getKey(req, ctx) {
      const { actor } = managerOf(ctx);
      return { key: keyToProto(await service.get(actor, req.hash)) };
    },
    async updateKey(req, ctx) {
      const { actor } = managerOf(ctx);
      const paths = maskPaths(req.updateMask?.paths, KEY_PATHS);
      const changes: Parameters<KeysDomain["update"]>[2] = {};
      if (paths.has("name")) changes.name = req.name;
      if (paths.has("disabled")) changes.disabled = req.disabled;
      if (paths.has("limit_femto_usd")) changes.limitFemtoUsd = req.limitFemtoUsd ?? null;
      if (paths.has("limit_reset")) changes.limitReset = req.limitReset;
      if (paths.has("expires_at")) changes.expiresAt = req.expiresAt ? timestampDate(req.expiresAt) : null;
      if (paths.has("rate_limit_rpm")) changes.rateLimitRpm = req.rateLimitRpm ?? null;
      if (paths.has("rate_limit_tpm")) changes.rateLimitTpm = req.rateLimitTpm ?? null;
      return { key: keyToProto(await service.update(actor, req.hash, changes)) };
    },
    async deleteKey(req, ctx) {
      const { actor } = managerOf(ctx);
      await service.revoke(actor, req.hash);
      return { deleted: true };
    },
  };
}
