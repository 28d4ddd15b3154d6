/**
 * Questions (manual mode permission requests): one presented at a time per run, the rest waiting
 * in order; answers are judged against the kinds that were offered.
 */
import type * as acp from "@agentclientprotocol/sdk";
import type { JsonObject } from "@bufbuild/protobuf";
import { isOptionKind, optionIdForKind, type OfferedOption, type OptionKind } from "./mapping.js";

export interface PendingQuestion {
  id: string;
  toolCallId: string;
  /** The tool call's raw input (the command an escalation binds to). */
  rawInput: unknown;
  options: OfferedOption[];
  kinds: OptionKind[];
  operation: string | undefined;
  /** What the agent asked to run (title, kind, command, input), for the caller; see requestedTool. */
  tool?: JsonObject | undefined;
  settle: (outcome: acp.RequestPermissionOutcome) => void;
  timer?: NodeJS.Timeout | undefined;
}

export type AnswerJudgement = { kind: "cancel" } | { kind: "not_offered" } | { kind: "selected"; option: OptionKind; optionId: string };

/** What an answer value means for a question: cancel the run, not offered, or a selected option. */
export function judgeAnswer(q: Pick<PendingQuestion, "options" | "kinds">, value: string): AnswerJudgement {
  if (value === "cancel") return { kind: "cancel" };
  if (!isOptionKind(value) || !q.kinds.includes(value)) return { kind: "not_offered" };
  const optionId = optionIdForKind(q.options, value);
  return optionId ? { kind: "selected", option: value, optionId } : { kind: "not_offered" };
}

/** True when an allow answer to this question escalates a shell command. */
export function escalates(q: Pick<PendingQuestion, "operation">, option: OptionKind): boolean {
  return option.startsWith("allow") && (q.operation === "shell" || q.operation === undefined);
}

export class QuestionQueue {
  presented: PendingQuestion | undefined;
  private waiting: PendingQuestion[] = [];

  /** Queues a question; true when it should be presented now (nothing else is). */
  add(q: PendingQuestion): boolean {
    if (this.presented) {
      this.waiting.push(q);
      return false;
    }
    return true;
  }

  /** The presented question was answered: returns the next one to present. */
  advance(): PendingQuestion | undefined {
    this.presented = undefined;
    return this.waiting.shift();
  }

  /** Forgets a question (its request was aborted); true when it was the presented one. */
  remove(q: PendingQuestion): boolean {
    this.waiting = this.waiting.filter((w) => w !== q);
    if (this.presented !== q) return false;
    this.presented = undefined;
    return true;
  }

  /** Settles every question as cancelled. */
  cancelAll(): void {
    const qs = [...(this.presented ? [this.presented] : []), ...this.waiting];
    this.presented = undefined;
    this.waiting = [];
    for (const q of qs) q.settle({ outcome: "cancelled" });
  }
}
