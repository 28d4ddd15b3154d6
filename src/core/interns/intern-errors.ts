/**
 * The intern chat errors (api-facts §3.6), each as a ConnectError whose (code, reason) the gateway's
 * one status table turns into the public status. Messages are the documented ones.
 */
import { Code, type ConnectError } from "@connectrpc/connect";
import { serviceError } from "../errors.js";

/** Connect code carrying each intern reason (the gateway decides the HTTP status from the reason). */
const CODE_BY_REASON: Record<string, Code> = {
  bad_request: Code.InvalidArgument,
  not_found: Code.NotFound,
  interaction_unknown: Code.NotFound,
  interaction_not_pending: Code.FailedPrecondition,
  attachment_failed: Code.FailedPrecondition,
  run_ended: Code.FailedPrecondition,
  rate_limited: Code.ResourceExhausted,
  intern_unreachable: Code.Unavailable,
  stream_severed: Code.Unavailable,
  turn_failed: Code.Unavailable,
  intern_rejected: Code.Unavailable,
  busy: Code.Unavailable,
  timeout: Code.DeadlineExceeded,
};

/** An error for an intern reason reported by a host (TurnFailed before the stream opened). */
export function internError(reason: string, message: string, retryable: boolean): ConnectError {
  return serviceError(CODE_BY_REASON[reason] ?? Code.Unavailable, reason, message, { retryable });
}

/** 404 without metadata for callers outside the interns programme (every /api/v1/interns path). */
export function outsideProgramme(): ConnectError {
  return serviceError(Code.NotFound, "not_found", "Resource not found", { hideMetadata: true });
}

export function internNotFound(): ConnectError {
  return serviceError(Code.NotFound, "not_found", "Intern not found");
}

export function badRequest(message: string, field?: string): ConnectError {
  return serviceError(Code.InvalidArgument, "bad_request", message, field ? { field } : {});
}

export function answerNotAccepted(): ConnectError {
  return serviceError(Code.InvalidArgument, "bad_request", "The intern did not accept that answer for this tool_call_id.", {
    field: "messages.content",
  });
}

export function interactionUnknown(): ConnectError {
  return serviceError(Code.NotFound, "interaction_unknown", "No pending question has this tool_call_id.");
}

export function interactionNotPending(): ConnectError {
  return serviceError(Code.FailedPrecondition, "interaction_not_pending", "The run that asked this question has already ended.");
}

export function attachmentFailed(): ConnectError {
  return serviceError(Code.FailedPrecondition, "attachment_failed", "The run produced more output than the intern retains for replay.");
}

export function rateLimited(retryAfterSeconds: number): ConnectError {
  return serviceError(Code.ResourceExhausted, "rate_limited", "Too many intern turns. Please wait a moment.", {
    retryable: true,
    retryAfterSeconds,
  });
}

export function internUnreachable(): ConnectError {
  return serviceError(Code.Unavailable, "intern_unreachable", "The intern could not be reached.", { retryable: true });
}

/** 409: the session's own run holds the turn (streaming or paused). */
export function sessionBusy(retryAfterSeconds: number): ConnectError {
  return serviceError(Code.Aborted, "busy", "This session already has a run streaming or waiting for an answer.", {
    retryable: true,
    retryAfterSeconds,
  });
}

/** 503: the host cannot hold another run (open across a question) right now. */
export function hostBusy(retryAfterSeconds: number): ConnectError {
  return serviceError(Code.Unavailable, "busy", "The intern cannot hold another run open across a question right now. Retry later.", {
    retryable: true,
    retryAfterSeconds,
  });
}

export function internTimeout(): ConnectError {
  return serviceError(Code.DeadlineExceeded, "timeout", "The intern did not answer in time.", { retryable: true });
}

export function streamSeveredBeforeStart(): ConnectError {
  return serviceError(Code.Unavailable, "stream_severed", "The connection to the intern broke before the turn started.", {
    retryable: true,
  });
}

/** 503 busy for one key: it holds its share of runs open across a question. */
export function keyShareUsed(retryAfterSeconds: number): ConnectError {
  return serviceError(Code.Unavailable, "busy", "This API key holds as many runs open across a question as it may on this intern. Answer or let one end, then retry.", {
    retryable: true,
    retryAfterSeconds,
  });
}
