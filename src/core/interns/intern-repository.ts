/**
 * Interns, their sessions, runs and interactions in the database. Every state change that two
 * requests (or two core processes) could race on is a conditional update (`updateMany` with the
 * expected state in the WHERE clause), so exactly one of them wins on SQLite and PostgreSQL alike.
 */
import type { Db } from "../../db/client.js";
import { isUniqueViolation } from "../../db/client.js";
import { Prisma } from "../../db/prisma.js";
import { generateHostToken, hashSecret } from "../identity/keys.js";
import { usd } from "../catalog/cost.js";

export type RunState = "streaming" | "paused" | "finished" | "cancelled" | "ended" | "failed";
export const TERMINAL_RUN_STATES: readonly RunState[] = ["finished", "cancelled", "ended", "failed"];
export type InteractionState = "pending" | "delivering" | "answered" | "expired" | "cancelled" | "void";

export interface UsageRecord {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost?: number;
  cached_tokens?: number;
}

export class InternRegistryError extends Error {}

const INTERN_NAME = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;


/** A run's usage from the sums of its generations' columns (cost as the account pays it; null sums count as 0). */
export function usageOfSums(sum: {
  promptTokens: number | null;
  completionTokens: number | null;
  totalTokens: number | null;
  costFemtoUsd: bigint | number | null;
  cachedTokens?: number | null;
}): UsageRecord {
  const prompt = sum.promptTokens ?? 0;
  const completion = sum.completionTokens ?? 0;
  const out: UsageRecord = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: sum.totalTokens ?? prompt + completion };
  if (sum.costFemtoUsd !== null) out.cost = usd(BigInt(sum.costFemtoUsd));
  if (sum.cachedTokens !== null && sum.cachedTokens !== undefined) out.cached_tokens = sum.cachedTokens;
  return out;
}

