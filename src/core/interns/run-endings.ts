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
import type { RunEvent, Usage } from "../../gen/portico/internlink/v1/internlink_service_pb.js";
import type { RunState, UsageRecord } from "./intern-repository.js";

export type TerminalCase = "turnEnded" | "turnFailed" | "runEnded";

/** How the response of a run that ends is finished: `stop`, or an error chunk. */
export type RunFinish = { kind: "stop" } | { kind: "error"; code: number; reason: string; message: string; retryable: boolean };

/** A run's end: the state recorded, its end reason and what the client's stream shows. */
export interface RunEnding {
  state: RunState;
  endReason: string;
  finish: RunFinish;
}

/** What ends a live run: a terminal event from the host, or something the core sees on its own. */
export type EndingCause =
  | { on: "turnEnded"; stopReason: string }
  | { on: "turnFailed"; code: number; reason: string; message: string; retryable: boolean }
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
  | { on: "startFailed"; reason: string; clientGone: boolean };

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
  turnFailed: (c) => ({
    state: "failed",
    endReason: c.reason || "turn_failed",
    finish: { kind: "error", code: c.code || 502, reason: c.reason || "turn_failed", message: c.message || "The intern failed the turn.", retryable: c.retryable },
  }),
  runEnded: (c) => ({
    state: c.deadline ? "cancelled" : "ended",
    endReason: c.deadline ? "deadline" : "run_ended",
    finish: { kind: "error", code: 410, reason: "run_ended", message: "The intern ended the run.", retryable: false },
  }),
  severed: () => ({
    state: "ended",
    endReason: "stream_severed",
    finish: { kind: "error", code: 502, reason: "stream_severed", message: "The connection to the intern broke without its confirmation.", retryable: true },
  }),
  overflow: () => ({
    state: "failed",
    endReason: "attachment_failed",
    finish: { kind: "error", code: 410, reason: "attachment_failed", message: "The run produced more output than the intern retains for replay.", retryable: false },
  }),
  deadline: () => ({
    state: "cancelled",
    endReason: "deadline",
    finish: { kind: "error", code: 410, reason: "run_ended", message: "The intern ended the run.", retryable: false },
  }),
  clientGone: () => ({ state: "cancelled", endReason: "client_disconnected", finish: { kind: "stop" } }),
  // A caller cancelled the run through the API (CancelSessionRun).
  cancelled: () => ({
    state: "cancelled",
    endReason: "cancelled",
    finish: { kind: "error", code: 410, reason: "run_ended", message: "The run was cancelled.", retryable: false },
  }),
  hostLost: () => ({
    state: "ended",
    endReason: "host_lost",
    finish: { kind: "error", code: 502, reason: "stream_severed", message: "The connection to the intern broke without its confirmation.", retryable: true },
  }),
  ownerLost: () => ({
    state: "ended",
    endReason: "owner_lost",
    finish: { kind: "error", code: 502, reason: "stream_severed", message: "The core relaying the run went away.", retryable: true },
  }),
  // Before the stream opened: the client gets an error response, not a finish chunk.
  startFailed: (c) => ({
    state: c.clientGone ? "cancelled" : c.reason === "stream_severed" ? "ended" : "failed",
    endReason: c.reason,
    finish: { kind: "error", code: 502, reason: c.reason, message: "The run did not start.", retryable: true },
  }),
  notPending: () => ({
    state: "ended",
    endReason: "not_pending",
    finish: { kind: "error", code: 410, reason: "run_ended", message: "The intern ended the run.", retryable: false },
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
      return { on: "turnFailed", code: e.value.code, reason: e.value.reason, message: e.value.message, retryable: e.value.retryable };
    case "runEnded":
      return { on: "runEnded", deadline: e.value.deadline };
    default:
      return undefined;
  }
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
