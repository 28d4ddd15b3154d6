/**
 * Errors the core raises on purpose: a ConnectError carrying an ErrorDetail (reason, retryable,
 * Retry-After, field). The gateway turns (code, reason) into the public HTTP status with one table.
 */
import { Code, type ConnectError } from "@connectrpc/connect";
import { serviceError } from "../lib/service-error.js";

export { serviceError, errorDetailOf, type ServiceErrorOptions } from "../lib/service-error.js";

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
