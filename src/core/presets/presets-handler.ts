/**
 * PresetsService: proto ⇄ domain only. Authentication comes from the interceptor (callerOf),
 * validation from the contract's request definitions and pure preset rules, storage from the repository.
 */
import { MessagesRequest } from "../../contract/requests/messages-request.js";
import { decodeRequest as decodeMessages } from "../chat/dialects/anthropic-messages.js";
import { ResponsesRequest } from "../../contract/requests/responses-request.js";
import { decodeRequest as decodeResponses } from "../chat/dialects/openai-responses.js";
import { toJson, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Preset as PresetRow, PresetVersion as PresetVersionRow } from "../../db/prisma.js";
import type { Preset, PresetVersion } from "../../gen/portico/presets/v1/preset_pb.js";
import {
  ChatRequestSchema,
  PresetsService,
  type CreatePresetVersionRequest,
} from "../../gen/portico/presets/v1/presets_service_pb.js";
import { callerOf, requireManagement, type Caller } from "../auth.js";
import { WORKSPACE_NOT_FOUND } from "../workspaces/workspaces-service.js";
import { checkRules, conflict, invalidArgument, notFound } from "../errors.js";
import { createChatRequestValidator, type ChatRequestValidator } from "../../contract/requests/chat-request.js";
import { RuleViolation } from "../../contract/requests/kit.js";
import { checkPage, pageFields } from "../paging.js";
import { PRESETS_ORDER, PRESET_VERSIONS_ORDER, checkSlug, checkStorable, deriveSystemPrompt, parseVersionNumber, pickPresetConfig } from "./preset-rules.js";
import { PresetConflictError, type PresetsRepository } from "./presets-repository.js";
import { actorOf, type AuditRecorder } from "../audit/audit-log.js";
import { maskPaths } from "../management/rules.js";
import type { PresetChanges, PresetManagement } from "./preset-management.js";
import type { Init } from "../proto-init.js";

export interface PresetsHandlerDeps {
  repository: PresetsRepository;
  /** Whether `workspaceId` is a live (not deleted) workspace of the organization. */
  workspaceExists: (organizationId: string, workspaceId: string) => Promise<boolean>;
  /** Rename, describe, designate, change status (audited). */
  management: PresetManagement;
  /** Records each created version in the audit log (after its commit: creation is the hot path). */
  audit?: AuditRecorder;
  /** Brand word prefixing server tool types (`<brand>:web_search`). */
  brand: string;
}

