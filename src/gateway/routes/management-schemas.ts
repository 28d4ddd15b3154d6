/** Response pieces shared by the management routes (keys, workspaces, audit). Requests: src/contract/requests. */

export const MANAGEMENT = { authorizeFirst: { management: true } } as const;

export function dataOf<S>(schema: S) {
  return { type: "object", required: ["data"], properties: { data: schema } } as const;
}

export const deletedSchema = {
  type: "object",
  required: ["deleted"],
  properties: { deleted: { type: "boolean", const: true } },
} as const;
