/**
 * Who relays a live run, in the database: each run row names its owner (the instance id of the core
 * process that relays it) and a lease (`leaseUntil`) the owner renews while the run is in its memory,
 * including while the write of its end is being retried. A streaming run whose lease has passed is
 * relayed by no live process (its process died, or lost it): any core's sweep ends it (`owner_lost`),
 * frees its session and tells the intern's host to cancel it, without waiting for a host to re-attach.
 *
 * Paused runs are left to their question's deadline (which any core's sweep fires) and to the host's
 * re-attachment (reconcile adopts them): an answer may still continue them after their core died.
 */
import { CancelReason } from "../../gen/portico/internlink/v1/internlink_service_pb.js";
import type { RunContext, RunLifecycle } from "./run-lifecycle.js";
import type { RunDeadlines } from "./run-deadlines.js";

export function createRunOwnership(ctx: RunContext, lifecycle: RunLifecycle, deadlines: RunDeadlines) {
  const { repo, links, log, later, runs } = ctx;
  let renewing = false;

  /** Renews the lease of every run this process relays or still has to write the end of. */
  async function renew(): Promise<void> {
    if (renewing || ctx.closed()) return;
    const ids = [...runs.keys(), ...ctx.unwrittenEnds];
    if (ids.length === 0) return;
    renewing = true;
    try {
      await lifecycle.renewLeases(ids);
    } catch (err) {
      if (!ctx.closed()) log.warn({ err: { message: (err as Error).message } }, "could not renew the leases of live runs");
    } finally {
      renewing = false;
    }
  }
  const renewer = setInterval(() => later(renew), Math.max(50, Math.floor(ctx.runLeaseMs / 3)));
  renewer.unref();

  /** Ends the streaming runs no live process owns (their lease passed). Part of every core's sweep. */
  async function endOwnerless(now: Date): Promise<void> {
    for (const row of await repo.ownerlessRuns(now)) {
      if (runs.has(row.id) || ctx.unwrittenEnds.has(row.id)) {
        // Ours (renewals failed for a while): vouch for it again rather than end it.
        later(renew);
        continue;
      }
      if (!(await lifecycle.endRow(row, ["streaming"], { on: "ownerLost" }))) continue;
      log.warn({ runId: row.id, owner: row.owner, leaseUntil: row.leaseUntil }, "ended a run no live process relays (its owner's lease passed)");
      const link = links.get(row.internId);
      if (link) link.cancelRun(row.id, CancelReason.OPERATOR);
      else await deadlines.cancelElsewhere(row.internId, row.id, CancelReason.OPERATOR);
    }
  }

  return {
    renew,
    endOwnerless,
    stop(): void {
      clearInterval(renewer);
    },
  };
}

export type RunOwnership = ReturnType<typeof createRunOwnership>;
