/**
 * The OpenAPI document's request bodies, query parameters and path parameters are exactly the JSON
 * Schemas derived from the definitions the service validates with (src/contract/requests), every
 * operation with a body or parameters has them, and the gateway enforces the bounds the document shows.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RequestParameters, requestParameterSchemas, requestSchemas } from "../../../src/contract/requests/index.js";
import { startHarness, type Harness } from "../../helpers/harness.js";

interface Parameter {
  in: string;
  name: string;
  required?: boolean;
  description?: string;
  schema?: Record<string, unknown>;
}
interface Operation {
  operationId?: string;
  requestBody?: { content?: Record<string, { schema?: unknown }> };
  parameters?: Parameter[];
}

/** The parameters the document should list for a derived query or path schema. */
function expectedParameters(where: "query" | "path", schema: Record<string, unknown> | undefined): Parameter[] {
  if (!schema) return [];
  const required = (schema.required ?? []) as string[];
  return Object.entries(schema.properties as Record<string, Record<string, unknown>>).map(([name, prop]) => {
    const { description, ...rest } = prop;
    return { in: where, name, required: where === "path" || required.includes(name), ...(description !== undefined ? { description: description as string } : {}), schema: rest };
  });
}

const byName = (a: Parameter, b: Parameter) => `${a.in}:${a.name}`.localeCompare(`${b.in}:${b.name}`);

describe("OpenAPI request schemas come from the request definitions", () => {
  let h: Harness;
  let operations: Array<Operation & { method: string; path: string }>;
  beforeAll(async () => {
    h = await startHarness();
    const doc = (await (await fetch(`${h.baseUrl}/api/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, Operation>> };
    operations = Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ ...op, method, path })));
  });
  afterAll(() => h?.close());

  it("every request body in the document is the derived schema of its operation", () => {
    const derived = requestSchemas(h.config.brand);
    const withBody = operations.filter((op) => op.requestBody);
    expect(withBody.map((op) => op.operationId).sort()).toEqual(Object.keys(derived).sort());
    for (const op of withBody) {
      expect(op.requestBody?.content?.["application/json"]?.schema, op.operationId).toEqual(derived[op.operationId!]);
    }
  });

  it("every query and path parameter in the document is derived from its operation's definitions", () => {
    const withParameters = operations.filter((op) => (op.parameters ?? []).some((p) => p.in === "query" || p.in === "path"));
    // Operations of other areas may have parameters the contract does not define yet only if they declare none.
    for (const op of withParameters) {
      expect(RequestParameters[op.operationId!], `${op.operationId} has parameters but no definitions in src/contract/requests/parameters.ts`).toBeDefined();
    }
    for (const [operationId] of Object.entries(RequestParameters)) {
      const op = operations.find((o) => o.operationId === operationId);
      expect(op, `${operationId} is defined but not served`).toBeDefined();
      const schemas = requestParameterSchemas(operationId);
      const expected = [...expectedParameters("query", schemas.querystring), ...expectedParameters("path", schemas.params)].sort(byName);
      const documented = (op!.parameters ?? []).filter((p) => p.in === "query" || p.in === "path").sort(byName);
      expect(documented, operationId).toEqual(expected);
    }
  });

  it("the gateway refuses exactly past the documented bounds of every list's limit (the schemas are the checks)", async () => {
    const lists = operations.filter((op) => op.method === "get" && !op.path.includes("{") && (op.parameters ?? []).some((p) => p.name === "limit"));
    expect(lists.map((op) => op.operationId).sort()).toEqual(["listApiKeys", "listAuditEvents", "listByokKeys", "listCatalogModels", "listGenerations", "listInterns", "listModels", "listPresets", "listWorkspaces"]);
    for (const op of lists) {
      const max = op.parameters!.find((p) => p.name === "limit")!.schema!.maximum as number;
      const path = op.path.replace(/^\/api\/v1/, "");
      const ok = await fetch(`${h.baseUrl}/api/v1${path}?limit=${max}`, { headers: { authorization: `Bearer ${h.tenant.managementKey}` } });
      expect(ok.status, `${op.operationId} limit=${max}`).toBe(200);
      const over = await fetch(`${h.baseUrl}/api/v1${path}?limit=${max + 1}`, { headers: { authorization: `Bearer ${h.tenant.managementKey}` } });
      expect(over.status, `${op.operationId} limit=${max + 1}`).toBe(400);
      expect(((await over.json()) as { error: { metadata: { field: string } } }).error.metadata.field).toBe("limit");
    }
  });

  it("a definition change shows in the document (the schemas are not copies)", () => {
    const schema = requestSchemas(h.config.brand).createPresetVersion as { properties: Record<string, { anyOf?: unknown[] }> };
    expect(schema.properties.temperature).toEqual({ anyOf: [{ type: "number", minimum: 0, maximum: 2 }, { type: "null" }] });
    const tools = JSON.stringify(schema.properties.tools);
    expect(tools).toContain(`${h.config.brand}:web_search`);
    const list = requestParameterSchemas("listApiKeys").querystring as { properties: Record<string, unknown> };
    expect(list.properties.limit).toEqual({ type: "integer", minimum: 1, maximum: 100, description: "Page size, 1 to 100 (default 50)." });
  });
});
