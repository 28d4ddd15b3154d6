/**
 * Input rules shared by the management services (keys, workspaces, presets' settings, interns): display
 * names, free text, identifiers, update masks. Field rules are the contract's definitions
 * (src/contract/requests/management.ts), the same the gateway checks bodies with. Paging is the one
 * rule of src/core/paging.ts. Each failure is INVALID_ARGUMENT naming the field in wire form.
 */
import type { z } from "zod";
import { Reason } from "../../contract/reasons.js";
import { validate } from "../../contract/requests/kit.js";
import { displayName, freeText } from "../../contract/requests/management.js";
import { checkRules, invalidArgument, serviceError } from "../errors.js";

const names = new Map<number, z.ZodType<string>>();
const texts = new Map<number, z.ZodType<string>>();
const cached = (map: Map<number, z.ZodType<string>>, max: number, make: (max: number) => z.ZodType<string>) => {
  let def = map.get(max);
  if (!def) map.set(max, (def = make(max)));
  return def;
};

/** `value` meets the contract's definition `def`, or INVALID_ARGUMENT naming `field`. */
export function checkField<T>(def: z.ZodType<T>, field: string, value: unknown): T {
  return checkRules(() => validate(def, value, field));
}

/** A display name: 1..max characters after trimming, no control characters. Returns it trimmed. */
export function checkName(field: string, value: string, max = 255): string {
  return checkField(cached(names, max, displayName), field, value).trim();
}

/** Free text such as a description: at most max characters, no NUL. */
export function checkText(field: string, value: string, max: number): string {
  return checkField(cached(texts, max, freeText), field, value);
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
