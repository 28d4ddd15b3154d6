/**
 * The state changes of a host run: queue an event for the link (an overflow fails the run), report the
 * agent's model, cancel (session/cancel, then a stop of the agent if it does not confirm in time) and
 * finish. What the link asks (cancelRun) and what the driver and question handling decide all end here.
 */
import type { Logger } from "pino";
import { CancelReason } from "../gen/portico/internlink/v1/internlink_service_pb.js";
import { Reason, ruleOf } from "../contract/reasons.js";
import { acpRuntime } from "./acp-runtime.js";
import type { EventInit } from "./event-queue.js";
import type { InternHostLimits } from "./options.js";
import type { CancelCause, Run } from "./run.js";
import type { RunTable } from "./run-table.js";

export interface RunControlDeps {
  table: RunTable;
  limits: InternHostLimits;
  logger: Logger;
  /** Events became available to the link. */
  onReadable: () => void;
  /** Running/paused counts changed. */
  onCapacity: () => void;
}

export function createRunControl(deps: RunControlDeps) {
  const { table, limits, logger } = deps;

  /** Queues an event of the run for the link. */
  function emit(run: Run, ev: EventInit): void {
    if (run.detached) return;
    const res = run.events.push(ev);
    if (res === "overflow") {
      logger.warn({ runId: run.id, queuedBytes: run.events.queuedBytes }, "run event queue overflow; failing the run");
      failRun(run, Reason.ATTACHMENT_FAILED, "the run produced more output than the intern host retains", false);
      return;
    }
    if (res === "queued") deps.onReadable();
  }

  /** Tells the core the turn failed and cancels the run if it still runs. */
  function failRun(run: Run, reason: Reason, message: string, retryable: boolean): void {
    emit(run, { case: "turnFailed", value: turnFailed(reason, message, retryable) });
    if (run.state === "starting" || run.state === "streaming") cancel(run, "failed");
  }

  /** The agent reported its model: a model event when it changed. */
  function reportModel(run: Run, model: string): void {
    if (run.model === model) return;
    run.model = model;
    emit(run, { case: "model", value: { model } });
  }

  function finishRun(run: Run): void {
    if (run.state === "done") return;
    run.state = "done";
    run.questions.cancelAll();
    // The held timer stays: a finished run whose events wait for a reconnect is dropped after the grace.
    for (const t of [run.cancelTimer, run.durationTimer]) if (t) clearTimeout(t);
    const session = run.session;
    if (session.run === run) session.run = undefined;
    session.lastUsed = Date.now();
    // Kept until the link has taken its last event (takeEvent deletes it then).
    run.escalation.clear();
    if (run.detached || run.events.length === 0) table.delete(run.id);
    logger.info({ runId: run.id }, "run finished");
    deps.onCapacity();
  }

  function cancel(run: Run, cause: CancelCause): void {
    if (run.state === "done" || run.cancelCause) return;
    run.cancelCause = cause;
    if (run.state === "starting") return; // driveRun checks cancelCause once the agent is up
    run.state = "cancelling";
    const agent = run.session.agent;
    // ACP order: session/cancel first, then a "cancelled" outcome for every pending permission.
    if (agent && !agent.dead) agent.conn.agent.notify(acpRuntime().methods.agent.session.cancel, { sessionId: agent.acpSessionId }).catch(() => {});
    run.questions.cancelAll();
    deps.onCapacity();
    if (!agent || agent.dead) return;
    run.cancelTimer = setTimeout(() => {
      if (run.state === "done") return;
      logger.warn({ runId: run.id }, "agent did not confirm the cancel in time; stopping its process");
      void agent.channel.dispose(0);
    }, limits.cancelGraceMs);
    run.cancelTimer.unref();
  }

  /** The core cancels the run. */
  function cancelRun(runId: string, reason: CancelReason): void {
    const run = table.get(runId);
    if (!run || run.state === "done") return;
    const cause: CancelCause =
      reason === CancelReason.CLIENT_DISCONNECTED ? "client" : reason === CancelReason.DEADLINE ? "deadline" : reason === CancelReason.CALLER ? "caller" : "operator";
    cancel(run, cause);
  }

  return { emit, failRun, reportModel, finishRun, cancel, cancelRun };
}

export type HostRunControl = ReturnType<typeof createRunControl>;

/**
 * A TurnFailed for a reason of the one error table: `reason_value`, plus the wire string and the
 * (deprecated) HTTP number cores of earlier versions read.
 */
export function turnFailed(reason: Reason, message: string, retryable: boolean) {
  const rule = ruleOf(reason);
  return { code: rule.status, reason: rule.wire, message, retryable, reasonValue: reason };
}

/** A RunRejected for a reason of the one error table (busy, timeout, turn_failed), with its wire string for earlier cores. */
export function rejected(reason: Reason, message: string) {
  return { reason: ruleOf(reason).wire, message, reasonValue: reason };
}