export function createPresetsHandler(deps: PresetsHandlerDeps): ServiceImpl<typeof PresetsService> {
  const { repository } = deps;
  const validate: ChatRequestValidator = createChatRequestValidator({ brand: deps.brand });

  /**
   * The workspace a request acts in: the key's own, or (`workspace_id`) another live workspace of its
   * organization, which only a management key may name.
   */
  const workspaceOf = async (caller: Caller, requested: string | undefined): Promise<string> => {
    if (requested === undefined || requested === "" || requested === caller.workspaceId) return caller.workspaceId;
    requireManagement(caller);
    const ok = !requested.includes("\u0000") && [...requested].length <= 100 && (await deps.workspaceExists(caller.organizationId, requested));
    if (!ok) throw invalidArgument("workspace_id", WORKSPACE_NOT_FOUND);
    return requested;
  };

  const presetOf = async (workspaceId: string, rawSlug: string): Promise<PresetRow> => {
    const slug = checkRules(() => checkSlug(rawSlug));
    const preset = await repository.findPreset(workspaceId, slug);
    if (!preset) throw notFound();
    return preset;
  };

  return {
    async createPresetVersion(req, ctx) {
      const caller = callerOf(ctx);
      requireManagement(caller);
      const slug = checkRules(() => checkSlug(req.slug));
      const workspaceId = await workspaceOf(caller, req.workspaceId);
      const { config, systemPrompt } = checkRules(() => {
        const json = chatRequestJson(req);
        validate(json);
        const stored = { config: pickPresetConfig(json), systemPrompt: deriveSystemPrompt(json.messages) };
        checkStorable(stored.config, stored.systemPrompt);
        return stored;
      });
      try {
        const { preset, version } = await repository.createVersion({
          workspaceId,
          slug,
          creatorUserId: caller.userId,
          config,
          systemPrompt,
          // The audit event is written in the version's own transaction.
          ...(deps.audit ? { actor: actorOf(caller) } : {}),
        });
        return { preset: presetToProto(preset), designatedVersion: versionToProto(version) };
      } catch (err) {
        if (err instanceof PresetConflictError) throw conflict();
        throw err;
      }
    },

    async getPreset(req, ctx) {
      const caller = callerOf(ctx);
      const preset = await presetOf(await workspaceOf(caller, req.workspaceId), req.slug);
      const version = preset.designatedVersionId ? await repository.findVersionById(preset.designatedVersionId) : null;
      return { preset: presetToProto(preset), designatedVersion: version ? versionToProto(version) : undefined };
    },

    async listPresets(req, ctx) {
      const caller = callerOf(ctx);
      const page = checkPage(req, PRESETS_ORDER);
      const { items, total, ...more } = await repository.listPresets(await workspaceOf(caller, req.workspaceId), page);
      return { presets: items.map(presetToProto), totalCount: total, ...pageFields(more) };
    },

    async listPresetVersions(req, ctx) {
      const caller = callerOf(ctx);
      const page = checkPage(req, PRESET_VERSIONS_ORDER);
      const preset = await presetOf(await workspaceOf(caller, req.workspaceId), req.slug);
      const { items, total, ...more } = await repository.listVersions(preset.id, page);
      return { versions: items.map(versionToProto), totalCount: total, ...pageFields(more) };
    },

    async getPresetVersion(req, ctx) {
      const caller = callerOf(ctx);
      const number = checkRules(() => parseVersionNumber(req.version));
      const preset = await presetOf(await workspaceOf(caller, req.workspaceId), req.slug);
      const version = number === null ? null : await repository.findVersion(preset.id, number);
      if (!version) throw notFound();
      return { version: versionToProto(version) };
    },

    async updatePreset(req, ctx) {
      const caller = callerOf(ctx);
      requireManagement(caller);
      const paths = maskPaths(req.updateMask?.paths, ["name", "description", "designated_version", "status"]);
      const preset = await presetOf(await workspaceOf(caller, req.workspaceId), req.slug);
      const changes: PresetChanges = {};
      if (paths.has("name")) changes.name = req.name;
      if (paths.has("description")) changes.description = req.description ?? null;
      if (paths.has("designated_version")) changes.designatedVersion = req.designatedVersion;
      if (paths.has("status")) changes.status = req.status;
      const res = await deps.management.update(actorOf(caller), preset, changes);
      return { preset: presetToProto(res.preset), designatedVersion: res.version ? versionToProto(res.version) : undefined };
    },
  };
}

/**
 * The chat request as JSON with wire names. The JSON form is used as sent; the typed form is
 * rendered with proto field names (unset fields omitted), so both meet the same rules.
 */
export function chatRequestJson(req: CreatePresetVersionRequest): JsonObject {
  switch (req.request.case) {
    case "chatRequestJson":
      return req.request.value;
    case "chatRequest": {
      const json = toJson(ChatRequestSchema, req.request.value, { useProtoFieldName: true }) as JsonObject;
      // int64 renders as a JSON string in the proto3 mapping; the body form of seed is a number.
      if (typeof json.seed === "string") json.seed = Number(json.seed);
      return json;
    }
    case "messagesRequestJson":
      return decodeMessages(MessagesRequest.parse(req.request.value)) as unknown as JsonObject;
    case "responsesRequestJson":
      return decodeResponses(ResponsesRequest.parse(req.request.value)) as unknown as JsonObject;
    default:
      throw new RuleViolation("messages", "messages is required (send chat_request, chat_request_json, messages_request_json or responses_request_json)");
  }
}

export function presetToProto(p: PresetRow): Init<Preset> {
  return {
    id: p.id,
    slug: p.slug,
    name: p.name,
    description: p.description ?? undefined,
    status: p.status,
    statusUpdatedAt: p.statusUpdatedAt ? timestampFromDate(p.statusUpdatedAt) : undefined,
    createdAt: timestampFromDate(p.createdAt),
    updatedAt: timestampFromDate(p.updatedAt),
    creatorUserId: p.creatorUserId ?? undefined,
    workspaceId: p.workspaceId,
    designatedVersionId: p.designatedVersionId ?? undefined,
    latestVersion: p.latestVersion,
  };
}

export function versionToProto(v: PresetVersionRow): Init<PresetVersion> {
  const config = v.config;
  return {
    id: v.id,
    presetId: v.presetId,
    version: v.version,
    config: config !== null && typeof config === "object" && !Array.isArray(config) ? (config as JsonObject) : {},
    systemPrompt: v.systemPrompt ?? undefined,
    creatorId: v.creatorId,
    createdAt: timestampFromDate(v.createdAt),
    updatedAt: timestampFromDate(v.updatedAt),
  };
}
