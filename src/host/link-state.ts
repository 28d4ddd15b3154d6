/**
 * The host's side of its link to the core, as the engine sees it: events taken round-robin across
 * runs, and what a broken link does to runs (streaming ones are cancelled, paused ones are held for a
 * grace period and announced in Hello, then resume or are dropped as the core's Welcome says).
 */
import type { Logger } from "pino";
import type { HeldRun, RunEvent } from "../gen/portico/internlink/v1/internlink_service_pb.js";
import { takeRoundRobin } from "./event-queue.js";
import type { InternHostLimits } from "./options.js";
import type { RunTable } from "./run-table.js";
import type { HostRunControl } from "./run-control.js";

export interface LinkStateDeps {
  table: RunTable;
  control: HostRunControl;
  limits: InternHostLimits;
  logger: Logger;
  onReadable: () => void;
  onCapacity: () => void;
}

export function createLinkState(deps: LinkStateDeps) {
  const { table, control, limits, logger } = deps;
  let rrCursor = 0;
  let linkIsUp = true;

  /** Next event for the link, round-robin across runs; undefined when none. */
  function takeEvent(): RunEvent | undefined {
    const taken = takeRoundRobin(table.all(), rrCursor, (r) => (r.held || r.detached ? undefined : r.events));
    if (!taken) return undefined;
    rrCursor = taken.cursor;
    const run = taken.owner;
    if (run.state === "done" && run.events.length === 0) table.delete(run.id);
    return taken.event;
  }

  /** The link broke: streaming runs are cancelled, paused runs held for the grace period. */
  function linkDown(): void {
    if (!linkIsUp) return;
    linkIsUp = false;
    for (const run of table.all()) {
      if (run.detached || run.held) continue;
      const paused = run.questions.presented !== undefined && run.state === "streaming";
      const finishedWithEvents = run.state === "done" && run.events.length > 0;
      if (paused) {
        run.held = true;
        run.heldTimer = setTimeout(() => {
          logger.info({ runId: run.id }, "held run not reclaimed in time; cancelling it");
          control.cancel(run, "link");
          table.dropRun(run);
        }, limits.heldRunGraceMs);
        run.heldTimer.unref();
      } else if (finishedWithEvents) {
        table.dropRun(run);
      } else {
        logger.info({ runId: run.id }, "link broke while the run was streaming; cancelling it");
        table.dropRun(run);
        control.cancel(run, "link");
      }
    }
  }

  /** Runs to announce in Hello after a reconnect. */
  function heldRuns(): HeldRun[] {
    return table
      .all()
      .filter((r) => r.held && !r.detached)
      .map((r) => ({ runId: r.id, lastSeq: r.events.lastTakenSeq, pendingInteractionId: r.questions.presented?.id ?? "" }) as HeldRun);
  }

  /** Welcome arrived: held runs resume, except those the core cancels. */
  function linkUp(cancelRunIds: readonly string[]): void {
    linkIsUp = true;
    const drop = new Set(cancelRunIds);
    for (const run of table.all()) {
      if (!run.held) continue;
      if (run.heldTimer) clearTimeout(run.heldTimer);
      run.held = false;
      if (drop.has(run.id)) {
        control.cancel(run, "operator");
        table.dropRun(run);
      }
    }
    deps.onReadable();
    deps.onCapacity();
  }

  return { takeEvent, linkDown, heldRuns, linkUp };
}
