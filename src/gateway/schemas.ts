/** Shared JSON schemas for route declarations (and so for the OpenAPI document). */

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
