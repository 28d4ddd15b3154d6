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
import { ManagementFields as F } from "../../contract/requests/management.js";
import { checkField, isUuid, stateConflict } from "../management/rules.js";
import { internNotFound } from "./intern-errors.js";
import type { LinkRegistry } from "./link-registry.js";
import { usageOfSums, type UsageRecord } from "./intern-repository.js";
import { INVALID_CURSOR } from "../../contract/requests/paging.js";
import { checkPage, createOrdering, encodeCursor, findArgs, keysetWhere, pageOf, type PageInput } from "../paging.js";

/** Newest first. */
export const INTERNS_ORDER = createOrdering("interns", [
  { field: "createdAt", dir: "desc", kind: "date" },
  { field: "id", dir: "desc", kind: "string" },
]);

export { INTERN_NAME } from "../../contract/requests/management.js";
export const INTERN_STATUSES = ["running", "awaiting_host", "stopped"] as const;

export interface InternView {
  intern: Intern;
  /** Runs streaming or paused. */
  live: InternRun[];
  /** The questions paused runs wait for. */
  pending: InternInteraction[];
  /** Of the live runs whose model calls went through Portico: the sum of their generations so far, by run id. */
  usage: Map<string, UsageRecord>;
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
  if (s.name !== undefined) out.name = checkField(F.internName, "name", s.name);
  if (s.description !== undefined) out.description = s.description === null ? null : checkField(F.internDescription, "description", s.description);
  if (s.instructions !== undefined) out.instructions = s.instructions === null ? null : checkField(F.internInstructions, "instructions", s.instructions);
  if (s.model !== undefined) out.model = s.model === null ? null : checkField(F.internModel, "model", s.model);
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
  /** Writes the generations this process has queued, so that a live run's usage counts its latest calls. */
  flushGenerations?: () => Promise<void>;
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
    return { intern, live, pending, usage: await liveUsage(live.map((r) => r.id)) };
  };

  /** The usage of each of `runIds` that made model calls through Portico: one grouped query over their generations. */
  const liveUsage = async (runIds: string[]): Promise<Map<string, UsageRecord>> => {
    const out = new Map<string, UsageRecord>();
    if (runIds.length === 0) return out;
    await deps.flushGenerations?.();
    const groups = await db.generation.groupBy({
      by: ["internRunId"],
      where: { internRunId: { in: runIds } },
      _sum: { promptTokens: true, completionTokens: true, totalTokens: true, costFemtoUsd: true },
    });
    for (const g of groups) {
      if (g.internRunId === null) continue;
      out.set(g.internRunId, usageOfSums(g._sum));
    }
    return out;
  };

  const nameTaken = (name: string) => stateConflict(`An intern named "${name}" already exists in this workspace`);

  return {
    view,

    async get(workspaceId: string, id: string): Promise<InternView> {
      return view(await internOf(workspaceId, id));
    },

    /**
     * Newest first, by the one paging rule (src/core/paging.ts). A bare intern id is still accepted as
     * `starting_after` (the cursor this list gave before every list shared one rule).
     */
    async list(workspaceId: string, q: PageInput & { statuses: string[] }) {
      let startingAfter = q.startingAfter;
      if (startingAfter !== undefined && isUuid(startingAfter)) {
        const row = await db.intern.findFirst({ where: { id: startingAfter, workspaceId } });
        if (!row) throw invalidArgument("starting_after", INVALID_CURSOR);
        startingAfter = encodeCursor(INTERNS_ORDER, row);
      }
      const page = checkPage({ ...q, startingAfter }, INTERNS_ORDER);
      const statuses = [...new Set(q.statuses)];
      if (statuses.length > 8) throw invalidArgument("status", "status names at most 8 values");
      const unknown = statuses.find((s) => !(INTERN_STATUSES as readonly string[]).includes(s));
      if (unknown !== undefined) throw invalidArgument("status", `status values are ${INTERN_STATUSES.join(", ")}`);
      const where: Record<string, unknown> = { workspaceId };
      const and: Record<string, unknown>[] = [];
      const keyset = keysetWhere(INTERNS_ORDER, page);
      if (keyset) and.push(keyset);
      if (statuses.length > 0) {
        const or: Record<string, unknown>[] = [];
        if (statuses.includes("stopped")) or.push({ suspendedAt: { not: null } });
        if (statuses.includes("running")) or.push({ suspendedAt: null, status: "attached" });
        if (statuses.includes("awaiting_host")) or.push({ suspendedAt: null, NOT: { status: "attached" } });
        and.push({ OR: or });
      }
      if (and.length > 0) where.AND = and;
      const rows = await db.intern.findMany({ where, ...findArgs(INTERNS_ORDER, page) });
      const { items, ...more } = pageOf(rows, INTERNS_ORDER, page);
      return { items: await Promise.all(items.map(view)), ...more };
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
