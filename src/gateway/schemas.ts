/** Shared JSON schemas for route declarations (and so for the OpenAPI document). */
import type { FastifySchemaCompiler } from "fastify";
import type { z } from "zod";
import { Reason } from "../contract/reasons.js";
import { violationOf } from "../contract/requests/kit.js";
import { serviceError } from "../lib/service-error.js";

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

/** offset/limit query of list operations. */
export const paginationQuerySchema = {
  type: "object",
  properties: {
    offset: { type: ["integer", "string", "null"], description: "Items to skip (>= 0, default 0)." },
    limit: { type: ["integer", "string", "null"], description: "Page size, 1 to 100 (default 50)." },
  },
} as const;

/**
 * A route's validator compiler for a body defined in the contract (src/contract/requests): the body is
 * checked with that definition (the same the core uses, so messages and `field` agree), a violation
 * being a 400 bad_request naming the field; other parts (path parameters) pass unchanged. The body is
 * never changed.
 */
export function contractBodyValidator(definition: z.ZodType): FastifySchemaCompiler<unknown> {
  return ({ httpPart }) =>
    (data) => {
      if (httpPart !== "body") return { value: data };
      // No body (an empty JSON body included) is an empty object: its required fields are then named.
      const res = definition.safeParse(data ?? {});
      if (res.success) return { value: data };
      const v = violationOf(res.error);
      return { error: serviceError(Reason.BAD_REQUEST, v.message, { field: v.field }) as unknown as Error };
    };
}

/**
 * A route's validator compiler that hands every part over unchanged: for routes whose body the core
 * checks (after authenticating the caller) with the contract's definition, the OpenAPI body schema
 * being derived from that definition.
 */
export const passThroughValidator: FastifySchemaCompiler<unknown> = () => (data) => ({ value: data });
