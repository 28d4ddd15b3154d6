/**
 * Errors the core raises on purpose: a ConnectError carrying an ErrorDetail (reason, retryable,
 * Retry-After, field). Each reason's Connect code and HTTP status come from the one reason table
 * (src/contract/reasons.ts), which the gateway also reads.
 */
import type { ConnectError } from "@connectrpc/connect";
import { Reason } from "../contract/reasons.js";
import { ruleError, serviceError } from "../lib/service-error.js";

export { serviceError, errorDetailOf, type ServiceErrorOptions } from "../lib/service-error.js";
export { Reason } from "../contract/reasons.js";

export const MANAGEMENT_REQUIRED = "Only management keys can perform this operation";
export const CREATOR_DEPARTED =
  "This API key's creator is no longer a member of the organization. Ask an organization admin to reassign the key to an active member.";

/** 400 naming the offending field. */
export function invalidArgument(field: string, message: string): ConnectError {
  return serviceError(Reason.BAD_REQUEST, message, { field });
}

/** The one RuleViolation → error mapping (src/lib/service-error.ts), shared with the gateway. */
export { ruleError };

/** Runs pure request rules, turning a RuleViolation into 400 bad_request naming the field. */
export function checkRules<T>(rules: () => T): T {
  try {
    return rules();
  } catch (err) {
    throw ruleError(err);
  }
}

export function notFound(message = "Resource not found"): ConnectError {
  return serviceError(Reason.NOT_FOUND, message);
}

export function conflict(message = "Resource conflict. Please try again later."): ConnectError {
  return serviceError(Reason.CONFLICT, message);
}

export function unauthenticated(message: string): ConnectError {
  return serviceError(Reason.UNAUTHENTICATED, message);
}

export function permissionDenied(message: string): ConnectError {
  return serviceError(Reason.FORBIDDEN, message);
}
