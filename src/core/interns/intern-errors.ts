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

/** 503: the host cannot hold another run (open across a question) right now. */
export function hostBusy(retryAfterSeconds: number): ConnectError {
  return serviceError(Reason.HOST_BUSY, "The intern cannot hold another run open across a question right now. Retry later.", {
    retryAfterSeconds,
  });
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
