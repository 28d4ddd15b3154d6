/**
 * The error-detail contract shared by core and gateway: a ConnectError carrying an ErrorDetail
 * (reason, retryable, Retry-After, field). The core raises these; the gateway reads them (and raises
 * them for its own HTTP-level checks so one table renders every error). The Connect code, the default
 * retryability and whether metadata is hidden all come from the reason table (src/contract/reasons.ts).
 */
import { ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { ErrorDetailSchema, type ErrorDetail } from "../gen/portico/errors/v1/error_detail_pb.js";
import { Reason, ruleOf } from "../contract/reasons.js";
import { RuleViolation } from "../contract/requests/kit.js";

export interface ServiceErrorOptions {
  /** Overrides the reason's default retryability. */
  retryable?: boolean;
  retryAfterSeconds?: number;
  field?: string;
  /** Overrides the reason's default (hide the envelope's metadata). */
  hideMetadata?: boolean;
  /** The upstream attempts a chat request made before failing (no credential, no secret). */
  attempts?: { provider: string; model: string; status: number; credentialSource: string }[];
  /** Planned attempts left untried because of the attempt bound. */
  attemptsNotTried?: number;
  /** The moderation categories that flagged the input (reason moderation_flagged). */
  flaggedCategories?: string[];
}

/** An error for `reason`, raised with the reason's Connect code from the one table. */
export function serviceError(reason: Reason, message: string, opts: ServiceErrorOptions = {}): ConnectError {
  const rule = ruleOf(reason);
  const detail = create(ErrorDetailSchema, {
    reason: rule.wire,
    retryable: opts.retryable ?? rule.retryable,
    retryAfterSeconds: opts.retryAfterSeconds ?? 0,
    field: opts.field ?? "",
    hideMetadata: opts.hideMetadata ?? rule.hideMetadata ?? false,
    attempts: opts.attempts ?? [],
    attemptsNotTried: opts.attemptsNotTried ?? 0,
    flaggedCategories: opts.flaggedCategories ?? [],
  });
  return new ConnectError(message, rule.code, undefined, [{ desc: ErrorDetailSchema, value: detail }]);
}

/** Reads the ErrorDetail of a ConnectError, if it has one. */
export function errorDetailOf(err: ConnectError): ErrorDetail | undefined {
  return err.findDetails(ErrorDetailSchema)[0];
}

/**
 * The one RuleViolation → error mapping, for core and gateway alike: a broken request rule
 * (src/contract/requests; a ZodError becomes one through `validate`/`violationOf`) is 400 bad_request whose
 * message is the violation's and whose `field` is the wire path it names; anything else is returned
 * unchanged (to be rethrown).
 */
export function ruleError(err: unknown): unknown {
  return err instanceof RuleViolation ? serviceError(Reason.BAD_REQUEST, err.message, { field: err.field }) : err;
}
