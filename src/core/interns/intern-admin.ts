/**
 * Intern management (InternAdminService and `portico admin intern`): create, rename, describe,
 * instruct, choose a model, suspend and resume, delete, and issue or revoke host tokens. Scoped to
 * one workspace (the API key's); every change is audited in its own transaction. A host token is
 * returned only when issued; the database keeps its SHA-256.
 */
import { Reason } from "../../contract/reasons.js";
import { Code } from "@connectrpc/connect";
import type { Db } from "../../db/client.js";
import { isUniqueViolation } from "../../db/client.js";
import type { DbTransaction, Intern, InternInteraction, InternRun, Prisma } from "../../db/prisma.js";
import { recordAudit, type Actor } from "../audit/audit-log.js";
import { invalidArgument, serviceError } from "../errors.js";
import { generateHostToken, hashSecret } from "../identity/keys.js";
import { checkText, isUuid, stateConflict } from "../management/rules.js";
import { internNotFound } from "./intern-errors.js";
import type { LinkRegistry } from "./link-registry.js";

export const INTERN_NAME = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;
const MODEL = /^[A-Za-z0-9~._:@+-]+\/[A-Za-z0-9~._:@+-]+$/;
export const INTERN_STATUSES = ["running", "awaiting_host", "stopped"] as const;
const MAX_LIST_LIMIT = 500;

export interface InternView {
  intern: Intern;
  /** Runs streaming or paused. */
  live: InternRun[];
  /** The questions paused runs wait for. */
  pending: InternInteraction[];
}

export interface InternSettings {
  name?: string;
  description?: string | null;
  instructions?: string | null;
  model?: string | null;
}

/**
 * A management write's transaction. Writes on one intern lock its row, so concurrent ones queue on that lock
 * while holding a pooled connection; the others may wait up to 10 s for a connection instead of Prisma's 2 s
 * (a burst of redundant deletes or suspends is answered 404/409 in turn, not 500). The work inside is small.
 */
function adminTransaction<T>(db: Db, fn: (tx: DbTransaction) => Promise<T>): Promise<T> {
  return db.$transaction(fn, { maxWait: 10_000, timeout: 15_000 });
}

export function internStatus(i: Intern): (typeof INTERN_STATUSES)[number] {
  if (i.suspendedAt) return "stopped";
  return i.status === "attached" ? "running" : "awaiting_host";
}

function checkSettings(s: InternSettings): InternSettings {
  const out: InternSettings = {};
  if (s.name !== undefined) {
    if (s.name.length < 2 || s.name.length > 17 || !INTERN_NAME.test(s.name)) {
      throw invalidArgument("name", "name must be 2 to 17 lowercase letters and digits in dash-separated groups, starting with a letter");
    }
    out.name = s.name;
  }
  if (s.description !== undefined) out.description = s.description === null ? null : checkText("description", s.description, 2000);
  if (s.instructions !== undefined) out.instructions = s.instructions === null ? null : checkText("instructions", s.instructions, 100_000);
  if (s.model !== undefined) {
    if (s.model !== null && (s.model.length < 1 || s.model.length > 200 || !MODEL.test(s.model))) {
      throw invalidArgument("model", "model must be author/slug (optionally :variant), 1 to 200 characters");
    }
    out.model = s.model;
  }
  return out;
}

/** The stored columns for public settings (model is the operator's choice, not the reported one). */
function columns(s: InternSettings) {
  return {
    ...(s.name !== undefined ? { name: s.name } : {}),
    ...(s.description !== undefined ? { description: s.description } : {}),
    ...(s.instructions !== undefined ? { instructions: s.instructions } : {}),
    ...(s.model !== undefined ? { configuredModel: s.model } : {}),
  };
}

/** What the audit log keeps of a settings change: instructions are summarised by length, never copied. */
function auditOf(s: InternSettings): Record<string, unknown> {
  const { instructions, ...rest } = s;
  return instructions === undefined ? rest : { ...rest, instructions_length: instructions === null ? null : instructions.length };
}

export interface InternAdminDeps {
  db: Db;
  /** This process's live host links (closed at once on suspend, token revocation and delete). */
  links?: LinkRegistry;
}

/**
 * Changes an intern inside a transaction and returns it; 404 when it is gone (deleted by a concurrent
 * request since it was read), never Prisma's "record not found" (a 500).
 */
