/**
 * InternAdminService over Connect: proto ⇄ domain only. The programme gate comes first (NOT_FOUND
 * outside it, as for every intern path), then the management-key check.
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Intern } from "../../gen/portico/internadmin/v1/intern_pb.js";
import { InternAdminService } from "../../gen/portico/internadmin/v1/internadmin_service_pb.js";
import { actorOf } from "../audit/audit-log.js";
import { callerOf, requireManagement } from "../auth.js";
import { invalidArgument } from "../errors.js";
import { maskPaths } from "../management/rules.js";
import { internStatus, type InternAdmin, type InternSettings, type InternView } from "./intern-admin.js";
import { outsideProgramme } from "./intern-errors.js";
import type { Init } from "../proto-init.js";
import { pendingQuestionToProto, sessionUsage } from "./sessions.js";
import { pageFields } from "../paging.js";

export function internViewToProto(v: InternView, brand: string): Init<Intern> {
  const i = v.intern;
  const pending = new Map(v.pending.map((q) => [q.runId, q]));
  return {
    id: i.id,
    name: i.name,
    ...(i.description !== null ? { description: i.description } : {}),
    ...(i.instructions !== null ? { instructions: i.instructions } : {}),
    ...(i.configuredModel !== null ? { model: i.configuredModel } : {}),
    status: internStatus(i),
    workspaceId: i.workspaceId,
    host: {
      $typeName: "portico.internadmin.v1.HostStatus",
      attached: i.status === "attached",
      ...(i.hostInstance !== null ? { instance: i.hostInstance } : {}),
      ...(i.agentName !== null ? { agent: i.agentName } : {}),
      ...(i.hostAttachedAt !== null ? { attachedAt: timestampFromDate(i.hostAttachedAt) } : {}),
      ...(i.model !== null ? { reportedModel: i.model } : {}),
      hasToken: i.hostTokenHash !== null,
    },
    sessions: v.live.map((r) => ({
      $typeName: "portico.internadmin.v1.LiveSession" as const,
      sessionId: r.sessionKey,
      state: r.state,
      runId: r.id,
      startedAt: timestampFromDate(r.createdAt),
      ...(r.state === "paused" && pending.has(r.id) ? { pendingQuestion: pendingQuestionToProto(pending.get(r.id)!, brand) } : {}),
      ...(v.usage.has(r.id) ? { usage: sessionUsage(v.usage.get(r.id)!) } : {}),
    })),
    createdAt: timestampFromDate(i.createdAt),
    updatedAt: timestampFromDate(i.updatedAt),
  };
}

function managerOf(ctx: HandlerContext) {
  const caller = callerOf(ctx);
  if (!caller.internsProgramme) throw outsideProgramme();
  requireManagement(caller);
  return { caller, actor: actorOf(caller), workspaceId: caller.workspaceId };
}

function checkWorkspace(given: string | undefined, workspaceId: string): void {
  if (given !== undefined && given !== workspaceId) throw invalidArgument("workspace_id", "workspace_id must be the API key's workspace");
}

export function createInternAdminHandler(deps: { admin: InternAdmin; brand: string }): ServiceImpl<typeof InternAdminService> {
  const { admin } = deps;
  const internToProto = (v: InternView) => internViewToProto(v, deps.brand);
  return {
    async listInterns(req, ctx) {
      const { workspaceId } = managerOf(ctx);
      checkWorkspace(req.workspaceId, workspaceId);
      const { items, ...more } = await admin.list(workspaceId, { limit: req.limit, offset: req.offset, startingAfter: req.startingAfter, statuses: req.statuses });
      return { interns: items.map(internToProto), ...pageFields(more) };
    },
    async createIntern(req, ctx) {
      const { actor, workspaceId } = managerOf(ctx);
      checkWorkspace(req.workspaceId, workspaceId);
      const res = await admin.create(actor, workspaceId, {
        name: req.name,
        ...(req.description !== undefined ? { description: req.description } : {}),
        ...(req.instructions !== undefined ? { instructions: req.instructions } : {}),
        ...(req.model !== undefined ? { model: req.model } : {}),
      });
      return { intern: internToProto(res.view), hostToken: res.hostToken };
    },
    async getIntern(req, ctx) {
      const { workspaceId } = managerOf(ctx);
      return { intern: internToProto(await admin.get(workspaceId, req.id)) };
    },
    async updateIntern(req, ctx) {
      const { actor, workspaceId } = managerOf(ctx);
      const paths = maskPaths(req.updateMask?.paths, ["name", "description", "instructions", "model"]);
      const changes: InternSettings = {};
      if (paths.has("name")) changes.name = req.name;
      if (paths.has("description")) changes.description = req.description ?? null;
      if (paths.has("instructions")) changes.instructions = req.instructions ?? null;
      if (paths.has("model")) changes.model = req.model ?? null;
      return { intern: internToProto(await admin.update(actor, workspaceId, req.id, changes)) };
    },
    async deleteIntern(req, ctx) {
      const { actor, workspaceId } = managerOf(ctx);
      await admin.delete(actor, workspaceId, req.id);
      return { deleting: true };
    },
    async suspendIntern(req, ctx) {
      const { actor, workspaceId } = managerOf(ctx);
      await admin.suspend(actor, workspaceId, req.id);
      return { suspended: true };
    },
    async provisionIntern(req, ctx) {
      const { actor, workspaceId } = managerOf(ctx);
      await admin.provision(actor, workspaceId, req.id);
      return { provisioning: true };
    },
    async issueHostToken(req, ctx) {
      const { actor, workspaceId } = managerOf(ctx);
      const res = await admin.issueHostToken(actor, workspaceId, req.id);
      return { hostToken: res.hostToken, intern: internToProto(res.view) };
    },
    async revokeHostToken(req, ctx) {
      const { actor, workspaceId } = managerOf(ctx);
      await admin.revokeHostToken(actor, workspaceId, req.id);
      return { revoked: true };
    },
  };
}
