/**
 * Workspaces and their members, scoped to the actor's organization: a workspace of another
 * organization, or a deleted one, is not found. Every change is audited in the same transaction.
 */
import type { Db } from "../../db/client.js";
import { isUniqueViolation } from "../../db/client.js";
import type { DbTransaction, User, Workspace, WorkspaceMember } from "../../db/prisma.js";
import { recordAudit, type Actor } from "../audit/audit-log.js";
import { invalidArgument, notFound } from "../errors.js";
import { slugify } from "../identity/identity-repository.js";
import { ManagementFields } from "../../contract/requests/management.js";
import { MAX_RESPONSE_CACHE_TTL_SECONDS } from "../../contract/requests/chat-request.js";
import { MAX_CONTENT_LOG_RETENTION_DAYS } from "../../contract/requests/management.js";
import { checkField, checkName, checkText, isUuid, stateConflict } from "../management/rules.js";
import { checkPage, createOrdering, findArgs, pagedWhere, pageOf, type PageInput } from "../paging.js";

/** Oldest first. */
export const WORKSPACES_ORDER = createOrdering("workspaces", [
  { field: "createdAt", dir: "asc", kind: "date" },
  { field: "id", dir: "asc", kind: "string" },
]);
/** Oldest membership first. */
export const MEMBERS_ORDER = createOrdering("workspace-members", [
  { field: "createdAt", dir: "asc", kind: "date" },
  { field: "id", dir: "asc", kind: "string" },
]);
import { checkRate, checkReset, checkSpendLimit } from "../spend/limit-rules.js";
import { workspaceCounterId, type SpendStore } from "../spend/spend-store.js";
import type { LimitReset } from "../spend/windows.js";

/** A workspace's budget and rate bounds as the management API sets them (docs/limits.md); absent: unchanged. */
export interface WorkspaceLimitChanges {
  budgetFemtoUsd?: bigint | null;
  budgetReset?: string;
  rateLimitRpm?: number | null;
  rateLimitTpm?: number | null;
  /** The response cache's default time to live for the workspace's requests (docs/operations.md); null = off. */
  responseCacheTtlSeconds?: number | null;
  /** Content logging's retention in days (docs/operations.md, "Content logging"); null = off. */
  contentLogRetentionDays?: number | null;
}

type WorkspaceLimitData = {
  budgetFemtoUsd?: bigint | null;
  budgetReset?: LimitReset;
  rateLimitRpm?: number | null;
  rateLimitTpm?: number | null;
  responseCacheTtlSeconds?: number | null;
  contentLogRetentionDays?: number | null;
};

function checkWorkspaceLimits(c: WorkspaceLimitChanges): WorkspaceLimitData {
  const d: WorkspaceLimitData = {};
  if (c.budgetFemtoUsd !== undefined) d.budgetFemtoUsd = checkSpendLimit("budget", c.budgetFemtoUsd);
  if (c.budgetReset !== undefined) d.budgetReset = checkReset("budget_reset", c.budgetReset);
  if (c.rateLimitRpm !== undefined) d.rateLimitRpm = checkRate("rate_limit_rpm", c.rateLimitRpm);
  if (c.rateLimitTpm !== undefined) d.rateLimitTpm = checkRate("rate_limit_tpm", c.rateLimitTpm);
  if (c.responseCacheTtlSeconds !== undefined) d.responseCacheTtlSeconds = checkCacheTtl(c.responseCacheTtlSeconds);
  if (c.contentLogRetentionDays !== undefined) d.contentLogRetentionDays = checkContentLogRetention(c.contentLogRetentionDays);
  return d;
}

/** The workspace's response cache time to live: 1 to MAX_RESPONSE_CACHE_TTL_SECONDS, or null (off). */
function checkCacheTtl(v: number | null): number | null {
  if (v === null) return null;
  if (!Number.isInteger(v) || v < 1 || v > MAX_RESPONSE_CACHE_TTL_SECONDS) {
    throw invalidArgument("response_cache_ttl_seconds", `response_cache_ttl_seconds must be a whole number from 1 to ${MAX_RESPONSE_CACHE_TTL_SECONDS}, or null (off)`);
  }
  return v;
}

