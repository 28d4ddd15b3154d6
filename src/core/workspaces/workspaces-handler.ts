/**
 * WorkspacesService over Connect: proto ⇄ domain only. Management keys only.
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Workspace as WorkspaceRow } from "../../db/prisma.js";
import type { Workspace, WorkspaceMember } from "../../gen/portico/workspaces/v1/workspace_pb.js";
import { WorkspacesService } from "../../gen/portico/workspaces/v1/workspaces_service_pb.js";
import { managerOf as manager } from "../management/manager.js";
import { maskPaths } from "../management/rules.js";
import type { MemberView, WorkspacesService as WorkspacesDomain } from "./workspaces-service.js";
import type { Init } from "../proto-init.js";
import { pageFields } from "../paging.js";

export function workspaceToProto(w: WorkspaceRow): Init<Workspace> {
  return {
    id: w.id,
    name: w.name,
    slug: w.slug,
    ...(w.description !== null ? { description: w.description } : {}),
    isDefault: w.isDefault,
    ...(w.createdBy !== null ? { createdBy: w.createdBy } : {}),
    createdAt: timestampFromDate(w.createdAt),
    updatedAt: timestampFromDate(w.updatedAt),
    budgetReset: w.budgetReset,
    ...(w.budgetFemtoUsd !== null ? { budgetFemtoUsd: w.budgetFemtoUsd } : {}),
    ...(w.rateLimitRpm !== null ? { rateLimitRpm: w.rateLimitRpm } : {}),
    ...(w.rateLimitTpm !== null ? { rateLimitTpm: w.rateLimitTpm } : {}),
    ...(w.responseCacheTtlSeconds !== null ? { responseCacheTtlSeconds: w.responseCacheTtlSeconds } : {}),
    ...(w.contentLogRetentionDays !== null ? { contentLogRetentionDays: w.contentLogRetentionDays } : {}),
  };
}

export function memberToProto(m: MemberView): Init<WorkspaceMember> {
  return { userId: m.user.id, email: m.user.email, name: m.user.name, role: m.member.role, createdAt: timestampFromDate(m.member.createdAt) };
}

/** The audit actor of the calling management key. */
const managerOf = (ctx: HandlerContext) => manager(ctx).actor;

export function createWorkspacesHandler(deps: { service: WorkspacesDomain }): ServiceImpl<typeof WorkspacesService> {
  const { service } = deps;
  return {
    async listWorkspaces(req, ctx) {
      const { items, total, ...page } = await service.list(managerOf(ctx), req);
      return { workspaces: items.map(workspaceToProto), totalCount: total, ...pageFields(page) };
    },
    async createWorkspace(req, ctx) {
      const ws = await service.create(managerOf(ctx), {
        name: req.name,
        slug: req.slug,
        description: req.description,
        limits: {
          ...(req.budgetFemtoUsd !== undefined ? { budgetFemtoUsd: req.budgetFemtoUsd } : {}),
          ...(req.budgetReset !== "" ? { budgetReset: req.budgetReset } : {}),
          ...(req.rateLimitRpm !== undefined ? { rateLimitRpm: req.rateLimitRpm } : {}),
          ...(req.rateLimitTpm !== undefined ? { rateLimitTpm: req.rateLimitTpm } : {}),
          ...(req.responseCacheTtlSeconds !== undefined ? { responseCacheTtlSeconds: req.responseCacheTtlSeconds } : {}),
          ...(req.contentLogRetentionDays !== undefined ? { contentLogRetentionDays: req.contentLogRetentionDays } : {}),
        },
      });
      return { workspace: workspaceToProto(ws) };
    },
    async getWorkspace(req, ctx) {
      return { workspace: workspaceToProto(await service.get(managerOf(ctx), req.id)) };
    },
    async updateWorkspace(req, ctx) {
      const actor = managerOf(ctx);
      const paths = maskPaths(req.updateMask?.paths, ["name", "slug", "description", "budget_femto_usd", "budget_reset", "rate_limit_rpm", "rate_limit_tpm", "response_cache_ttl_seconds", "content_log_retention_days"]);
      const changes: Parameters<WorkspacesDomain["update"]>[2] = {};
      if (paths.has("budget_femto_usd")) changes.budgetFemtoUsd = req.budgetFemtoUsd ?? null;
      if (paths.has("budget_reset")) changes.budgetReset = req.budgetReset;
      if (paths.has("rate_limit_rpm")) changes.rateLimitRpm = req.rateLimitRpm ?? null;
      if (paths.has("rate_limit_tpm")) changes.rateLimitTpm = req.rateLimitTpm ?? null;
      if (paths.has("response_cache_ttl_seconds")) changes.responseCacheTtlSeconds = req.responseCacheTtlSeconds ?? null;
      if (paths.has("content_log_retention_days")) changes.contentLogRetentionDays = req.contentLogRetentionDays ?? null;
      if (paths.has("name")) changes.name = req.name;
      if (paths.has("slug")) changes.slug = req.slug;
      if (paths.has("description")) changes.description = req.description ?? null;
      return { workspace: workspaceToProto(await service.update(actor, req.id, changes)) };
    },
    async deleteWorkspace(req, ctx) {
      await service.delete(managerOf(ctx), req.id);
      return { deleted: true };
    },
    async listWorkspaceMembers(req, ctx) {
      const { items, total, ...page } = await service.listMembers(managerOf(ctx), req.workspaceId, req);
      return { members: items.map(memberToProto), totalCount: total, ...pageFields(page) };
    },
    async addWorkspaceMembers(req, ctx) {
      const members = await service.addMembers(managerOf(ctx), req.workspaceId, { userIds: req.userIds, emails: req.emails });
      return { members: members.map(memberToProto) };
    },
    async removeWorkspaceMembers(req, ctx) {
      return { removedCount: await service.removeMembers(managerOf(ctx), req.workspaceId, req.userIds) };
    },
  };
}
