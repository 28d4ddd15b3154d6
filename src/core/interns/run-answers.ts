/**
 * The answer protocol: a run pauses on a question (recorded with its deadline before the client sees
 * it), and an answer, on any request, is claimed (one winner), delivered over the link that holds the
 * run, and either resumes the run or is refused with the reason the state gives.
 */
import { randomUUID } from "node:crypto";
import { AnswerOutcome, type Question } from "../../gen/portico/internlink/v1/internlink_service_pb.js";
import type { Intern } from "../../db/prisma.js";
import { answerNotAccepted, attachmentFailed, interactionNotPending, interactionUnknown, internTimeout, internUnreachable } from "./intern-errors.js";
import { TERMINAL_RUN_STATES, type RunState } from "./intern-repository.js";
import type { ActiveRun } from "./active-run.js";
import type { RunContext, RunLifecycle } from "./run-lifecycle.js";
import type { RunDeadlines } from "./run-deadlines.js";
import { questionArguments } from "./sessions.js";

export interface AnswerInput {
  intern: Intern;
  sessionKey: string;
  interactionId: string;
  answer: string;
  signal: AbortSignal;
}

export function createRunAnswers(ctx: RunContext, lifecycle: RunLifecycle, deadlines: RunDeadlines) {
  const { repo, links, config, runs } = ctx;

  /**
   * The error for a question that is no longer pending while its run has not (yet) ended. Per the
   * description, 409 interaction_not_pending is for a run that has ended: a question expired by its
   * deadline or voided/cancelled with its run. One answered (or being answered) while the run lives on
   * is simply no pending question: 404 interaction_unknown.
   */
  function notPending(state: string): Error {
    return state === "answered" || state === "delivering" ? interactionUnknown() : interactionNotPending();
  }

  async function answer(input: AnswerInput): Promise<ActiveRun> {
    const now = new Date();
    const inter = await repo.findInteraction(input.interactionId);
    if (!inter) throw interactionUnknown();
    const row = await repo.findRun(inter.runId);
    if (!row || row.internId !== input.intern.id || row.sessionKey !== input.sessionKey) throw interactionUnknown();
    if (inter.state === "pending" && inter.deadlineAt.getTime() <= now.getTime()) {
      await deadlines.expireInteraction(inter.id, row.id);
      throw interactionNotPending();
    }
    if (TERMINAL_RUN_STATES.includes(row.state as RunState)) {
      if (row.endReason === "attachment_failed") throw attachmentFailed();
      throw interactionNotPending();
    }
    if (inter.state !== "pending") throw notPending(inter.state);
    const options = Array.isArray(inter.options) ? (inter.options as string[]) : [];
    if (input.answer !== "cancel" && !options.includes(input.answer)) throw answerNotAccepted();
    const link = links.get(input.intern.id);
    if (!link) throw internUnreachable();
    const run = runs.get(row.id);
    // This process holds the intern's link, so every live run of it is in memory: a missing one is ending.
    if (!run || run.state === "done") throw interactionNotPending();
    if (run.link !== link) throw internUnreachable();
    if (run.attached) throw notPending("delivering");
    if (!(await repo.claimInteraction(inter.id, now))) throw notPending((await repo.findInteraction(inter.id))?.state ?? "void");
    if (run.state !== "paused" || !lifecycle.attach(run)) {
      await repo.setInteractionState(inter.id, ["delivering"], "pending");
      throw notPending("delivering");
    }
    const outcome = await link.deliverAnswer(run.id, inter.id, input.answer, config.startTimeoutMs);
    if (outcome === AnswerOutcome.ACCEPTED) {
      await lifecycle.answered(run, inter.id, input.answer);
      return run;
    }
    lifecycle.unattach(run);
    if (outcome === AnswerOutcome.NOT_PENDING) {
      await repo.setInteractionState(inter.id, ["delivering"], "void");
      await lifecycle.end(run, { on: "notPending" });
      throw interactionNotPending();
    }
    await repo.setInteractionState(inter.id, ["delivering"], "pending");
    if (run.interaction && run.interaction.deadlineAt.getTime() <= Date.now()) await deadlines.expireInteraction(inter.id, run.id);
    if (outcome === AnswerOutcome.NOT_OFFERED) throw answerNotAccepted();
    if (outcome === "timeout") throw internTimeout();
    throw internUnreachable();
  }

  /**
   * Records the pause (interaction with its deadline) before the question reaches the client; false
   * when the run ended meanwhile (the client left or the link broke while the pause was recorded).
   */
  async function pause(run: ActiveRun, q: Question): Promise<boolean> {
    const deadlineAt = new Date(Date.now() + config.interactionDeadlineMs);
    const id = q.interactionId || randomUUID();
    const args = questionArguments({ kind: q.kind, operation: q.operation, options: q.options, extra: q.arguments }, deadlineAt);
    const recorded = await lifecycle.recordPause(run, {
      id,
      kind: q.kind || "permission",
      operation: q.operation ?? null,
      options: q.options,
      deadlineAt,
      arguments: args,
    });
    if (recorded) deadlines.scheduleDeadline(run);
    return recorded;
  }

  return { answer, pause };
}
