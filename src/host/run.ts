/**
 * A run of the intern host (one ACP prompt turn) and the session it holds, shared by the engine
 * (which drives runs) and the ACP client handlers (which feed them).
 */
import type { RunEventQueue } from "./event-queue.js";
import type { EscalationLedger } from "./escalation.js";
import type { SessionEntry } from "./agent-session.js";
import type { QuestionQueue } from "./questions.js";

/** Why a run is being cancelled (host-internal). */
export type CancelCause = "client" | "deadline" | "caller" | "operator" | "duration" | "link" | "failed";

export interface Run {
  id: string;
  session: Session;
  mode: "self-drive" | "manual";
  state: "starting" | "streaming" | "cancelling" | "done";
  events: RunEventQueue;
  /** Link broke while streaming (or the core dropped the run): nothing more is sent. */
  detached: boolean;
  /** Paused when the link broke: kept for a grace period and announced in Hello. */
  held: boolean;
  heldTimer?: NodeJS.Timeout | undefined;
  questions: QuestionQueue;
  cancelCause: CancelCause | undefined;
  cancelTimer?: NodeJS.Timeout | undefined;
  durationTimer?: NodeJS.Timeout | undefined;
  interactionDeadlineMs: number;
  escalation: EscalationLedger;
  costAtStart: number | undefined;
  model: string | undefined;
  /**
   * Where this run's model calls go (StartRun.gateway), when the core gave one: Portico's base URL and
   * the run's credential (never logged, never handed to the agent: the model relay swaps it in).
   */
  gateway: RunGateway | undefined;
}

export interface RunGateway {
  baseUrl: string;
  token: string;
  expiresAtMs: number;
  model: string;
}

export type Session = SessionEntry<Run>;