/** Content logging's retention: 1 to MAX_CONTENT_LOG_RETENTION_DAYS days, or null (off). */
function checkContentLogRetention(v: number | null): number | null {
  if (v === null) return null;
  if (!Number.isInteger(v) || v < 1 || v > MAX_CONTENT_LOG_RETENTION_DAYS) {
    throw invalidArgument("content_log_retention_days", `content_log_retention_days must be a whole number from 1 to ${MAX_CONTENT_LOG_RETENTION_DAYS}, or null (off)`);
  }
  return v;
}

function limitAudit(d: WorkspaceLimitData): Record<string, unknown> {
  const out: Record<string, unknown> = { ...d };
  if (d.budgetFemtoUsd !== undefined) out.budgetFemtoUsd = d.budgetFemtoUsd === null ? null : d.budgetFemtoUsd.toString();
  return out;
}

export const WORKSPACE_NOT_FOUND = "workspace_id does not name a workspace of this organization";
export const DEFAULT_WORKSPACE_DELETED = "The organization's default workspace was deleted; pass workspace_id to choose a workspace";
const SLUG = /^[a-z0-9]+(-[a-z0-9]+)*$/;
const EMAIL = /^[^\s@]+@[^\s@]+$/;
const MAX_MEMBERS_PER_CALL = 100;

export interface MemberView {
  member: WorkspaceMember;
  user: User;
}

function checkSlug(field: string, slug: string): string {
  return checkField(ManagementFields.workspaceSlug, field, slug);
}

function auditDetails(w: Pick<Workspace, "name" | "slug" | "description">) {
  return { name: w.name, slug: w.slug, description: w.description };
}

export interface WorkspacesServiceHooks {
  /** Called after a user joined or left the organization (committed): keys they created change standing. */
  onMembershipChanged?: () => void | Promise<void>;
  /** Called after a workspace was deleted (committed): keys it held are refused from now on. */
  onWorkspaceDeleted?: () => void | Promise<void>;
  /** Called after a workspace's budget or rate bounds changed (committed): its keys' cached limits are stale. */
  onLimitsChanged?: () => void | Promise<void>;
  /** Spend counters: a workspace's budget is copied onto its counter in the transaction that sets it. */
  spend?: SpendStore;
}

/**
 * Inside a transaction, locks a workspace row until the transaction ends if it is not deleted
 * (a no-op UPDATE: a row lock on PostgreSQL, the write lock on SQLite) and says whether it was.
 * Whatever is created in a workspace under this lock cannot race the workspace's deletion.
 */
export async function lockActiveWorkspace(tx: DbTransaction, workspaceId: string): Promise<boolean> {
  const n = await tx.$executeRaw`UPDATE "Workspace" SET "deletedAt" = NULL WHERE "id" = ${workspaceId} AND "deletedAt" IS NULL`;
  return n > 0;
}

