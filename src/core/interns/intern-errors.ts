/**
 * The intern chat errors (api-facts §3.6), each as a ConnectError whose (code, reason) the gateway's
 * one status table turns into the public status. Messages are the documented ones.
 */
import type { ConnectError } from "@connectrpc/connect";
import { Reason, reasonFromWire } from "../../contract/reasons.js";
import { serviceError } from "../errors.js";

/**
 * An error for an intern reason reported by a host (TurnFailed or RunRejected before the stream
 * opened). A host's `busy` is always capacity (503); a reason the table does not know is turn_failed.
 */
export function internError(reason: string, message: string, retryable: boolean): ConnectError {
  const known = reason === "busy" ? Reason.HOST_BUSY : (reasonFromWire(reason) ?? Reason.TURN_FAILED);
  return serviceError(known, message, { retryable });
}

/** 404 without metadata for callers outside the interns programme (every /api/v1/interns path). */
export function outsideProgramme(): ConnectError {
  return serviceError(Reason.NOT_FOUND, "Resource not found", { hideMetadata: true });
}

export function internNotFound(): ConnectError {
  return serviceError(Reason.NOT_FOUND, "Intern not found");
}

export function badRequest(message: string, field?: string): ConnectError {
  return serviceError(Reason.BAD_REQUEST, message, field ? { field } : {});
}

export function answerNotAccepted(): ConnectError {
  return serviceError(Reason.BAD_REQUEST, "The intern did not accept that answer for this tool_call_id.", {
    field: "messages.content",
  });
}

export function interactionUnknown(): ConnectError {
  return serviceError(Reason.INTERACTION_UNKNOWN, "No pending question has this tool_call_id.");
}

export function interactionNotPending(): ConnectError {
  return serviceError(Reason.INTERACTION_NOT_PENDING, "The run that asked this question has already ended.");
}

export function attachmentFailed(): ConnectError {
  return serviceError(Reason.ATTACHMENT_FAILED, "The run produced more output than the intern retains for replay.");
}

export function rateLimited(retryAfterSeconds: number): ConnectError {
  return serviceError(Reason.RATE_LIMITED, "Too many intern turns. Please wait a moment.", {
    retryAfterSeconds,
  });
}

export function internUnreachable(): ConnectError {
  return serviceError(Reason.INTERN_UNREACHABLE, "The intern could not be reached.");
}

/** 409: the session's own run holds the turn (streaming or paused). */
export function sessionBusy(retryAfterSeconds: number): ConnectError {
  return serviceError(Reason.SESSION_BUSY, "This session already has a run streaming or waiting for an answer.", {
    retryAfterSeconds,
  });
}

/** What is full when the intern's host cannot take a run: the 503 says which. */
export type HostFull =
  /** Every run (agent) slot is in use: the host says so (Capacity.busy, RunRejected busy) or the core counts max_concurrent_runs. */
  | { slots: "runs"; running?: number; max?: number; hostMessage?: string }
  /** A manual run could pause, and the host already holds max_paused_runs runs waiting for an answer. */
  | { slots: "paused"; paused: number };

/** 503 busy naming what is full. */
export function hostBusy(retryAfterSeconds: number, full: HostFull): ConnectError {
  let message: string;
  if (full.slots === "paused") {
    message = `The intern's host already holds ${full.paused} run${full.paused === 1 ? "" : "s"} waiting for an answer, as many as it can. Answer or cancel one, or retry later.`;
  } else if (full.max !== undefined) {
    message = `Every run slot of the intern's host is in use (${full.running ?? full.max} of ${full.max}). Retry later.`;
  } else {
    const why = full.hostMessage ? `: ${full.hostMessage.replace(/[.\s]+$/, "")}` : "";
    message = `Every agent slot of the intern's host is in use${why}. Retry later.`;
  }
  return serviceError(Reason.HOST_BUSY, message, { retryAfterSeconds });
}

export function internTimeout(): ConnectError {
  return serviceError(Reason.TIMEOUT, "The intern did not answer in time.");
}

export function streamSeveredBeforeStart(): ConnectError {
  return serviceError(Reason.STREAM_SEVERED, "The connection to the intern broke before the turn started.");
}

/** 503 busy for one key: it holds its share of runs open across a question. */
export function keyShareUsed(retryAfterSeconds: number): ConnectError {
  return serviceError(Reason.HOST_BUSY, "This API key holds as many runs open across a question as it may on this intern. Answer or let one end, then retry.", {
    retryable: true,
    retryAfterSeconds,
  });
}

/** 404: the intern has no session with this id. */
export function sessionNotFound(): ConnectError {
  return serviceError(Reason.NOT_FOUND, "Session not found");
}

/** 409 conflict: CancelSessionRun on a session no run holds. */
export function noRunToCancel(): ConnectError {
  return serviceError(Reason.STATE_CONFLICT, "The session has no run to cancel.");
}
