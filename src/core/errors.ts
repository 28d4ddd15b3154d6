/**
 * Errors the core raises on purpose: a ConnectError carrying an ErrorDetail (reason, retryable,
 * Retry-After, field). The gateway turns (code, reason) into the public HTTP status with one table.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { ErrorDetailSchema, type ErrorDetail } from "../gen/portico/errors/v1/error_detail_pb.js";

export interface ServiceErrorOptions {
  retryable?: boolean;
  retryAfterSeconds?: number;
  field?: string;
  hideMetadata?: boolean;
}

export function serviceError(code: Code, reason: string, message: string, opts: ServiceErrorOptions = {}): ConnectError {
  const detail = create(ErrorDetailSchema, {
    reason,
    retryable: opts.retryable ?? false,
    retryAfterSeconds: opts.retryAfterSeconds ?? 0,
    field: opts.field ?? "",
    hideMetadata: opts.hideMetadata ?? false,
  });
  return new ConnectError(message, code, undefined, [{ desc: ErrorDetailSchema, value: detail }]);
}

/** Reads the ErrorDetail of a ConnectError, if it has one. */
export function errorDetailOf(err: ConnectError): ErrorDetail | undefined {
  return err.findDetails(ErrorDetailSchema)[0];
}

export const MANAGEMENT_REQUIRED = "Only management keys can perform this operation";
export const CREATOR_DEPARTED =
  "This API key's creator is no longer a member of the organization. Ask an organization admin to reassign the key to an active member.";

/** 400 naming the offending field. */
export function invalidArgument(field: string, message: string): ConnectError {
  return serviceError(Code.InvalidArgument, "bad_request", message, { field });
}

export function notFound(message = "Resource not found", reason = "not_found"): ConnectError {
  return serviceError(Code.NotFound, reason, message);
}

export function conflict(message = "Resource conflict. Please try again later.", reason = "conflict"): ConnectError {
  return serviceError(Code.Aborted, reason, message, { retryable: true });
}

export function unauthenticated(message: string): ConnectError {
  return serviceError(Code.Unauthenticated, "unauthenticated", message, { hideMetadata: true });
}

export function permissionDenied(message: string): ConnectError {
  return serviceError(Code.PermissionDenied, "forbidden", message, { hideMetadata: true });
}

/** Wraps anything unexpected so no internal message, path or stack leaves the core. */
export function internalError(): ConnectError {
  return serviceError(Code.Internal, "internal_error", "Internal Server Error");
}
