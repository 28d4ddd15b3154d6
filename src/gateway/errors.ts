/**
 * The one table from core errors to public HTTP errors, and the public error envelope
 * `{error: {code, message, metadata?}}` where code equals the HTTP status.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { FastifyBaseLogger } from "fastify";
import { Reason, reasonFromWire, reasonForStatus as gatewayReasonFor, ruleOf } from "../contract/reasons.js";
import { errorDetailOf } from "../lib/service-error.js";

/**
 * Status for each Connect code of an error that carries no reason the table knows (errors Connect
 * raises itself, or a reason from a newer core).
 */
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

/** The public status of a core error: the reason table's, else the code's. */
export function statusFor(code: Code, reason: string | undefined): number {
  const known = reason ? reasonFromWire(reason, code) : undefined;
  if (known !== undefined) return ruleOf(known).status;
  return STATUS_BY_CODE[code] ?? 500;
}

/**
 * Codes a ConnectError carries when the core could not be reached or the connection to it broke
 * (refused, reset, closed mid-call). The core attaches an ErrorDetail to every error it raises
 * itself, so such a code WITHOUT a detail comes from the transport.
 */
const TRANSPORT_FAILURE_CODES = new Set<Code>([Code.Unavailable, Code.Aborted, Code.Unknown, Code.Internal]);

/** An unreachable or vanished core: 503, retryable, without the transport's own words. */
const CORE_UNAVAILABLE = ruleOf(Reason.CORE_UNAVAILABLE);

export function publicErrorFromConnect(err: ConnectError): PublicError {
  const detail = errorDetailOf(err);
  if (!detail && TRANSPORT_FAILURE_CODES.has(err.code) && isTransportFailure(err)) {
    return {
      status: CORE_UNAVAILABLE.status,
      body: {
        error: {
          code: CORE_UNAVAILABLE.status,
          message: "The service is temporarily unavailable; retry shortly.",
          metadata: { reason: CORE_UNAVAILABLE.wire, retryable: CORE_UNAVAILABLE.retryable },
        },
      },
      retryAfterSeconds: 1,
    };
  }
  const status = statusFor(err.code, detail?.reason);
  const message = status >= 500 && !detail ? "Internal Server Error" : err.rawMessage;
  const body: PublicError["body"] = { error: { code: status, message } };
  if (detail && !detail.hideMetadata && detail.reason) {
    const metadata: Record<string, unknown> = { reason: detail.reason, retryable: detail.retryable };
    if (detail.field) metadata.field = detail.field;
    if (detail.attempts.length > 0) {
      metadata.attempts = detail.attempts.map((a) => ({ provider: a.provider, model: a.model, status: a.status, credential_source: a.credentialSource }));
    }
    if (detail.attemptsNotTried > 0) metadata.attempts_not_tried = detail.attemptsNotTried;
    if (detail.flaggedCategories.length > 0) metadata.categories = detail.flaggedCategories;
    body.error.metadata = metadata;
  }
  return { status, body, retryAfterSeconds: detail?.retryAfterSeconds ?? 0 };
}

/**
 * The error that ends a stream broken after it opened, for every streaming model route (chat completions and the
 * dialects; each encodes it in its own shape): the core's error through the reason table, or, when the server is
 * stopping (`shutdown`), the table's `core_unavailable` with the relay's message (intern chat takes this one too; its
 * other in-band errors are its own, e.g. `stream_severed`). A 5xx that is not the caller
 * leaving is logged (`name`: the stream's word, as the relay's).
 */
export function streamFailure(err: ConnectError, shutdown: boolean, log: FastifyBaseLogger, name: string): PublicError {
  if (shutdown) {
    return publicError(CORE_UNAVAILABLE.status, err.rawMessage, { reason: CORE_UNAVAILABLE.wire, retryable: CORE_UNAVAILABLE.retryable });
  }
  const pub = publicErrorFromConnect(err);
  if (err.code !== Code.Canceled && pub.status >= 500) log.warn({ code: Code[err.code] }, `${name} stream broke after it opened`);
  return pub;
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

/** Wire reason for errors of a given status the gateway raises itself (from the reason table). */
export function reasonForStatus(status: number): string {
  return ruleOf(gatewayReasonFor(status)).wire;
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
