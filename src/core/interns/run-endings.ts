/**
 * The intern run state machine's one transition table (the description's "Intern run" table): what
 * each cause ends a run in, the end reason recorded, and what the client's stream shows. Pure: no
 * database, no links.
 *
 *   none ──user msg──► streaming ──question──► paused ──answer accepted──► streaming
 *   streaming ──turn ended──► finished        paused ──deadline──► cancelled
 *   streaming ──turn failed──► failed         paused ──answer "cancel"──► streaming ──► ended (run_ended)
 *   streaming ──run ended──► ended            streaming ──client gone──► cancelled
 *   streaming ──link lost──► ended (stream_severed)
 */
import type { RunEvent, TurnFailed, Usage } from "../../gen/portico/internlink/v1/internlink_service_pb.js";
import { ALL_REASONS, Reason, reasonFromLegacy, reasonFromWire, ruleOf } from "../../contract/reasons.js";
import type { RunState, UsageRecord } from "./intern-repository.js";

export type TerminalCase = "turnEnded" | "turnFailed" | "runEnded";

/**
 * How the response of a run that ends is finished: `stop`, or an error chunk whose status and wire
 * string come from the reason's row in the one error table (src/contract/reasons.ts).
 */
export type RunFinish = { kind: "stop" } | ErrorFinish;

/** An error finish: the decision is `reasonValue`; `code` and `reason` are its row's status and wire string. */
export interface ErrorFinish {
  kind: "error";
  reasonValue: Reason;
  code: number;
  reason: string;
  message: string;
  retryable: boolean;
}

/** The error finish of a reason, its status and wire string read from the one table. */
export function errorOf(reason: Reason, message: string, retryable: boolean): ErrorFinish {
  const rule = ruleOf(reason);
  return { kind: "error", reasonValue: reason, code: rule.status, reason: rule.wire, message, retryable };
}

/** A run's end: the state recorded, its end reason and what the client's stream shows. */
export interface RunEnding {
  state: RunState;
  endReason: string;
  finish: RunFinish;
}

/** What ends a live run: a terminal event from the host, or something the core sees on its own. */
export type EndingCause =
  | { on: "turnEnded"; stopReason: string }
  /** A host's TurnFailed; `reasonValue` is unset from hosts of earlier versions (see turnFailedReason). */
  | { on: "turnFailed"; code: number; reason: string; reasonValue?: Reason; message: string; retryable: boolean }
  | { on: "runEnded"; deadline: boolean }
  | { on: "severed" }
  | { on: "overflow" }
  | { on: "deadline" }
  | { on: "clientGone" }
  | { on: "cancelled" }
  | { on: "notPending" }
  | { on: "hostLost" }
  /** The process relaying the run is gone (its lease in the database passed): found by any core's sweep. */
  | { on: "ownerLost" }
  /** `reason` is the end reason recorded; `failure` what the client's stream shows (default: the reason `reason` names, else turn_failed). */
  | { on: "startFailed"; reason: string; failure?: Reason; clientGone: boolean };

/**
 * The run state machine's one transition table (the description's "Intern run" table):
 *
 *   streaming ──question──► paused            (pause)
 *   paused ──answer accepted──► streaming      (answer)
 *   streaming | paused ──cause──► RUN_ENDINGS[cause]
 *
 * The relay (interns-handler.ts) only renders an ending; the manager records it.
 */
