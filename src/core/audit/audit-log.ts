/**
 * The audit log: every change made through the management services (API keys, workspaces,
 * members, presets, interns) is written here in the same transaction as the change, by a management
 * key over the API or by `portico admin` on the server. Details hold names and flags, never secrets.
 */
import type { Db } from "../../db/client.js";
import { Prisma, type AuditEvent, type DbTransaction } from "../../db/prisma.js";
import type { Caller } from "../auth.js";

/** Who made a change: a management key (over HTTP or gRPC) or the operator's command line. */
export type Actor =
  | { type: "api_key"; organizationId: string; keyHash: string; keyLabel: string; userId: string }
  | { type: "cli"; organizationId: string };

export function actorOf(caller: Caller): Actor {
  return {
    type: "api_key",
    organizationId: caller.organizationId,
    keyHash: caller.keyHash,
    keyLabel: caller.keyLabel,
    userId: caller.userId,
  };
}

export function cliActor(organizationId: string): Actor {
  return { type: "cli", organizationId };
}

export interface AuditEntry {
  action: string;
  targetType: string;
  targetId: string;
  workspaceId?: string | null;
  details?: Record<string, unknown>;
}

export interface AuditQuery {
  offset: number;
  limit: number;
  action?: string | undefined;
  targetType?: string | undefined;
  targetId?: string | undefined;
}

/** Writes one event inside the caller's transaction (or directly on the database). */
export async function recordAudit(tx: DbTransaction | Db, actor: Actor, entry: AuditEntry): Promise<void> {
  await tx.auditEvent.create({
    data: {
      organizationId: actor.organizationId,
      workspaceId: entry.workspaceId ?? null,
      actorType: actor.type,
      actorKeyHash: actor.type === "api_key" ? actor.keyHash : null,
      actorKeyLabel: actor.type === "api_key" ? actor.keyLabel : null,
      actorUserId: actor.type === "api_key" ? actor.userId : null,
      action: entry.action,
      targetType: entry.targetType,
      targetId: entry.targetId,
      details: entry.details ? (entry.details as Prisma.InputJsonValue) : Prisma.DbNull,
    },
  });
}

/** Records a change made by a caller outside a transaction of ours (a domain with its own storage code). */
export type AuditRecorder = (caller: Caller, entry: AuditEntry) => Promise<void>;

export function createAuditRecorder(db: Db): AuditRecorder {
  return (caller, entry) => recordAudit(db, actorOf(caller), entry);
}

export function createAuditLog(db: Db) {
  return {
    /** One organization's events, newest first. */
    async list(organizationId: string, q: AuditQuery): Promise<{ items: AuditEvent[]; total: number }> {
      const where: Prisma.AuditEventWhereInput = { organizationId };
      if (q.action !== undefined) where.action = q.action;
      if (q.targetType !== undefined) where.targetType = q.targetType;
      if (q.targetId !== undefined) where.targetId = q.targetId;
      const [items, total] = await db.$transaction([
        db.auditEvent.findMany({ where, orderBy: [{ createdAt: "desc" }, { id: "desc" }], skip: q.offset, take: q.limit }),
        db.auditEvent.count({ where }),
      ]);
      return { items, total };
    },
  };
}

export type AuditLog = ReturnType<typeof createAuditLog>;
