/**
 * Sessions as callers see them: read one with its live (or latest) run and pending question, and
 * cancel the run holding it, wherever that run is relayed.
 */
import { CancelReason } from "../../gen/portico/internlink/v1/internlink_service_pb.js";
import type { Intern } from "../../db/prisma.js";
import { noRunToCancel, sessionNotFound } from "./intern-errors.js";
import { TERMINAL_RUN_STATES, type RunState } from "./intern-repository.js";
import type { RunContext, RunLifecycle } from "./run-lifecycle.js";
import type { RunDeadlines } from "./run-deadlines.js";
import { sessionToProto } from "./sessions.js";

export function createRunSessions(ctx: RunContext, lifecycle: RunLifecycle, deadlines: RunDeadlines, brand: string) {
  const { repo, links, log, runs } = ctx;

  async function sessionOf(intern: Intern, sessionKey: string) {
    const session = await repo.findSessionByKey(intern.id, sessionKey);
    if (!session) throw sessionNotFound();
    return session;
  }

  /** The session with its live (or latest) run and the question it waits for. */
  async function getSession(intern: Intern, sessionKey: string) {
    const session = await sessionOf(intern, sessionKey);
    const held = session.activeRunId ? await repo.findRun(session.activeRunId) : null;
    const run = held && !TERMINAL_RUN_STATES.includes(held.state as RunState) ? held : await repo.latestRunOfSession(session.id);
    const pending = run && run.state === "paused" ? await repo.pendingInteractionOfRun(run.id) : null;
    // A live run's usage so far: the sum of its generations (model calls through Portico), when it has any.
    const live = run !== null && !TERMINAL_RUN_STATES.includes(run.state as RunState);
    if (live) await ctx.flushGenerations?.();
    const usage = live ? await repo.generationUsageOfRun(run.id) : undefined;
    return sessionToProto(sessionKey, run, pending, brand, usage);
  }

  /**
   * Cancels the run holding the session, streaming or paused, wherever it runs: the end is recorded first
   * (so the session is free when this returns), then the host is told, and a stream open on the run ends
   * with a run_ended error finish.
   */
  async function cancelSession(intern: Intern, sessionKey: string) {
    const session = await sessionOf(intern, sessionKey);
    const runId = session.activeRunId;
    if (!runId) throw noRunToCancel();
    const local = runs.get(runId);
    if (local && local.state !== "done") {
      log.info({ runId }, "run cancelled by a caller");
      const link = local.link;
      await lifecycle.endAndTell(local, { on: "cancelled" });
      if (link) link.cancelRun(runId, CancelReason.CALLER);
      else await deadlines.cancelElsewhere(intern.id, runId, CancelReason.CALLER);
      return getSession(intern, sessionKey);
    }
    const row = await repo.findRun(runId);
    if (!row || !(await lifecycle.endRow({ id: runId, sessionId: session.id }, ["streaming", "paused"], { on: "cancelled" }))) {
      // Already over (a stale lock): release it; there is nothing to cancel.
      await lifecycle.releaseStaleLock(session.id, runId);
      throw noRunToCancel();
    }
    log.info({ runId }, "run cancelled by a caller (relayed elsewhere)");
    // The process relaying it (if any) ends its stream; the host holding it cancels it.
    const link = links.get(intern.id);
    if (link) link.cancelRun(runId, CancelReason.CALLER);
    await deadlines.cancelElsewhere(intern.id, runId, CancelReason.CALLER);
    return getSession(intern, sessionKey);
  }

  return { getSession, cancelSession };
}
