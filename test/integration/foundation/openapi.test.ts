import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { validateAgainstOpenApi, type OpenApiDoc } from "../../helpers/openapi.js";

describe("OpenAPI document", () => {
  let h: Harness;
  let doc: OpenApiDoc & { openapi: string };
  beforeAll(async () => {
    h = await startHarness({ provider: "sqlite" });
    doc = (await api(h, "GET", "/openapi.json")).json;
  });
  afterAll(async () => h?.close());

  it("is served as OpenAPI 3.1 with the public routes under /api/v1", () => {
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths)).toContain("/api/v1/key");
    expect(Object.keys(doc.paths).every((p) => p.startsWith("/api/v1/"))).toBe(true);
  });

  it("describes real responses, success and error", async () => {
    const samples = [
      ["GET", "/key", await api(h, "GET", "/key", { key: h.tenant.apiKey })],
      ["GET", "/key", await api(h, "GET", "/key", {})],
    ] as const;
    for (const [method, path, res] of samples) {
      expect(validateAgainstOpenApi(doc, method, `/api/v1${path}`, res.status, res.json), `${method} ${path} ${res.status}`).toEqual([]);
    }
  });

  it("rejects a response that does not match (the checker itself can fail)", () => {
    expect(validateAgainstOpenApi(doc, "GET", "/api/v1/key", 200, { data: { label: 5 } })).not.toEqual([]);
  });
});
