/** Request pieces shared by the management routes (keys, workspaces, audit). */
import { Reason } from "../../contract/reasons.js";
import { Code } from "@connectrpc/connect";
import { serviceError } from "../../lib/service-error.js";

export const MANAGEMENT = { authorizeFirst: { management: true } } as const;

export function dataOf<S>(schema: S) {
  return { type: "object", required: ["data"], properties: { data: schema } } as const;
}

export function pageOf<S>(schema: S) {
  return {
    type: "object",
    required: ["data", "total_count"],
    properties: { data: { type: "array", items: schema }, total_count: { type: "integer" } },
  } as const;
}

export const deletedSchema = {
  type: "object",
  required: ["deleted"],
  properties: { deleted: { type: "boolean", const: true } },
} as const;

/** A boolean query parameter: "true" or "false" (absent = fallback). */
export function queryBool(query: unknown, name: string, fallback: boolean): boolean {
  const raw = ((query ?? {}) as Record<string, unknown>)[name];
  if (raw === undefined || raw === "") return fallback;
  if (raw === true || raw === "true") return true;
  if (raw === false || raw === "false") return false;
  throw serviceError(Reason.BAD_REQUEST, `${name} must be true or false`, { field: name });
}

/** A string query parameter, or undefined when absent. */
export function queryString(query: unknown, name: string): string | undefined {
  const raw = ((query ?? {}) as Record<string, unknown>)[name];
  return typeof raw === "string" && raw !== "" ? raw : undefined;
}

/** Refuses a body field the operation does not know, naming it (a PATCH must not silently ignore a change). */
export function refuseUnknownFields(body: unknown, allowed: readonly string[]): void {
  if (body === null || typeof body !== "object") return;
  const unknown = Object.keys(body).find((k) => !allowed.includes(k));
  if (unknown !== undefined) {
    throw serviceError(Reason.BAD_REQUEST, `${unknown} cannot be changed here; fields: ${allowed.join(", ")}`, { field: unknown });
  }
}
