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

  it("gives every operation a unique operationId", () => {
    const ids: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops as Record<string, { operationId?: string }>)) {
        expect(op.operationId, `${method.toUpperCase()} ${path}`).toMatch(/^[a-z][A-Za-z]+$/);
        ids.push(op.operationId!);
      }
    }
    expect(ids.length).toBeGreaterThanOrEqual(12);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("declares the intern 200 as an event stream of chat.completion.chunk payloads", async () => {
    const op = (doc.paths["/api/v1/interns/{internId}/chat/completions"] as any).post;
    const ok = op.responses["200"];
    expect(Object.keys(ok.content)).toEqual(["text/event-stream"]);
    expect(ok.content["text/event-stream"].schema.properties.object.enum).toEqual(["chat.completion.chunk"]);
    expect(op.responses["400"].content["application/json"]).toBeDefined();
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

  it("describes real BYOK, preset and intern responses", async () => {
    const mk = h.tenant.managementKey;
    const created = await api(h, "POST", "/byok", { key: mk, body: { provider: "openai", key: "sk-openapi-check-0123456789" } });
    const id = created.json.data.id as string;
    await api(h, "POST", "/presets/openapi-check/chat/completions", {
      key: mk,
      body: { model: "m", messages: [{ role: "user", content: "hi" }] },
    });
    const samples: Array<[string, string, Awaited<ReturnType<typeof api>>]> = [
      ["POST", "/byok", created],
      ["POST", "/byok", await api(h, "POST", "/byok", { key: mk, body: { provider: "nope", key: "x" } })],
      ["GET", "/byok", await api(h, "GET", "/byok", { key: mk })],
      ["GET", `/byok/${id}`, await api(h, "GET", `/byok/${id}`, { key: mk })],
      ["PATCH", `/byok/${id}`, await api(h, "PATCH", `/byok/${id}`, { key: mk, body: { name: "renamed" } })],
      ["DELETE", `/byok/${id}`, await api(h, "DELETE", `/byok/${id}`, { key: mk })],
      ["GET", `/byok/${id}`, await api(h, "GET", `/byok/${id}`, { key: mk })],
      ["GET", "/presets", await api(h, "GET", "/presets", { key: mk })],
      ["GET", "/presets/openapi-check", await api(h, "GET", "/presets/openapi-check", { key: mk })],
      ["GET", "/presets/openapi-check/versions", await api(h, "GET", "/presets/openapi-check/versions", { key: mk })],
      ["GET", "/presets/openapi-check/versions/1", await api(h, "GET", "/presets/openapi-check/versions/1", { key: mk })],
      ["GET", "/presets/missing", await api(h, "GET", "/presets/missing", { key: mk })],
      [
        "POST",
        "/interns/00000000-0000-4000-8000-000000000000/chat/completions",
        await api(h, "POST", "/interns/00000000-0000-4000-8000-000000000000/chat/completions", {
          key: mk,
          body: { stream: true, messages: [{ role: "user", content: "hi" }] },
        }),
      ],
      [
        "POST",
        "/interns/00000000-0000-4000-8000-000000000000/chat/completions",
        await api(h, "POST", "/interns/00000000-0000-4000-8000-000000000000/chat/completions", {
          key: mk,
          body: { stream: false, messages: [] },
        }),
      ],
    ];
    const statuses = new Set(samples.map(([, , r]) => r.status));
    expect([...statuses].sort()).toEqual([200, 400, 404]);
    for (const [method, path, res] of samples) {
      expect(validateAgainstOpenApi(doc, method, `/api/v1${path}`, res.status, res.json), `${method} ${path} ${res.status}`).toEqual([]);
    }
  });

  it("rejects a response that does not match (the checker itself can fail)", () => {
    expect(validateAgainstOpenApi(doc, "GET", "/api/v1/key", 200, { data: { label: 5 } })).not.toEqual([]);
  });
});