async function updateIntern(tx: DbTransaction, id: string, data: Prisma.InternUpdateManyMutationInput): Promise<Intern> {
  const res = await tx.intern.updateMany({ where: { id }, data });
  const row = res.count === 0 ? null : await tx.intern.findUnique({ where: { id } });
  if (!row) throw internNotFound();
  return row;
}

export function createInternAdmin(deps: InternAdminDeps) {
  const { db } = deps;
  const closeLink = (internId: string, reason: string) => deps.links?.get(internId)?.close(reason);

  const internOf = async (workspaceId: string, id: string): Promise<Intern> => {
    const intern = isUuid(id) ? await db.intern.findFirst({ where: { id, workspaceId } }) : null;
    if (!intern) throw internNotFound();
    return intern;
  };

  const view = async (intern: Intern): Promise<InternView> => {
    const live = await db.internRun.findMany({ where: { internId: intern.id, state: { in: ["streaming", "paused"] } }, orderBy: { createdAt: "asc" } });
    const paused = live.filter((r) => r.state === "paused").map((r) => r.id);
    const pending = paused.length === 0 ? [] : await db.internInteraction.findMany({ where: { runId: { in: paused }, state: { in: ["pending", "delivering"] } } });
    return { intern, live, pending };
  };

  const nameTaken = (name: string) => stateConflict(`An intern named "${name}" already exists in this workspace`);

  return {
    view,

    async get(workspaceId: string, id: string): Promise<InternView> {
      return view(await internOf(workspaceId, id));
    },

    /** Newest first; the cursor is the id of the last intern of the previous page. */
    async list(workspaceId: string, q: { limit: number; startingAfter?: string | undefined; statuses: string[] }) {
      const limit = q.limit === 0 ? 50 : q.limit;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) throw invalidArgument("limit", "limit must be an integer between 1 and 500");
      const statuses = [...new Set(q.statuses)];
      if (statuses.length > 8) throw invalidArgument("status", "status names at most 8 values");
      const unknown = statuses.find((s) => !(INTERN_STATUSES as readonly string[]).includes(s));
      if (unknown !== undefined) throw invalidArgument("status", `status values are ${INTERN_STATUSES.join(", ")}`);
      const where: Record<string, unknown> = { workspaceId };
      const and: Record<string, unknown>[] = [];
      if (q.startingAfter !== undefined) {
        const after = isUuid(q.startingAfter) ? await db.intern.findFirst({ where: { id: q.startingAfter, workspaceId } }) : null;
        if (!after) throw invalidArgument("starting_after", "starting_after must be a next_cursor from a previous page");
        and.push({ OR: [{ createdAt: { lt: after.createdAt } }, { createdAt: after.createdAt, id: { lt: after.id } }] });
      }
      if (statuses.length > 0) {
        const or: Record<string, unknown>[] = [];
        if (statuses.includes("stopped")) or.push({ suspendedAt: { not: null } });
        if (statuses.includes("running")) or.push({ suspendedAt: null, status: "attached" });
        if (statuses.includes("awaiting_host")) or.push({ suspendedAt: null, NOT: { status: "attached" } });
        and.push({ OR: or });
      }
      if (and.length > 0) where.AND = and;
      const rows = await db.intern.findMany({ where, orderBy: [{ createdAt: "desc" }, { id: "desc" }], take: limit + 1 });
      const page = rows.slice(0, limit);
      return { items: await Promise.all(page.map(view)), hasMore: rows.length > limit, nextCursor: rows.length > limit ? page.at(-1)!.id : undefined };
    },

    async create(actor: Actor, workspaceId: string, input: InternSettings & { name: string }): Promise<{ view: InternView; hostToken: string }> {
      const settings = checkSettings(input);
      const workspace = await db.workspace.findFirst({ where: { id: workspaceId, organizationId: actor.organizationId, deletedAt: null } });
      if (!workspace) throw invalidArgument("workspace_id", "workspace_id does not name a workspace of this organization");
      const token = generateHostToken();
      try {
        const intern = await adminTransaction(db, async (tx) => {
          const row = await tx.intern.create({
            data: { organizationId: actor.organizationId, workspaceId, hostTokenHash: hashSecret(token), name: settings.name!, ...columns(settings) },
          });
          await recordAudit(tx, actor, { action: "intern.create", targetType: "intern", targetId: row.id, workspaceId, details: auditOf(settings) });
          return row;
        });
        return { view: await view(intern), hostToken: token };
      } catch (err) {
        if (isUniqueViolation(err)) throw nameTaken(settings.name!);
        throw err;
      }
    },

    async update(actor: Actor, workspaceId: string, id: string, changes: InternSettings): Promise<InternView> {
      const intern = await internOf(workspaceId, id);
      const settings = checkSettings(changes);
      if (Object.keys(settings).length === 0) return view(intern);
      try {
        const updated = await adminTransaction(db, async (tx) => {
          const row = await updateIntern(tx, intern.id, { ...columns(settings), updatedAt: new Date() });
          await recordAudit(tx, actor, { action: "intern.update", targetType: "intern", targetId: intern.id, workspaceId, details: auditOf(settings) });
          return row;
        });
        return view(updated);
      } catch (err) {
        if (isUniqueViolation(err)) throw nameTaken(settings.name!);
        throw err;
      }
    },

    /**
     * Deletes the intern with its sessions, runs and questions; refused while a run is live. The intern
     * row is locked first, so a concurrent delete or change waits and then finds it gone (404).
     */
    async delete(actor: Actor, workspaceId: string, id: string): Promise<void> {
      const intern = await internOf(workspaceId, id);
      await adminTransaction(db, async (tx) => {
        await updateIntern(tx, intern.id, { updatedAt: new Date() });
        const live = await tx.internRun.count({ where: { internId: intern.id, state: { in: ["streaming", "paused"] } } });
        if (live > 0) throw stateConflict("The intern has a run in progress or waiting for an answer; wait for it to end or cancel it first");
        const runs = await tx.internRun.findMany({ where: { internId: intern.id }, select: { id: true } });
        await tx.internInteraction.deleteMany({ where: { runId: { in: runs.map((r) => r.id) } } });
        await tx.internRun.deleteMany({ where: { internId: intern.id } });
        await tx.internSession.deleteMany({ where: { internId: intern.id } });
        if ((await tx.intern.deleteMany({ where: { id: intern.id } })).count === 0) throw internNotFound();
        await recordAudit(tx, actor, { action: "intern.delete", targetType: "intern", targetId: intern.id, workspaceId, details: { name: intern.name } });
      });
      closeLink(intern.id, "intern deleted");
    },

    async suspend(actor: Actor, workspaceId: string, id: string): Promise<void> {
      const intern = await internOf(workspaceId, id);
      await adminTransaction(db, async (tx) => {
        await updateIntern(tx, intern.id, { suspendedAt: intern.suspendedAt ?? new Date(), updatedAt: new Date() });
        await recordAudit(tx, actor, { action: "intern.suspend", targetType: "intern", targetId: intern.id, workspaceId });
      });
      closeLink(intern.id, "intern suspended");
    },

    async provision(actor: Actor, workspaceId: string, id: string): Promise<void> {
      const intern = await internOf(workspaceId, id);
      if (!intern.suspendedAt) return;
      await adminTransaction(db, async (tx) => {
        await updateIntern(tx, intern.id, { suspendedAt: null, updatedAt: new Date() });
        await recordAudit(tx, actor, { action: "intern.provision", targetType: "intern", targetId: intern.id, workspaceId });
      });
    },

    /** Issues a new host token (replacing any previous one) and returns it once. */
    async issueHostToken(actor: Actor, workspaceId: string, id: string): Promise<{ view: InternView; hostToken: string }> {
      const intern = await internOf(workspaceId, id);
      const token = generateHostToken();
      const updated = await adminTransaction(db, async (tx) => {
        const row = await updateIntern(tx, intern.id, { hostTokenHash: hashSecret(token), updatedAt: new Date() });
        await recordAudit(tx, actor, {
          action: intern.hostTokenHash ? "intern.host_token.rotate" : "intern.host_token.issue",
          targetType: "intern",
          targetId: intern.id,
          workspaceId,
        });
        return row;
      });
      if (intern.hostTokenHash) closeLink(intern.id, "host token rotated");
      return { view: await view(updated), hostToken: token };
    },

    async revokeHostToken(actor: Actor, workspaceId: string, id: string): Promise<void> {
      const intern = await internOf(workspaceId, id);
      await adminTransaction(db, async (tx) => {
        await updateIntern(tx, intern.id, { hostTokenHash: null, updatedAt: new Date() });
        await recordAudit(tx, actor, { action: "intern.host_token.revoke", targetType: "intern", targetId: intern.id, workspaceId });
      });
      closeLink(intern.id, "host token revoked");
    },
  };
}

export type InternAdmin = ReturnType<typeof createInternAdmin>;

/** Refusal of a prompt to a suspended intern. */
export function internSuspended() {
  return serviceError(Reason.INTERN_NOT_READY, "The intern is suspended; provision it to resume");
}
