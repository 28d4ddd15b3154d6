/**
 * The audit log: every change made through the management services (API keys, workspaces,
 * members, presets, interns) is written here in the same transaction as the change, by a management
 * key over the API or by `portico admin` on the server. Details hold names and flags, never secrets.
 */
import type { Db } from "../../db/client.js";
import { Prisma, type AuditEvent, type DbTransaction } from "../../db/prisma.js";
import type { Caller } from "../auth.js";
import { createOrdering, encodeCursor, findArgs, pagedWhere, pageOf, type Page, type PageRequest } from "../paging.js";

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

/** Newest first. */
export const AUDIT_ORDER = createOrdering("audit", [
  { field: "createdAt", dir: "desc", kind: "date" },
  { field: "id", dir: "desc", kind: "string" },
]);

export interface AuditQuery extends PageRequest {
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
    async list(organizationId: string, q: AuditQuery): Promise<Page<AuditEvent> & { total: number }> {
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
        // After the cursor: its position is read from its event (audit events are never deleted), which
        // keeps the comparison on the stored column whatever the backend's date representation.
        const afterId = q.after?.[1] as string | undefined;
        const at = Prisma.sql`(SELECT "createdAt" FROM "AuditEvent" WHERE "id" = ${afterId ?? ""})`;
        const keyset = afterId === undefined ? Prisma.empty : Prisma.sql` AND ("createdAt" < ${at} OR ("createdAt" = ${at} AND "id" < ${afterId}))`;
        const [ids, counted] = await db.$transaction([
          db.$queryRaw<{ id: string }[]>`SELECT "id" FROM "AuditEvent" WHERE ${filter}${keyset} ORDER BY "createdAt" DESC, "id" DESC LIMIT ${q.limit + 1} OFFSET ${q.offset}`,
          db.$queryRaw<{ n: number | bigint }[]>`SELECT COUNT(*) AS "n" FROM "AuditEvent" WHERE ${filter}`,
        ]);
        const page = pageOf(ids, AUDIT_ORDER, q);
        const wanted = page.items.map((r) => r.id);
        const rows = wanted.length === 0 ? [] : await db.auditEvent.findMany({ where: { id: { in: wanted } } });
        const byId = new Map(rows.map((r) => [r.id, r]));
        const items = wanted.flatMap((id) => byId.get(id) ?? []);
        const more = items.length > 0 && page.hasMore ? { hasMore: true, nextCursor: encodeCursor(AUDIT_ORDER, items.at(-1)!) } : { hasMore: false };
        return { items, ...more, total: Number(counted[0]?.n ?? 0) };
      }
      const [rows, total] = await db.$transaction([
        db.auditEvent.findMany({ where: pagedWhere(where, AUDIT_ORDER, q), ...findArgs(AUDIT_ORDER, q) }),
        db.auditEvent.count({ where }),
      ]);
      return { ...pageOf(rows, AUDIT_ORDER, q), total };
    },
  };
}

export type AuditLog = ReturnType<typeof createAuditLog>;
