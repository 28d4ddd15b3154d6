/**
 * The one table from core errors to public HTTP errors, and the public error envelope
 * `{error: {code, message, metadata?}}` where code equals the HTTP status.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { errorDetailOf } from "../lib/service-error.js";

/** Reasons whose status does not follow from the Connect code alone. Checked first. */
const STATUS_BY_REASON: Record<string, number> = {
  bad_request: 400,
  interaction_unknown: 404,
  not_found: 404,
  interaction_not_pending: 409,
  conflict: 409,
  attachment_failed: 410,
  run_ended: 410,
  payload_too_large: 413,
  rate_limited: 429,
  intern_unreachable: 502,
  intern_rejected: 502,
  stream_severed: 502,
  turn_failed: 502,
  timeout: 504,
};

/** Status for each Connect code when the reason does not decide. */
const STATUS_BY_CODE: Partial<Record<Code, number>> = {
  [Code.Canceled]: 499,
  [Code.InvalidArgument]: 400,
  [Code.FailedPrecondition]: 400,
  [Code.OutOfRange]: 400,
  [Code.Unauthenticated]: 401,
  [Code.PermissionDenied]: 403,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.Aborted]: 409,
  [Code.ResourceExhausted]: 429,
  [Code.Unimplemented]: 404,
  [Code.Unavailable]: 503,
  [Code.DeadlineExceeded]: 504,
};

export interface PublicError {
  status: number;
  body: { error: { code: number; message: string; metadata?: Record<string, unknown> } };
  retryAfterSeconds: number;
}

export function statusFor(code: Code, reason: string | undefined): number {
  // "busy" is 409 when the session's own run holds the turn (Aborted) and 503 when capacity is short.
  if (reason === "busy") return code === Code.Aborted ? 409 : 503;
  if (reason && STATUS_BY_REASON[reason] !== undefined) return STATUS_BY_REASON[reason];
  return STATUS_BY_CODE[code] ?? 500;
}

/**
 * Codes a ConnectError carries when the core could not be reached or the connection to it broke
 * (refused, reset, closed mid-call). The core attaches an ErrorDetail to every error it raises
 * itself, so such a code WITHOUT a detail comes from the transport.
 */
const TRANSPORT_FAILURE_CODES = new Set<Code>([Code.Unavailable, Code.Aborted, Code.Unknown, Code.Internal]);

/** An unreachable or vanished core: 503, retryable, without the transport's own words. */
export const CORE_UNAVAILABLE_REASON = "core_unavailable";

export function publicErrorFromConnect(err: ConnectError): PublicError {
  const detail = errorDetailOf(err);
  if (!detail && TRANSPORT_FAILURE_CODES.has(err.code) && isTransportFailure(err)) {
    return {
      status: 503,
      body: { error: { code: 503, message: "The service is temporarily unavailable; retry shortly.", metadata: { reason: CORE_UNAVAILABLE_REASON, retryable: true } } },
      retryAfterSeconds: 1,
    };
  }
  const status = statusFor(err.code, detail?.reason);
  const message = status >= 500 && !detail ? "Internal Server Error" : err.rawMessage;
  const body: PublicError["body"] = { error: { code: status, message } };
  if (detail && !detail.hideMetadata && detail.reason) {
    const metadata: Record<string, unknown> = { reason: detail.reason, retryable: detail.retryable };
    if (detail.field) metadata.field = detail.field;
    body.error.metadata = metadata;
  }
  return { status, body, retryAfterSeconds: detail?.retryAfterSeconds ?? 0 };
}

/** The envelope for an error the gateway raises itself (routing, parsing, limits). */
export function publicError(
  status: number,
  message: string,
  metadata?: { reason: string; retryable: boolean; field?: string },
): PublicError {
  const body: PublicError["body"] = { error: { code: status, message } };
  if (metadata) body.error.metadata = metadata;
  return { status, body, retryAfterSeconds: 0 };
}

/** Reason used in intern-route metadata for gateway-level errors of a given status. */
export function reasonForStatus(status: number): string {
  if (status === 413) return "payload_too_large";
  if (status === 404) return "not_found";
  if (status === 429) return "rate_limited";
  if (status >= 500) return "internal_error";
  return "bad_request";
}

export function asConnectError(err: unknown): ConnectError | undefined {
  return err instanceof ConnectError ? err : undefined;
}

/** True when a detail-less ConnectError describes a connection problem rather than a core answer. */
function isTransportFailure(err: ConnectError): boolean {
  if (err.code === Code.Unavailable) return true;
  const text = `${err.rawMessage} ${String((err.cause as Error | undefined)?.message ?? "")}`;
  return /ECONNRESET|ECONNREFUSED|EPIPE|ETIMEDOUT|EHOSTUNREACH|socket hang up|session closed|GOAWAY|stream closed|NGHTTP2|premature close|other side closed/i.test(text);
}
