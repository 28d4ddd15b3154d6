/** Shared JSON schemas for route declarations (and so for the OpenAPI document). */
import type { FastifySchemaCompiler } from "fastify";
import type { z } from "zod";
import { requestJsonSchema, RuleViolation, violationOf } from "../contract/requests/kit.js";
import { queryValues, requestParameterSchemas, RequestParameters } from "../contract/requests/parameters.js";
import { ruleError } from "../lib/service-error.js";

export const errorEnvelopeSchema = {
  type: "object",
  required: ["error"],
  properties: {
    error: {
      type: "object",
      required: ["code", "message"],
      properties: {
        code: { type: "integer" },
        message: { type: "string" },
        metadata: { type: ["object", "null"], additionalProperties: true },
      },
    },
  },
} as const;

/** Response schema entries for the given error statuses. */
export function errorResponses(...statuses: number[]): Record<number, typeof errorEnvelopeSchema> {
  return Object.fromEntries(statuses.map((s) => [s, errorEnvelopeSchema]));
}

/**
 * The response of every list (src/contract/requests/paging.ts): the page's items, `has_more`, and the
 * cursor of the next page; `total_count` where the list counted its items before cursors existed.
 */
export function listOf<S>(item: S, opts: { totalCount?: boolean } = {}) {
  const totalCount = opts.totalCount ?? true;
  return {
    type: "object",
    required: totalCount ? ["data", "has_more", "total_count"] : ["data", "has_more"],
    properties: {
      data: { type: "array", items: item },
      has_more: { type: "boolean", description: "Whether more items follow this page." },
      next_cursor: { type: "string", description: "Set when has_more: pass it as starting_after to get the next page." },
      ...(totalCount ? { total_count: { type: "integer", description: "Items of the list across all pages." } } : {}),
    },
  } as const;
}

/** The paging fields of a list response from the core's message (`has_more`, `next_cursor` when set). */
export function pageOfResponse(res: { hasMore: boolean; nextCursor?: string | undefined }): { has_more: boolean; next_cursor?: string } {
  return res.nextCursor !== undefined ? { has_more: res.hasMore, next_cursor: res.nextCursor } : { has_more: res.hasMore };
}

/** The paging fields of a list RPC from a query checked by the contract (`limit`, `offset`, `starting_after`). */
export function pageRequest(query: { limit?: number; offset?: number; starting_after?: string }) {
  return {
    limit: query.limit ?? 0,
    offset: query.offset ?? 0,
    ...(query.starting_after !== undefined ? { startingAfter: query.starting_after } : {}),
  };
}

/** A validator's result: the value the definition reads, or the one RuleViolation → error mapping's error. */
function violation(def: z.ZodType, data: unknown) {
  const res = def.safeParse(data);
  if (res.success) return { value: res.data as unknown };
  return { error: ruleError(violationOf(res.error)) as Error };
}

/**
 * An operation's request contract for its route: the OpenAPI schemas of its query string, path
 * parameters and body, all derived from the definitions in src/contract/requests, and the validator
 * compiler that checks each part with those same definitions (a broken rule is 400 bad_request naming
 * the parameter or field). The query reaches the handler typed (numbers, booleans) as the definition
 * reads it; path parameters and the body are never changed. `body`: a definition the gateway checks
 * (used with `authorizeFirst`), `"core"` for a body the core checks after authenticating the caller
 * (passed through), or absent for an operation without a body (`EmptyRequest` refuses any field).
 */
export function contractRoute(operationId: string, body?: z.ZodType | "core", bodySchema?: Record<string, unknown>) {
  const defs = RequestParameters[operationId] ?? {};
  const validatorCompiler: FastifySchemaCompiler<unknown> = ({ httpPart }) => {
    if (httpPart === "querystring" && defs.query) {
      const query = defs.query;
      if (defs.closedQuery) {
        const known = Object.keys(query.shape);
        return (data) => {
          const unknown = Object.keys((data ?? {}) as object).find((k) => !known.includes(k));
          if (unknown === undefined) return violation(query, queryValues(query, data));
          const message = `${unknown} is not a query parameter of this operation (${known.join(", ") || "none"})`;
          return { error: ruleError(new RuleViolation(unknown, message)) as Error };
        };
      }
      return (data) => violation(query, queryValues(query, data));
    }
    if (httpPart === "params" && defs.path) {
      const path = defs.path;
      return (data) => {
        const checked = violation(path, data ?? {});
        return "error" in checked ? checked : { value: data };
      };
    }
    if (httpPart === "body" && body !== undefined && body !== "core") {
      const def = body;
      // No body (an empty JSON body included) is an empty object: its required fields are then named.
      return (data) => {
        const checked = violation(def, data ?? {});
        return "error" in checked ? checked : { value: data };
      };
    }
    return (data) => ({ value: data });
  };
  const schema: Record<string, unknown> = { ...requestParameterSchemas(operationId) };
  if (body !== undefined && body !== "core") schema.body = bodySchema ?? requestJsonSchema(body);
  else if (bodySchema) schema.body = bodySchema;
  return { validatorCompiler, schema };
}

/**
 * A route's validator compiler that hands every part over unchanged: for routes whose body the core
 * checks (after authenticating the caller) with the contract's definition, the OpenAPI body schema
 * being derived from that definition.
 */
export const passThroughValidator: FastifySchemaCompiler<unknown> = () => (data) => ({ value: data });
