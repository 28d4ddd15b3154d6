/**
 * ByokService over Connect: proto ⇄ domain only. Responses are built from stored rows, which hold
 * no raw key, and the ByokCredential message has no field that could carry one.
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  ByokCredentialSchema,
  StringListSchema,
  type ByokCredential,
  type StringList,
} from "../../gen/portico/byok/v1/byok_credential_pb.js";
import { ByokService } from "../../gen/portico/byok/v1/byok_service_pb.js";
import { callerOf } from "../auth.js";
import { invalidArgument } from "../errors.js";
import { listOf, type ByokRow } from "./byok-repository.js";
import type { ByokService as ByokDomain, UpdateCredentialInput } from "./byok-service.js";
import { pageFields } from "../paging.js";

/** Update-mask paths, in snake_case (camelCase spellings are accepted too). */
const MASK_PATHS = new Set([
  "key",
  "name",
  "allowed_api_key_hashes",
  "allowed_models",
  "allowed_user_ids",
  "disabled",
  "is_required",
  "is_fallback",
  "is_byok_only",
  "declared_zdr",
  "weight",
]);

function snake(path: string): string {
  return path.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function list(value: StringList | undefined): string[] | null {
  return value ? [...value.values] : null;
}

function stringList(values: string[] | null) {
  return values === null ? undefined : create(StringListSchema, { values });
}

/** Stored row → public proto message (label only, never key material). */
export function credentialToProto(row: ByokRow): ByokCredential {
  return create(ByokCredentialSchema, {
    id: row.id,
    ...(row.name !== null ? { name: row.name } : {}),
    provider: row.provider,
    label: row.label,
    workspaceId: row.workspaceId,
    allowedApiKeyHashes: stringList(listOf(row.allowedApiKeyHashes)),
    allowedModels: stringList(listOf(row.allowedModels)),
    allowedUserIds: stringList(listOf(row.allowedUserIds)),
    ...(row.declaredZdr !== null ? { declaredZdr: row.declaredZdr } : {}),
    disabled: row.disabled,
    isRequired: row.isRequired,
    isFallback: row.isFallback,
    isByokOnly: row.isByokOnly,
    sortOrder: row.sortOrder,
    weight: row.weight,
    createdAt: timestampFromDate(row.createdAt),
  });
}

export function createByokHandler(deps: { service: ByokDomain }): ServiceImpl<typeof ByokService> {
  const { service } = deps;
  return {
    async createByokCredential(req, ctx) {
      const row = await service.create(callerOf(ctx), {
        key: req.key,
        provider: req.provider,
        name: req.name ?? null,
        workspaceId: req.workspaceId,
        allowedApiKeyHashes: list(req.allowedApiKeyHashes),
        allowedModels: list(req.allowedModels),
        allowedUserIds: list(req.allowedUserIds),
        disabled: req.disabled,
        isRequired: req.isRequired,
        isFallback: req.isFallback,
        isByokOnly: req.isByokOnly,
        declaredZdr: req.declaredZdr ?? null,
        ...(req.weight !== undefined ? { weight: req.weight } : {}),
      });
      return { credential: credentialToProto(row) };
    },

    async listByokCredentials(req, ctx) {
      const { items, total, ...more } = await service.list(callerOf(ctx), {
        offset: req.offset,
        limit: req.limit,
        startingAfter: req.startingAfter,
        provider: req.provider,
        workspaceId: req.workspaceId,
      });
      return { credentials: items.map(credentialToProto), totalCount: total, ...pageFields(more) };
    },

    async getByokCredential(req, ctx) {
      return { credential: credentialToProto(await service.get(callerOf(ctx), req.id)) };
    },

    async updateByokCredential(req, ctx) {
      const caller = callerOf(ctx);
      const paths = new Set<string>();
      for (const raw of req.updateMask?.paths ?? []) {
        const path = snake(raw);
        if (!MASK_PATHS.has(path)) throw invalidArgument("update_mask", "update_mask names a field that cannot be updated");
        paths.add(path);
      }
      if (paths.has("key") && req.key === undefined) throw invalidArgument("key", "key cannot be cleared; send a new key to rotate it");
      const input: UpdateCredentialInput = { id: req.id };
      if (req.key !== undefined) input.key = req.key;
      if (paths.has("name")) input.name = req.name ?? null;
      if (paths.has("allowed_api_key_hashes")) input.allowedApiKeyHashes = list(req.allowedApiKeyHashes);
      if (paths.has("allowed_models")) input.allowedModels = list(req.allowedModels);
      if (paths.has("allowed_user_ids")) input.allowedUserIds = list(req.allowedUserIds);
      if (paths.has("disabled")) input.disabled = req.disabled;
      if (paths.has("is_required")) input.isRequired = req.isRequired;
      if (paths.has("is_fallback")) input.isFallback = req.isFallback;
      if (paths.has("is_byok_only")) input.isByokOnly = req.isByokOnly;
      if (paths.has("declared_zdr")) input.declaredZdr = req.declaredZdr ?? null;
      if (paths.has("weight")) input.weight = req.weight;
      return { credential: credentialToProto(await service.update(caller, input)) };
    },

    async deleteByokCredential(req, ctx) {
      await service.delete(callerOf(ctx), req.id);
      return { deleted: true };
    },
  };
}
