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
  /** Actions starting with this text (a literal prefix: % and _ are not wildcards). */
  actionPrefix?: string | undefined;
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
      if (q.actionPrefix) {
        // Prisma's startsWith is LIKE: % and _ would be wildcards, and SQLite's LIKE ignores case. The
        // page's ids are chosen with an exact, case-sensitive comparison of the action's first characters.
        const conds = [Prisma.sql`"organizationId" = ${organizationId}`, Prisma.sql`substr("action", 1, length(CAST(${q.actionPrefix} AS TEXT))) = ${q.actionPrefix}`];
        if (q.action !== undefined) conds.push(Prisma.sql`"action" = ${q.action}`);
        if (q.targetType !== undefined) conds.push(Prisma.sql`"targetType" = ${q.targetType}`);
        if (q.targetId !== undefined) conds.push(Prisma.sql`"targetId" = ${q.targetId}`);
        const filter = Prisma.join(conds, " AND ");
        const [page, counted] = await db.$transaction([
          db.$queryRaw<{ id: string }[]>`SELECT "id" FROM "AuditEvent" WHERE ${filter} ORDER BY "createdAt" DESC, "id" DESC LIMIT ${q.limit} OFFSET ${q.offset}`,
          db.$queryRaw<{ n: number | bigint }[]>`SELECT COUNT(*) AS "n" FROM "AuditEvent" WHERE ${filter}`,
        ]);
        const ids = page.map((r) => r.id);
        const rows = ids.length === 0 ? [] : await db.auditEvent.findMany({ where: { id: { in: ids } } });
        const byId = new Map(rows.map((r) => [r.id, r]));
        return { items: ids.flatMap((id) => byId.get(id) ?? []), total: Number(counted[0]?.n ?? 0) };
      }
      const [items, total] = await db.$transaction([
        db.auditEvent.findMany({ where, orderBy: [{ createdAt: "desc" }, { id: "desc" }], skip: q.offset, take: q.limit }),
        db.auditEvent.count({ where }),
      ]);
      return { items, total };
    },
  };
}

export type AuditLog = ReturnType<typeof createAuditLog>;
