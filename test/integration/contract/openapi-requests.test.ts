/**
 * The OpenAPI document's request bodies are exactly the JSON Schemas derived from the request
 * definitions the core validates with (src/contract/requests), and every operation with a body has one.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requestSchemas } from "../../../src/contract/requests/index.js";
import { startHarness, type Harness } from "../../helpers/harness.js";

interface Operation {
  operationId?: string;
  requestBody?: { content?: Record<string, { schema?: unknown }> };
}

describe("OpenAPI request schemas come from the request definitions", () => {
  let h: Harness;
  let operations: Operation[];
  beforeAll(async () => {
    h = await startHarness();
    const doc = (await (await fetch(`${h.baseUrl}/api/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, Operation>> };
    operations = Object.values(doc.paths).flatMap((item) => Object.values(item));
  });
  afterAll(() => h?.close());

  it("every request body in the document is the derived schema of its operation", () => {
    const derived = requestSchemas(h.config.brand);
    // The management API (issue 13) still declares its bodies in src/gateway/routes/*; moving them onto
    // src/contract/requests is open work, listed here so that no other operation can slip out.
    const notYetDerived = new Set([
      "addWorkspaceMembers", "createApiKey", "createIntern", "createWorkspace", "removeWorkspaceMembers",
      "updateApiKey", "updateIntern", "updatePreset", "updateWorkspace",
    ]);
    const withBody = operations.filter((op) => op.requestBody && !notYetDerived.has(op.operationId!));
    expect(withBody.map((op) => op.operationId).sort()).toEqual(Object.keys(derived).sort());
    for (const op of withBody) {
      expect(op.requestBody?.content?.["application/json"]?.schema, op.operationId).toEqual(derived[op.operationId!]);
    }
  });

  it("a definition change shows in the document (the schemas are not copies)", () => {
    const schema = requestSchemas(h.config.brand).createPresetVersion as { properties: Record<string, { anyOf?: unknown[] }> };
    expect(schema.properties.temperature).toEqual({ anyOf: [{ type: "number", minimum: 0, maximum: 2 }, { type: "null" }] });
    const tools = JSON.stringify(schema.properties.tools);
    expect(tools).toContain(`${h.config.brand}:web_search`);
  });
});