export function createWorkspacesService(db: Db, hooks: WorkspacesServiceHooks = {}) {
  const findActive = async (organizationId: string, id: string): Promise<Workspace | null> => {
    if (!isUuid(id)) return null;
    return db.workspace.findFirst({ where: { id, organizationId, deletedAt: null } });
  };

  const workspaceOf = async (actor: Actor, id: string): Promise<Workspace> => {
    const ws = await findActive(actor.organizationId, id);
    if (!ws) throw notFound();
    return ws;
  };

  /** Copies the budget onto the workspace's spend counter (in `tx`), counting the current window's spend so far. */
  const syncCounter = async (tx: DbTransaction, ws: Workspace) => {
    if (!hooks.spend) return;
    await hooks.spend.setLimit(tx, workspaceCounterId(ws.id), ws.budgetFemtoUsd, ws.budgetReset as LimitReset, async (since) => {
      const r = await tx.generation.aggregate({ _sum: { costFemtoUsd: true }, where: { workspaceId: ws.id, createdAt: { gte: new Date(since) } } });
      return r._sum.costFemtoUsd ?? 0n;
    });
  };

  const slugTaken = () => stateConflict("A workspace with that slug already exists in this organization");

  const service = {
    /** The workspace a request names (400 when it is not one of the organization's), else the default one. */
    async resolve(actor: Actor, workspaceId: string | undefined): Promise<Workspace> {
      if (workspaceId !== undefined) {
        const ws = await findActive(actor.organizationId, workspaceId);
        if (!ws) throw invalidArgument("workspace_id", WORKSPACE_NOT_FOUND);
        return ws;
      }
      const ws = await db.workspace.findFirst({ where: { organizationId: actor.organizationId, isDefault: true, deletedAt: null } });
      if (!ws) throw invalidArgument("workspace_id", DEFAULT_WORKSPACE_DELETED);
      return ws;
    },

    async list(actor: Actor, input: PageInput) {
      const page = checkPage(input, WORKSPACES_ORDER);
      const where = { organizationId: actor.organizationId, deletedAt: null };
      const [rows, total] = await db.$transaction([
        db.workspace.findMany({ where: pagedWhere(where, WORKSPACES_ORDER, page), ...findArgs(WORKSPACES_ORDER, page) }),
        db.workspace.count({ where }),
      ]);
      return { ...pageOf(rows, WORKSPACES_ORDER, page), total };
    },

    get: workspaceOf,

    async create(
      actor: Actor,
      input: { name: string; slug?: string | undefined; description?: string | undefined; createdBy?: string | null; isDefault?: boolean; limits?: WorkspaceLimitChanges },
    ) {
      const limits = checkWorkspaceLimits(input.limits ?? {});
      const name = checkName("name", input.name);
      const slug = input.slug !== undefined ? checkSlug("slug", input.slug) : slugify(name);
      const description = input.description !== undefined ? checkText("description", input.description, 2000) : null;
      const createdBy = input.createdBy !== undefined ? input.createdBy : actor.type === "api_key" ? actor.userId : null;
      try {
        return await db.$transaction(async (tx) => {
          const ws = await tx.workspace.create({
            data: { organizationId: actor.organizationId, name, slug, description, createdBy, isDefault: input.isDefault === true, ...limits },
          });
          if (createdBy) await tx.workspaceMember.create({ data: { workspaceId: ws.id, userId: createdBy } });
          if (ws.budgetFemtoUsd !== null) await syncCounter(tx, ws);
          await recordAudit(tx, actor, { action: "workspace.create", targetType: "workspace", targetId: ws.id, workspaceId: ws.id, details: { ...auditDetails(ws), ...limitAudit(limits) } });
          return ws;
        });
      } catch (err) {
        if (isUniqueViolation(err)) throw slugTaken();
        throw err;
      }
    },

    async update(actor: Actor, id: string, changes: { name?: string; slug?: string; description?: string | null } & WorkspaceLimitChanges) {
      const limits = checkWorkspaceLimits(changes);
      const ws = await workspaceOf(actor, id);
      const data: { name?: string; slug?: string; description?: string | null; updatedAt: Date } = { updatedAt: new Date() };
      if (changes.name !== undefined) data.name = checkName("name", changes.name);
      if (changes.slug !== undefined) data.slug = checkSlug("slug", changes.slug);
      if (changes.description !== undefined) {
        data.description = changes.description === null ? null : checkText("description", changes.description, 2000);
      }
      const { updatedAt: _t, ...changed } = data;
      if (Object.keys(changed).length === 0 && Object.keys(limits).length === 0) return ws;
      if (limits.budgetFemtoUsd !== undefined || limits.budgetReset !== undefined) await hooks.spend?.beforeLimitChange();
      try {
        const updated = await db.$transaction(async (tx) => {
          const res = await tx.workspace.updateMany({ where: { id: ws.id, deletedAt: null }, data: { ...data, ...limits } });
          if (res.count === 0) throw notFound();
          const row = (await tx.workspace.findUnique({ where: { id: ws.id } }))!;
          if (limits.budgetFemtoUsd !== undefined || limits.budgetReset !== undefined) await syncCounter(tx, row);
          await recordAudit(tx, actor, { action: "workspace.update", targetType: "workspace", targetId: ws.id, workspaceId: ws.id, details: { ...changed, ...limitAudit(limits) } });
          return row;
        });
        if (Object.keys(limits).length > 0) await hooks.onLimitsChanged?.();
        return updated;
      } catch (err) {
        if (isUniqueViolation(err)) throw slugTaken();
        throw err;
      }
    },

    /**
     * Soft-deletes a workspace; refused while it holds active keys unless `force` (operator CLI only).
     * The workspace row is marked first, which locks it (PostgreSQL row lock; SQLite's write lock) until
     * the transaction ends, and key creation takes the same lock (lockActiveWorkspace): a key created
     * concurrently is either counted here (the delete is refused) or refused itself, never left active
     * in a deleted workspace. Keys of a deleted workspace (after `force`) are refused by the auth check.
     */
    async delete(actor: Actor, id: string, opts: { force?: boolean } = {}) {
      const ws = await workspaceOf(actor, id);
      await db.$transaction(async (tx) => {
        const res = await tx.workspace.updateMany({ where: { id: ws.id, deletedAt: null }, data: { deletedAt: new Date(), updatedAt: new Date() } });
        if (res.count === 0) throw notFound();
        if (!opts.force) {
          const keys = await tx.apiKey.count({ where: { workspaceId: ws.id, revokedAt: null } });
          if (keys > 0) throw stateConflict(`The workspace still holds ${keys} active API key(s); delete them first`);
        }
        // Its logged request and response bodies go with it (docs/operations.md, "Content logging").
        const content = await tx.generationContent.deleteMany({ where: { workspaceId: ws.id } });
        await recordAudit(tx, actor, { action: "workspace.delete", targetType: "workspace", targetId: ws.id, workspaceId: ws.id, details: { slug: ws.slug, ...(content.count > 0 ? { contentDeleted: content.count } : {}) } });
      });
      await hooks.onWorkspaceDeleted?.();
    },

    /** Adds a user (found or created by email) to the actor's organization. */
    async addOrganizationMember(actor: Actor, email: string, role = "member") {
      const address = email.trim().toLowerCase();
      if (address.length > 254 || !EMAIL.test(address)) throw invalidArgument("email", "email must be an email address");
      const added = await db.$transaction(async (tx) => {
        const user = await tx.user.upsert({ where: { email: address }, update: {}, create: { email: address, name: address } });
        await tx.membership.upsert({
          where: { organizationId_userId: { organizationId: actor.organizationId, userId: user.id } },
          update: { removedAt: null, role },
          create: { organizationId: actor.organizationId, userId: user.id, role },
        });
        await recordAudit(tx, actor, { action: "organization.member.add", targetType: "user", targetId: user.id, details: { email: address, role } });
        return user;
      });
      await hooks.onMembershipChanged?.();
      return added;
    },

    /** The user leaves the actor's organization (and its workspaces); keys they created then answer 403. */
    async removeOrganizationMember(actor: Actor, userId: string) {
      await db.$transaction(async (tx) => {
        const res = await tx.membership.updateMany({
          where: { organizationId: actor.organizationId, userId, removedAt: null },
          data: { removedAt: new Date() },
        });
        if (res.count === 0) throw notFound("no active membership for that user in that organization");
        const workspaces = await tx.workspace.findMany({ where: { organizationId: actor.organizationId }, select: { id: true } });
        await tx.workspaceMember.deleteMany({ where: { userId, workspaceId: { in: workspaces.map((w) => w.id) } } });
        await recordAudit(tx, actor, { action: "organization.member.remove", targetType: "user", targetId: userId });
      });
      await hooks.onMembershipChanged?.();
    },

    async listMembers(
      actor: Actor,
      workspaceId: string,
      input: PageInput,
    ): Promise<{ items: MemberView[]; total: number; hasMore: boolean; nextCursor?: string }> {
      const ws = await workspaceOf(actor, workspaceId);
      const page = checkPage(input, MEMBERS_ORDER);
      const [rows, total] = await db.$transaction([
        db.workspaceMember.findMany({ where: pagedWhere({ workspaceId: ws.id }, MEMBERS_ORDER, page), ...findArgs(MEMBERS_ORDER, page) }),
        db.workspaceMember.count({ where: { workspaceId: ws.id } }),
      ]);
      const { items: members, ...more } = pageOf(rows, MEMBERS_ORDER, page);
      const users = await db.user.findMany({ where: { id: { in: members.map((m) => m.userId) } } });
      const byId = new Map(users.map((u) => [u.id, u]));
      return { items: members.flatMap((m) => (byId.has(m.userId) ? [{ member: m, user: byId.get(m.userId)! }] : [])), total, ...more };
    },

    /**
     * Adds users by id (they must be active members of the organization; anyone else is reported as
     * not found, like a user of another organization) or by email (a new user joins the organization).
     */
    async addMembers(actor: Actor, workspaceId: string, input: { userIds: string[]; emails: string[] }): Promise<MemberView[]> {
      const ws = await workspaceOf(actor, workspaceId);
      const userIds = [...new Set(input.userIds)];
      const emails = [...new Set(input.emails.map((e) => e.trim().toLowerCase()))];
      if (userIds.length + emails.length === 0) throw invalidArgument("user_ids", "name 1 to 100 users in user_ids or emails");
      if (userIds.length + emails.length > MAX_MEMBERS_PER_CALL) throw invalidArgument("user_ids", "at most 100 users per call");
      emails.forEach((e, i) => {
        if (e.length > 254 || !EMAIL.test(e)) throw invalidArgument(`emails[${i}]`, "emails must be email addresses");
      });
      const known = userIds.length
        ? await db.membership.findMany({ where: { organizationId: actor.organizationId, userId: { in: userIds }, removedAt: null } })
        : [];
      const missing = userIds.find((id) => !known.some((m) => m.userId === id));
      if (missing !== undefined) throw invalidArgument("user_ids", `user_ids names a user who is not a member of this organization: ${missing}`);
      return db.$transaction(async (tx) => {
        const ids = [...userIds];
        for (const email of emails) {
          const user = await tx.user.upsert({ where: { email }, update: {}, create: { email, name: email } });
          const m = await tx.membership.findUnique({ where: { organizationId_userId: { organizationId: actor.organizationId, userId: user.id } } });
          if (!m || m.removedAt) {
            await tx.membership.upsert({
              where: { organizationId_userId: { organizationId: actor.organizationId, userId: user.id } },
              update: { removedAt: null },
              create: { organizationId: actor.organizationId, userId: user.id },
            });
            await recordAudit(tx, actor, { action: "organization.member.add", targetType: "user", targetId: user.id, details: { email } });
          }
          if (!ids.includes(user.id)) ids.push(user.id);
        }
        const out: MemberView[] = [];
        for (const userId of ids) {
          let member = await tx.workspaceMember.findUnique({ where: { workspaceId_userId: { workspaceId: ws.id, userId } } });
          if (!member) {
            member = await tx.workspaceMember.create({ data: { workspaceId: ws.id, userId } });
            await recordAudit(tx, actor, { action: "workspace.member.add", targetType: "workspace", targetId: ws.id, workspaceId: ws.id, details: { user_id: userId } });
          }
          out.push({ member, user: (await tx.user.findUnique({ where: { id: userId } }))! });
        }
        return out;
      });
    },

    async removeMembers(actor: Actor, workspaceId: string, userIds: string[]): Promise<number> {
      const ws = await workspaceOf(actor, workspaceId);
      const ids = [...new Set(userIds)];
      if (ids.length === 0 || ids.length > MAX_MEMBERS_PER_CALL) throw invalidArgument("user_ids", "name 1 to 100 users in user_ids");
      return db.$transaction(async (tx) => {
        let removed = 0;
        for (const userId of ids) {
          const res = await tx.workspaceMember.deleteMany({ where: { workspaceId: ws.id, userId } });
          if (res.count > 0) {
            removed += 1;
            await recordAudit(tx, actor, { action: "workspace.member.remove", targetType: "workspace", targetId: ws.id, workspaceId: ws.id, details: { user_id: userId } });
          }
        }
        return removed;
      });
    },
  };
  return service;
}

export type WorkspacesService = ReturnType<typeof createWorkspacesService>;
