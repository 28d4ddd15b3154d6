/**
 * Question deadlines: the timer of a paused run relayed here, and the expiry itself (also reached by
 * the sweep, an answer that comes too late, or another process). The end is recorded first, then the
 * host is told: once the intern hears of it, every request sees it.
 */
import { CancelReason } from "../../gen/portico/internlink/v1/internlink_service_pb.js";
import type { ActiveRun } from "./active-run.js";
import type { RunContext, RunLifecycle } from "./run-lifecycle.js";

export function createRunDeadlines(ctx: RunContext, lifecycle: RunLifecycle) {
  const { repo, links, cluster, log, later, runs } = ctx;

  function scheduleDeadline(run: ActiveRun): void {
    lifecycle.armDeadline(run, (interactionId) => later(() => expireInteraction(interactionId, run.id)));
  }

  async function expireInteraction(interactionId: string, runId: string): Promise<void> {
    const won = await repo.setInteractionState(interactionId, ["pending"], "expired");
    if (!won) return;
    log.info({ runId, interactionId }, "interaction deadline passed; cancelling the run");
    const run = runs.get(runId);
    if (run) {
      const link = run.link;
      await lifecycle.end(run, { on: "deadline" });
      if (link) link.cancelRun(runId, CancelReason.DEADLINE);
      // Paused without a link here: the host may have re-attached to another core.
      else await cancelElsewhere(run.internId, runId, CancelReason.DEADLINE);
      return;
    }
    const row = await repo.findRun(runId);
    if (!row) return;
    // Its question is expired above: no other question to void.
    await lifecycle.endRow({ id: runId, sessionId: row.sessionId }, ["paused", "streaming"], { on: "deadline" }, { voidQuestions: false });
    const link = links.get(row.internId);
    if (link) link.cancelRun(runId, CancelReason.DEADLINE);
    else await cancelElsewhere(row.internId, runId, CancelReason.DEADLINE);
  }

  /** The run's link is on another core process (or on none: the host's own deadline then ends it). */
  async function cancelElsewhere(internId: string, runId: string, reason: CancelReason): Promise<void> {
    await cluster.cancelRemote(internId, runId, reason).catch((err: unknown) => log.warn({ err, runId }, "could not publish a cancellation"));
  }

  return { scheduleDeadline, expireInteraction, cancelElsewhere };
}

export type RunDeadlines = ReturnType<typeof createRunDeadlines>;
