/**
 * AuditService over Connect: the organization's audit log, newest first. Management keys only.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { AuditEvent as AuditRow } from "../../db/prisma.js";
import type { AuditEvent } from "../../gen/portico/audit/v1/audit_event_pb.js";
import { AuditService } from "../../gen/portico/audit/v1/audit_service_pb.js";
import { callerOf, requireManagement } from "../auth.js";
import { invalidArgument } from "../errors.js";
import { checkPage, pageFields } from "../paging.js";
import { AUDIT_ORDER } from "./audit-log.js";
import type { AuditLog } from "./audit-log.js";
import type { Init } from "../proto-init.js";

const MAX_ACTION_PREFIX = 100;

export function auditEventToProto(e: AuditRow): Init<AuditEvent> {
  const details = e.details !== null && typeof e.details === "object" && !Array.isArray(e.details) ? (e.details as JsonObject) : {};
  return {
    id: e.id,
    action: e.action,
    targetType: e.targetType,
    targetId: e.targetId,
    ...(e.workspaceId !== null ? { workspaceId: e.workspaceId } : {}),
    actor: {
      $typeName: "portico.audit.v1.AuditActor",
      type: e.actorType,
      ...(e.actorKeyHash !== null ? { keyHash: e.actorKeyHash } : {}),
      ...(e.actorKeyLabel !== null ? { keyLabel: e.actorKeyLabel } : {}),
      ...(e.actorUserId !== null ? { userId: e.actorUserId } : {}),
    },
    details,
    createdAt: timestampFromDate(e.createdAt),
  };
}

export function createAuditHandler(deps: { log: AuditLog }): ServiceImpl<typeof AuditService> {
  return {
    async listAuditEvents(req, ctx) {
      const caller = callerOf(ctx);
      requireManagement(caller);
      const page = checkPage(req, AUDIT_ORDER);
      if (req.actionPrefix !== undefined && [...req.actionPrefix].length > MAX_ACTION_PREFIX) {
        throw invalidArgument("action_prefix", `action_prefix must be at most ${MAX_ACTION_PREFIX} characters`);
      }
      const { items, total, ...more } = await deps.log.list(caller.organizationId, {
        ...page,
        action: req.action,
        actionPrefix: req.actionPrefix,
        targetType: req.targetType,
        targetId: req.targetId,
      });
      return { events: items.map(auditEventToProto), totalCount: total, ...pageFields(more) };
    },
  };
}
