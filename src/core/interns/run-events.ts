/**
 * What a host link tells the run manager: run events (in sequence order, duplicates after a reconnect
 * dropped) and the link closing. Events of a run a client reads are queued for its stream; those of a
 * paused run nobody reads are kept for the continuation, or end it.
 */
import { streamSeveredBeforeStart, internError } from "./intern-errors.js";
import type { RunEvent } from "../../gen/portico/internlink/v1/internlink_service_pb.js";
import type { InternLink } from "./link-registry.js";
import { isTerminal } from "./run-endings.js";
import { rejectedError } from "./run-admission.js";
import type { RunContext, RunLifecycle } from "./run-lifecycle.js";

/** Bytes of undelivered text a run may buffer in the core before it fails with attachment_failed. */
export const MAX_BUFFERED_BYTES_PER_RUN = 8 * 1024 * 1024;

function eventBytes(e: RunEvent["event"]): number {
  if (e.case === "content" || e.case === "reasoning") return e.value.text.length + 64;
  return 64;
}

export function createRunEvents(ctx: RunContext, lifecycle: RunLifecycle) {
  const { repo, log, later, runs } = ctx;

  function onRunEvent(link: InternLink, ev: RunEvent): void {
    const run = runs.get(ev.runId);
    if (!run || run.link !== link || run.state === "done") {
      log.debug({ runId: ev.runId, event: ev.event.case }, "event for a run this core does not relay; ignored");
      return;
    }
    const seq = Number(ev.seq);
    if (seq !== 0) {
      if (seq <= run.lastSeq) return; // duplicate after a reconnect
      if (seq !== run.lastSeq + 1) log.warn({ runId: run.id, expected: run.lastSeq + 1, got: seq }, "run event sequence gap");
      lifecycle.sequenced(run, seq);
    }
    const e = ev.event;
    if (run.state === "starting") {
      const waiter = run.startWaiter;
      switch (e.case) {
        case "started":
          lifecycle.started(run);
          waiter?.resolve();
          return;
        case "rejected":
          waiter?.reject(rejectedError(e.value));
          return;
        case "turnFailed":
          waiter?.reject(internError(e.value.reason || "turn_failed", e.value.message || "The intern failed the turn.", e.value.retryable));
          return;
        case "runEnded":
          waiter?.reject(internError("turn_failed", "The intern ended the run before it started.", true));
          return;
        default:
          // Anything else means the agent is running: treat as started and keep the event.
          lifecycle.started(run);
          waiter?.resolve();
      }
    }
    if (e.case === "started" || e.case === "rejected" || e.case === undefined) return;
    if (e.case === "model") {
      if (e.value.model && e.value.model !== run.model) {
        later(() => repo.setInternModel(run.internId, e.value.model));
      }
      lifecycle.modelReported(run, e.value.model);
    }
    if (e.case === "usage" && !run.attached) lifecycle.recordUsage(run, e.value);
    if (!run.attached) {
      if (isTerminal(e.case)) lifecycle.finishDetached(run, e);
      else if (e.case !== "model" && e.case !== "usage") run.push({ kind: "event", event: e, bytes: eventBytes(e) });
      return;
    }
    run.push({ kind: "event", event: e, bytes: eventBytes(e) });
    if (run.queuedBytes > MAX_BUFFERED_BYTES_PER_RUN) lifecycle.overflow(run);
  }

  function onLinkClosed(link: InternLink, reason: string): void {
    for (const run of [...runs.values()]) {
      if (run.link !== link) continue;
      if (run.state === "starting") {
        run.startWaiter?.reject(streamSeveredBeforeStart());
      } else if (run.state === "paused") {
        // Held across a short reconnect; the deadline still applies. An answer being delivered
        // (attached) learns of the loss from deliverAnswer ("link_lost") and leaves it paused, so no
        // "severed" marker may stay queued for the continuation after the reconnect.
        lifecycle.linkLost(run);
      } else if (run.attached) {
        run.push({ kind: "severed" });
      } else {
        later(() => lifecycle.end(run, { on: "severed" }));
      }
    }
    log.info({ internId: link.internId, reason }, "intern link closed");
  }

  return { onRunEvent, onLinkClosed };
}