export const RUN_ENDINGS: { [K in EndingCause["on"]]: (c: Extract<EndingCause, { on: K }>) => RunEnding } = {
  // An agent's own "cancelled" (no cancel from Portico: codex on reject_once) is a normal end too.
  turnEnded: (c) => ({
    state: "finished",
    endReason: c.stopReason === "cancelled" ? "agent_cancelled" : c.stopReason || "end_turn",
    finish: { kind: "stop" },
  }),
  turnFailed: (c) => {
    const reason = turnFailedReason(c);
    return { state: "failed", endReason: ruleOf(reason).wire, finish: errorOf(reason, c.message || "The intern failed the turn.", c.retryable) };
  },
  runEnded: (c) => ({
    state: c.deadline ? "cancelled" : "ended",
    endReason: c.deadline ? "deadline" : "run_ended",
    finish: errorOf(Reason.RUN_ENDED, "The intern ended the run.", false),
  }),
  severed: () => ({
    state: "ended",
    endReason: "stream_severed",
    finish: errorOf(Reason.STREAM_SEVERED, "The connection to the intern broke without its confirmation.", true),
  }),
  overflow: () => ({
    state: "failed",
    endReason: "attachment_failed",
    finish: errorOf(Reason.ATTACHMENT_FAILED, "The run produced more output than the intern retains for replay.", false),
  }),
  deadline: () => ({
    state: "cancelled",
    endReason: "deadline",
    finish: errorOf(Reason.RUN_ENDED, "The intern ended the run.", false),
  }),
  clientGone: () => ({ state: "cancelled", endReason: "client_disconnected", finish: { kind: "stop" } }),
  // A caller cancelled the run through the API (CancelSessionRun).
  cancelled: () => ({
    state: "cancelled",
    endReason: "cancelled",
    finish: errorOf(Reason.RUN_ENDED, "The run was cancelled.", false),
  }),
  hostLost: () => ({
    state: "ended",
    endReason: "host_lost",
    finish: errorOf(Reason.STREAM_SEVERED, "The connection to the intern broke without its confirmation.", true),
  }),
  ownerLost: () => ({
    state: "ended",
    endReason: "owner_lost",
    finish: errorOf(Reason.STREAM_SEVERED, "The core relaying the run went away.", true),
  }),
  // Before the stream opened: the client gets an error response, not a finish chunk.
  startFailed: (c) => ({
    state: c.clientGone ? "cancelled" : c.reason === "stream_severed" ? "ended" : "failed",
    endReason: c.reason,
    finish: errorOf(c.failure ?? reasonFromWire(c.reason) ?? Reason.TURN_FAILED, "The run did not start.", true),
  }),
  notPending: () => ({
    state: "ended",
    endReason: "not_pending",
    finish: errorOf(Reason.RUN_ENDED, "The intern ended the run.", false),
  }),
};

/** The ending a cause leads to (one lookup in RUN_ENDINGS). */
export function endingOf(cause: EndingCause): RunEnding {
  return (RUN_ENDINGS[cause.on] as (c: EndingCause) => RunEnding)(cause);
}

/** The ending cause of a terminal host event; undefined for any other event. */
export function causeOfEvent(e: RunEvent["event"]): EndingCause | undefined {
  switch (e.case) {
    case "turnEnded":
      return { on: "turnEnded", stopReason: e.value.stopReason };
    case "turnFailed":
      return { on: "turnFailed", code: e.value.code, reason: e.value.reason, reasonValue: e.value.reasonValue, message: e.value.message, retryable: e.value.retryable };
    case "runEnded":
      return { on: "runEnded", deadline: e.value.deadline };
    default:
      return undefined;
  }
}

/**
 * The reason of a host's TurnFailed: its `reason_value`, or for a host of an earlier version (which
 * sends only `code` and the wire string) the reason those name; turn_failed when they name none.
 */
export function turnFailedReason(t: Pick<TurnFailed, "code" | "reason"> & { reasonValue?: Reason }): Reason {
  if (t.reasonValue !== undefined && ALL_REASONS.includes(t.reasonValue)) return t.reasonValue;
  // A host's `busy` is always capacity, whatever number it sent with it.
  if (t.reason === "busy") return Reason.HOST_BUSY;
  return reasonFromLegacy(t.code || ruleOf(Reason.TURN_FAILED).status, t.reason || ruleOf(Reason.TURN_FAILED).wire, Reason.TURN_FAILED);
}

export function usageFromProto(u: Usage): UsageRecord {
  const out: UsageRecord = {
    prompt_tokens: Number(u.promptTokens),
    completion_tokens: Number(u.completionTokens),
    total_tokens: Number(u.totalTokens),
  };
  if (u.cost !== undefined) out.cost = u.cost;
  if (u.cachedTokens !== undefined) out.cached_tokens = Number(u.cachedTokens);
  return out;
}

/** Whether a host event ends the run (turnEnded, turnFailed, runEnded). */
export function isTerminal(c: RunEvent["event"]["case"]): c is TerminalCase {
  return c === "turnEnded" || c === "turnFailed" || c === "runEnded";
}
