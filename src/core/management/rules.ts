/**
 * Input rules shared by the management services (keys, workspaces, audit): paging, display names,
 * identifiers. Each failure is INVALID_ARGUMENT naming the field in wire form.
 */
import { Reason } from "../../contract/reasons.js";
import { Code } from "@connectrpc/connect";
import { invalidArgument, serviceError } from "../errors.js";

export const DEFAULT_PAGE_LIMIT = 50;
export const MAX_PAGE_LIMIT = 100;

/** offset >= 0 and limit 1..100 (0 = the default 50). */
export function checkPage(offset: number, limit: number): { offset: number; limit: number } {
  if (!Number.isInteger(offset) || offset < 0) throw invalidArgument("offset", "offset must be an integer of at least 0");
  if (!Number.isInteger(limit) || limit < 0 || limit > MAX_PAGE_LIMIT) {
    throw invalidArgument("limit", `limit must be an integer between 1 and ${MAX_PAGE_LIMIT}`);
  }
  return { offset, limit: limit === 0 ? DEFAULT_PAGE_LIMIT : limit };
}

/** A display name: 1..max characters after trimming, no control characters. Returns it trimmed. */
export function checkName(field: string, value: string, max = 255): string {
  const trimmed = value.trim();
  if (trimmed.length === 0) throw invalidArgument(field, `${field} is required (1 to ${max} characters)`);
  if ([...trimmed].length > max) throw invalidArgument(field, `${field} must be at most ${max} characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(trimmed)) throw invalidArgument(field, `${field} must not contain control characters`);
  return trimmed;
}

/** Free text such as a description: at most max characters, no NUL. */
export function checkText(field: string, value: string, max: number): string {
  if ([...value].length > max) throw invalidArgument(field, `${field} must be at most ${max} characters`);
  if (value.includes("\u0000")) throw invalidArgument(field, `${field} must not contain NUL characters`);
  return value;
}

const KEY_HASH = /^[a-f0-9]{64}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A key hash path parameter: anything else cannot name a key, so it is simply not found. */
export function isKeyHash(value: string): boolean {
  return KEY_HASH.test(value);
}

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** Update-mask paths in snake_case, each one of `allowed`. */
export function maskPaths(paths: readonly string[] | undefined, allowed: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const raw of paths ?? []) {
    const path = raw.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    if (!allowed.includes(path)) throw invalidArgument("update_mask", `update_mask names a field that cannot be updated: ${allowed.join(", ")} can`);
    out.add(path);
  }
  return out;
}

/** 409 for a state conflict the caller must resolve (not retryable as is). */
export function stateConflict(message: string) {
  return serviceError(Reason.STATE_CONFLICT, message);
}
