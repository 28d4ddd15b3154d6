import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";

describe("gateway error envelope", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ provider: "sqlite", env: { PORTICO_BODY_LIMIT_BYTES: "2048" } });
  });
  afterAll(async () => h?.close());

  const expectEnvelope = (res: { status: number; json: any; text: string; headers: Headers }, status: number) => {
    expect(res.status).toBe(status);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.json.error.code).toBe(status);
    expect(typeof res.json.error.message).toBe("string");
    expect(res.text).not.toMatch(/node_modules|\/src\/|at .*\(|stack/i);
  };

  it("answers unknown routes with 404", async () => {
    expectEnvelope(await api(h, "GET", "/does-not-exist", { key: h.tenant.apiKey }), 404);
    const outside = await fetch(`${h.baseUrl}/nowhere`);
    expect(outside.status).toBe(404);
    expect(((await outside.json()) as any).error.code).toBe(404);
  });

  it("answers malformed JSON with 400", async () => {
    const res = await api(h, "POST", "/presets/x/chat/completions", {
      key: h.tenant.managementKey,
      rawBody: "{not json",
      headers: { "content-type": "application/json" },
    });
    expectEnvelope(res, 400);
  });

  it("answers a non-JSON content type with 415", async () => {
    const res = await api(h, "POST", "/presets/x/chat/completions", {
      key: h.tenant.managementKey,
      rawBody: "hello",
      headers: { "content-type": "text/plain" },
    });
    expectEnvelope(res, 415);
  });

  it("answers a body over the limit with 413", async () => {
    const res = await api(h, "POST", "/presets/x/chat/completions", {
      key: h.tenant.managementKey,
      body: { messages: [{ role: "user", content: "x".repeat(4096) }] },
    });
    expectEnvelope(res, 413);
    expect(res.json.error.message).toContain("2048");
  });

  it("judges credentials before input: a malformed body without a (management) key is 401/403, not 400", async () => {
    const bad = { key: 1 };
    const none = await api(h, "POST", "/byok", { body: bad });
    expectEnvelope(none, 401);
    const ordinary = await api(h, "POST", "/byok", { key: h.tenant.apiKey, body: bad });
    expectEnvelope(ordinary, 403);
    const badQuery = await api(h, "GET", "/byok?limit=abc", { key: h.tenant.apiKey });
    expectEnvelope(badQuery, 403);
    const management = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: bad });
    expectEnvelope(management, 400);
  });

  it("treats an empty JSON body as no body", async () => {
    const del = await api(h, "DELETE", "/byok/00000000-0000-4000-8000-000000000000", {
      key: h.tenant.managementKey,
      rawBody: "",
      headers: { "content-type": "application/json" },
    });
    expectEnvelope(del, 404);
    const post = await api(h, "POST", "/presets/x/chat/completions", {
      key: h.tenant.managementKey,
      rawBody: "",
      headers: { "content-type": "application/json" },
    });
    expectEnvelope(post, 400);
  });

  it("serves health, readiness and Prometheus metrics", async () => {
    expect((await fetch(`${h.baseUrl}/healthz`)).status).toBe(200);
    const ready = await fetch(`${h.baseUrl}/readyz`);
    expect(ready.status).toBe(200);
    const metrics = await (await fetch(`${h.baseUrl}/metrics`)).text();
    expect(metrics).toContain("portico_gateway_http_request_duration_seconds");
    expect(metrics).toContain("portico_core_rpc_duration_seconds");
  });

  it("echoes a sane x-request-id and mints one otherwise", async () => {
    const given = await fetch(`${h.baseUrl}/healthz`, { headers: { "x-request-id": "abc-123" } });
    expect(given.headers.get("x-request-id")).toBe("abc-123");
    const minted = await fetch(`${h.baseUrl}/healthz`, { headers: { "x-request-id": "bad id with spaces" } });
    expect(minted.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });
});
