/**
 * Questions of host runs: a permission request the agent made is presented to the core (the run
 * pauses; the host's own deadline backs up the core's), and the core's answer is judged, settles the
 * request (escalating the approved command when the option says so) and presents the next one.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import type { Logger } from "pino";
import { AnswerOutcome } from "../gen/portico/internlink/v1/internlink_service_pb.js";
import { Reason } from "../contract/reasons.js";
import type { InternHostLimits } from "./options.js";
import { escalates, judgeAnswer, type PendingQuestion } from "./questions.js";
import type { Run } from "./run.js";
import type { RunTable } from "./run-table.js";
import type { HostRunControl } from "./run-control.js";

export interface RunQuestionsDeps {
  table: RunTable;
  control: HostRunControl;
  limits: InternHostLimits;
  logger: Logger;
  /** Running/paused counts changed. */
  onCapacity: () => void;
}

export function createRunQuestions(deps: RunQuestionsDeps) {
  const { table, control, limits, logger } = deps;

  /** Presents a question (the run pauses) or fails the run when the host holds too many paused runs. */
  function present(run: Run, q: PendingQuestion): void {
    if (table.pausedCount() >= limits.maxPausedRuns) {
      q.settle({ outcome: "cancelled" });
      control.failRun(run, Reason.HOST_BUSY, "the intern host holds as many paused runs as it can", true);
      return;
    }
    run.questions.presented = q;
    const value: { interactionId: string; kind: string; options: string[]; operation?: string; arguments?: JsonObject } = {
      interactionId: q.id,
      kind: "permission",
      options: q.kinds,
    };
    if (q.operation !== undefined) value.operation = q.operation;
    // What the agent asked to run goes to the caller as `tool` in the question's arguments.
    if (q.tool) value.arguments = { tool: q.tool };
    control.emit(run, { case: "question", value });
    q.timer = setTimeout(() => {
      logger.info({ runId: run.id, interactionId: q.id }, "interaction deadline passed on the host; cancelling the run");
      control.cancel(run, "deadline");
    }, run.interactionDeadlineMs);
    q.timer.unref();
    deps.onCapacity();
  }

  /** The core delivers an answer to the run's presented question. */
  function answer(runId: string, interactionId: string, value: string): AnswerOutcome {
    const run = table.get(runId);
    if (!run || run.state !== "streaming" || run.detached) return AnswerOutcome.NOT_PENDING;
    const q = run.questions.presented;
    if (!q || q.id !== interactionId) return AnswerOutcome.NOT_PENDING;
    const judged = judgeAnswer(q, value);
    if (judged.kind === "cancel") {
      control.cancel(run, "caller");
      return AnswerOutcome.ACCEPTED;
    }
    if (judged.kind === "not_offered") return AnswerOutcome.NOT_OFFERED;
    if (escalates(q, judged.option) && !run.escalation.grant(q.toolCallId, q.rawInput, judged.option === "allow_always")) {
      logger.info({ runId: run.id }, "the approved tool call named no command; its terminals stay sandboxed");
    }
    const next = run.questions.advance();
    q.settle({ outcome: "selected", optionId: judged.optionId });
    if (next) present(run, next);
    deps.onCapacity();
    return AnswerOutcome.ACCEPTED;
  }

  return { present, answer };
}