export function createInternRepository(db: Db) {
  return {
    // ---------- registry ----------

    /** Creates an intern and returns its host token once (only its SHA-256 is stored). */
    async createIntern(input: { workspaceId: string; name: string }) {
      if (!INTERN_NAME.test(input.name) || input.name.length > 64) {
        throw new InternRegistryError("name must be lowercase letters, digits and single dashes, starting with a letter (at most 64)");
      }
      const workspace = await db.workspace.findUnique({ where: { id: input.workspaceId } });
      if (!workspace || workspace.deletedAt) throw new InternRegistryError("workspace not found");
      const token = generateHostToken();
      try {
        const intern = await db.intern.create({
          data: {
            organizationId: workspace.organizationId,
            workspaceId: workspace.id,
            name: input.name,
            hostTokenHash: hashSecret(token),
          },
        });
        return { intern, hostToken: token };
      } catch (err) {
        if (isUniqueViolation(err)) throw new InternRegistryError(`an intern named "${input.name}" already exists in that workspace`);
        throw err;
      }
    },

    async findInternByName(workspaceId: string, name: string) {
      return db.intern.findUnique({ where: { workspaceId_name: { workspaceId, name } } });
    },

    async findIntern(id: string) {
      return db.intern.findUnique({ where: { id } });
    },

    async listInterns(workspaceId?: string) {
      return db.intern.findMany({ where: workspaceId ? { workspaceId } : {}, orderBy: { createdAt: "asc" } });
    },

    /** Revokes the host token; with `issue` a new one is returned (once). */
    async revokeHostToken(id: string, issue = false): Promise<string | null> {
      const token = issue ? generateHostToken() : null;
      const res = await db.intern.updateMany({
        where: { id },
        data: { hostTokenHash: token ? hashSecret(token) : null, updatedAt: new Date() },
      });
      if (res.count === 0) throw new InternRegistryError("no intern with that id");
      return token;
    },

    async findInternByTokenHash(hash: string) {
      return db.intern.findUnique({ where: { hostTokenHash: hash } });
    },

    async markAttached(id: string, instance: string, agentName?: string) {
      await db.intern.updateMany({
        where: { id },
        data: {
          status: "attached",
          hostInstance: instance,
          hostAttachedAt: new Date(),
          updatedAt: new Date(),
          ...(agentName ? { agentName } : {}),
        },
      });
    },

    /** Marks detached only if this instance still holds the link (another core may have taken it). */
    async markDetached(id: string, instance: string) {
      await db.intern.updateMany({
        where: { id, hostInstance: instance },
        data: { status: "detached", updatedAt: new Date() },
      });
    },

    async setInternModel(id: string, model: string) {
      // SQL's NOT (model = x) is not true for a NULL model: name that case.
      await db.intern.updateMany({ where: { id, OR: [{ model: null }, { NOT: { model } }] }, data: { model, updatedAt: new Date() } });
    },

    // ---------- sessions and the turn lock ----------

    async ensureSession(internId: string, sessionKey: string) {
      const existing = await db.internSession.findUnique({ where: { internId_sessionKey: { internId, sessionKey } } });
      if (existing) return existing;
      try {
        return await db.internSession.create({ data: { internId, sessionKey } });
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
        const again = await db.internSession.findUnique({ where: { internId_sessionKey: { internId, sessionKey } } });
        if (!again) throw err;
        return again;
      }
    },

    /** Creates a brand-new session (a freshly minted key) already locked by runId: one statement. */
    async createLockedSession(internId: string, sessionKey: string, runId: string) {
      return db.internSession.create({ data: { internId, sessionKey, activeRunId: runId } });
    },

    /** Takes the session's turn lock for runId; false when another run holds it. */
    async lockSession(sessionId: string, runId: string): Promise<boolean> {
      const res = await db.internSession.updateMany({
        where: { id: sessionId, activeRunId: null },
        data: { activeRunId: runId, updatedAt: new Date() },
      });
      return res.count === 1;
    },

    async unlockSession(sessionId: string, runId: string) {
      await db.internSession.updateMany({
        where: { id: sessionId, activeRunId: runId },
        data: { activeRunId: null, updatedAt: new Date() },
      });
    },

    /** Whether a run was ever started in the intern's session named sessionKey (false for an unknown key). */
    async sessionHasRuns(internId: string, sessionKey: string): Promise<boolean> {
      return (await db.internRun.count({ where: { internId, sessionKey }, take: 1 })) > 0;
    },

    async findSession(id: string) {
      return db.internSession.findUnique({ where: { id } });
    },

    async findSessionByKey(internId: string, sessionKey: string) {
      return db.internSession.findUnique({ where: { internId_sessionKey: { internId, sessionKey } } });
    },

    /** The session's most recent run, or null when it never had one. */
    async latestRunOfSession(sessionId: string) {
      return db.internRun.findFirst({ where: { sessionId }, orderBy: [{ createdAt: "desc" }, { id: "desc" }] });
    },

    // ---------- runs ----------

    /** A new streaming run owned by `owner` (this process's instance id) until `leaseUntil`. */
    async createRun(input: { id: string; internId: string; sessionId: string; sessionKey: string; approvalMode: string; owner: string; leaseUntil: Date }) {
      return db.internRun.create({ data: { ...input, state: "streaming" } });
    },

    /** Extends the lease of the live runs `owner` still owns among `ids`. */
    async renewRunLeases(owner: string, ids: string[], leaseUntil: Date): Promise<void> {
      for (let i = 0; i < ids.length; i += 500) {
        await db.internRun.updateMany({
          where: { id: { in: ids.slice(i, i + 500) }, owner, state: { in: ["streaming", "paused"] } },
          data: { leaseUntil },
        });
      }
    },

    /** This process now relays the live run (a host re-attached here holding it). */
    async claimRun(id: string, owner: string, leaseUntil: Date): Promise<void> {
      await db.internRun.updateMany({ where: { id, state: { in: ["streaming", "paused"] } }, data: { owner, leaseUntil } });
    },

    /** Streaming runs whose owner's lease has passed: no live process relays them. */
    async ownerlessRuns(now: Date, limit = 100) {
      return db.internRun.findMany({
        where: { state: "streaming", leaseUntil: { lt: now } },
        orderBy: { leaseUntil: "asc" },
        take: limit,
      });
    },

    async findRun(id: string) {
      return db.internRun.findUnique({ where: { id } });
    },

    async runsOfIntern(internId: string, states: RunState[]) {
      return db.internRun.findMany({ where: { internId, state: { in: states } } });
    },

    /** Moves a run from one of `from` to `to`; false when it was in another state. */
    async transitionRun(
      id: string,
      from: RunState[],
      to: RunState,
      extra: { endReason?: string; usage?: UsageRecord | null; model?: string | null; lastSeq?: number } = {},
    ): Promise<boolean> {
      const terminal = TERMINAL_RUN_STATES.includes(to);
      const data: Prisma.InternRunUpdateManyMutationInput = { state: to, updatedAt: new Date() };
      if (terminal) data.endedAt = new Date();
      if (extra.endReason !== undefined) data.endReason = extra.endReason;
      if (extra.usage) data.usage = extra.usage as unknown as Prisma.InputJsonValue;
      if (extra.model) data.model = extra.model;
      if (extra.lastSeq !== undefined) data.lastSeq = extra.lastSeq;
      if (!terminal) return (await db.internRun.updateMany({ where: { id, state: { in: from } }, data })).count === 1;
      // The one write of every run's end: the run's model credential (run-credentials.ts) is revoked with it, in
      // the same transaction (the end and the revocation become visible together).
      return db.$transaction(async (tx) => {
        const res = await tx.internRun.updateMany({ where: { id, state: { in: from } }, data });
        if (res.count !== 1) return false;
        await tx.internRunCredential.updateMany({ where: { runId: id, revokedAt: null }, data: { revokedAt: data.endedAt as Date } });
        return true;
      });
    },

    /**
     * The usage of a run's model calls made through Portico (docs/interns.md, "Model calls through Portico"): the
     * sum of the generations linked to it, cost as the account pays it; undefined when it has none.
     */
    async generationUsageOfRun(runId: string): Promise<UsageRecord | undefined> {
      const agg = await db.generation.aggregate({
        where: { internRunId: runId },
        _count: { _all: true },
        _sum: { promptTokens: true, completionTokens: true, totalTokens: true, cachedTokens: true, costFemtoUsd: true },
      });
      if (agg._count._all === 0) return undefined;
      return usageOfSums(agg._sum);
    },

    // ---------- interactions ----------

    async createInteraction(input: {
      id: string;
      runId: string;
      kind: string;
      operation: string | null;
      options: string[];
      deadlineAt: Date;
      /** The tool call's arguments object as the stream presents it. */
      arguments: Prisma.InputJsonObject;
    }) {
      return db.internInteraction.create({
        data: { ...input, options: input.options as unknown as Prisma.InputJsonValue, state: "pending" },
      });
    },

    /** The unanswered (or being answered) questions of these runs. */
    async pendingInteractionsOfRuns(runIds: string[]) {
      if (runIds.length === 0) return [];
      return db.internInteraction.findMany({ where: { runId: { in: runIds }, state: { in: ["pending", "delivering"] } } });
    },

    async findInteraction(id: string) {
      return db.internInteraction.findUnique({ where: { id } });
    },

    async pendingInteractionOfRun(runId: string) {
      return db.internInteraction.findFirst({ where: { runId, state: { in: ["pending", "delivering"] } } });
    },

    /** Claims a pending, unexpired interaction for delivery. Exactly one concurrent caller wins. */
    async claimInteraction(id: string, now: Date): Promise<boolean> {
      const res = await db.internInteraction.updateMany({
        where: { id, state: "pending", deadlineAt: { gt: now } },
        data: { state: "delivering", answeredAt: now },
      });
      return res.count === 1;
    },

    async setInteractionState(id: string, from: InteractionState[], to: InteractionState, answer?: string): Promise<boolean> {
      const data: Prisma.InternInteractionUpdateManyMutationInput = { state: to };
      if (answer !== undefined) data.answer = answer;
      if (to === "pending") data.answeredAt = null;
      const res = await db.internInteraction.updateMany({ where: { id, state: { in: from } }, data });
      return res.count === 1;
    },

    /** Interactions whose deadline passed while still pending (for the sweep). */
    async expiredInteractions(now: Date, limit = 100) {
      return db.internInteraction.findMany({
        where: { state: "pending", deadlineAt: { lte: now } },
        orderBy: { deadlineAt: "asc" },
        take: limit,
      });
    },

    /** Interactions stuck in delivery (a process died mid-answer) go back to pending. */
    async releaseStaleDeliveries(olderThan: Date) {
      await db.internInteraction.updateMany({
        where: { state: "delivering", answeredAt: { lt: olderThan } },
        data: { state: "pending", answeredAt: null },
      });
    },

    async voidInteractionsOfRun(runId: string) {
      await db.internInteraction.updateMany({
        where: { runId, state: { in: ["pending", "delivering"] } },
        data: { state: "void" },
      });
    },
  };
}

export type InternRepository = ReturnType<typeof createInternRepository>;
