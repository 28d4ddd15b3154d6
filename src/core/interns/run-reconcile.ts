/**
 * A new link's Hello reconciled with the database: the runs the host still holds, and those it does not.
 */
import type { Hello } from "../../gen/portico/internlink/v1/internlink_service_pb.js";
import type { InternLink } from "./link-registry.js";
import { ActiveRun } from "./active-run.js";
import type { RunContext, RunLifecycle } from "./run-lifecycle.js";
import type { RunDeadlines } from "./run-deadlines.js";
import { argumentsOf } from "./sessions.js";

export function createRunReconcile(ctx: RunContext, lifecycle: RunLifecycle, deadlines: RunDeadlines) {
  const { repo, runs } = ctx;

  /**
   * Reconciles a new link's Hello with the database: held & paused → stays paused on this link;
   * paused in the database but not held → the run ended; held but unknown here → cancel it.
   * Runs still marked streaming for this intern belong to a dead link and end as stream_severed.
   */
  async function reconcile(link: InternLink, hello: Hello): Promise<string[]> {
    const held = new Map(hello.heldRuns.map((h) => [h.runId, h]));
    const cancel: string[] = [];
    const rows = await repo.runsOfIntern(link.internId, ["streaming", "paused"]);
    const known = new Set<string>();
    for (const row of rows) {
      const inMemory = runs.get(row.id);
      if (inMemory && inMemory.link && inMemory.link !== link && !inMemory.link.closed) continue;
      const h = held.get(row.id);
      if (row.state === "paused" && h) {
        known.add(row.id);
        const pending = await repo.pendingInteractionOfRun(row.id);
        if (!pending || (h.pendingInteractionId && h.pendingInteractionId !== pending.id) || Number(h.lastSeq) > row.lastSeq) {
          // The host moved on (or sent output we never got): the pause cannot be resumed.
          cancel.push(row.id);
          if (inMemory) await lifecycle.end(inMemory, { on: "overflow" });
          else await lifecycle.endRow(row, ["paused"], { on: "overflow" });
          continue;
        }
        const run =
          inMemory ??
          new ActiveRun(row.id, row.internId, row.sessionId, row.sessionKey, row.approvalMode === "manual" ? "manual" : "self-drive");
        // A run adopted here may have had a model credential: its usage is summed from its generations at its end.
        const throughGateway = ctx.gatewayUrl() !== undefined;
        lifecycle.adoptPaused(run, link, row, { id: pending.id, deadlineAt: pending.deadlineAt, arguments: argumentsOf(pending) }, throughGateway);
        deadlines.scheduleDeadline(run);
        // This process relays it now: its lease is ours to renew.
        await lifecycle.claim(run.id);
        continue;
      }
      // Not held (or streaming on a dead link): the run is over.
      const cause = row.state === "paused" ? ({ on: "hostLost" } as const) : ({ on: "severed" } as const);
      if (inMemory) {
        if (inMemory.attached && inMemory.state !== "paused") inMemory.push({ kind: "severed" });
        else await lifecycle.end(inMemory, cause);
      } else await lifecycle.endRow(row, ["streaming", "paused"], cause);
    }
    for (const id of held.keys()) if (!known.has(id)) cancel.push(id);
    return [...new Set(cancel)];
  }

  return { reconcile };
}
