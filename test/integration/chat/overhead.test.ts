/**
 * Portico's own time made visible (docs/chat.md, "Overhead"): every chat response carries
 * `x-portico-overhead-ms` (the time to the response head minus the time spent waiting on providers) and
 * /metrics the `portico_overhead_seconds` histogram by route and provider. The providers here hold their
 * answer for PROVIDER_DELAY_MS before the status line, so a header that did not subtract the wait would be at
 * least that large: each value must fit under the client's own time minus the delay.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import { defaultScript, type FakeUpstream } from "../../helpers/fake-upstreams/server.js";

const PROVIDER_DELAY_MS = 300;
const HEADER = "x-portico-overhead-ms";

/** POSTs a chat body; resolves at the response head with the client's elapsed time then, and the whole body. */
async function chat(baseUrl: string, key: string, body: unknown): Promise<{ status: number; header: string | null; elapsedMs: number; text: string }> {
  const started = performance.now();
  const res = await fetch(`${baseUrl}/api/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const elapsedMs = performance.now() - started;
  return { status: res.status, header: res.headers.get(HEADER), elapsedMs, text: await res.text() };
}

/** The header as a number of milliseconds (it must be one). */
function overheadOf(header: string | null): number {
  expect(header).toMatch(/^\d+\.\d{3}$/);
  return Number(header);
}

/** The histogram's count for one route and provider in a /metrics text. */
function countOf(metrics: string, provider: string, route = "/api/v1/chat/completions"): number {
  const line = metrics.split("\n").find((l) => l.startsWith(`portico_overhead_seconds_count{route="${route}",provider="${provider}"}`));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

describe("chat overhead header and histogram", () => {
  let h: Harness;
  let slow: FakeUpstream;
  let slowDown: FakeUpstream;
  const messages = [{ role: "user", content: "hi" }];

  beforeAll(async () => {
    slow = await startFakeOpenAI(defaultScript(), { headerDelayMs: PROVIDER_DELAY_MS });
    slowDown = await startFakeOpenAI(defaultScript(), { headerDelayMs: PROVIDER_DELAY_MS, failStatus: 500, failMessage: "down" });
    h = await startHarness({
      provider: "sqlite",
      env: { PORTICO_PROVIDER_GROQ_BASE_URL: `${slow.url}/v1`, PORTICO_PROVIDER_OPENAI_BASE_URL: `${slowDown.url}/v1` },
    });
    for (const [provider, key] of [["groq", "gsk-test"], ["openai", "sk-test"]] as const) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider, key } })).status).toBe(200);
    }
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([slow, slowDown].map((f) => f?.close()));
  });

  const metricsText = async (baseUrl: string) => (await fetch(`${baseUrl}/metrics`)).text();

  it("non-streaming: the header excludes the provider's time, and the histogram counts the request under its provider", async () => {
    const before = countOf(await metricsText(h.baseUrl), "groq");
    const res = await chat(h.baseUrl, h.tenant.apiKey, { model: "groq/llama-3.3-70b", messages });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text).choices[0].message.content).toBe("Hello, world");
    expect(overheadOf(res.header)).toBeLessThanOrEqual(res.elapsedMs - PROVIDER_DELAY_MS);
    expect(countOf(await metricsText(h.baseUrl), "groq")).toBe(before + 1);
  });

  it("streaming: the header is sent at stream open and measures Portico's time to the first chunk", async () => {
    const before = countOf(await metricsText(h.baseUrl), "groq");
    const res = await chat(h.baseUrl, h.tenant.apiKey, { model: "groq/llama-3.3-70b", messages, stream: true });
    expect(res.status).toBe(200);
    expect(res.text).toContain("data: [DONE]");
    expect(overheadOf(res.header)).toBeLessThanOrEqual(res.elapsedMs - PROVIDER_DELAY_MS);
    expect(countOf(await metricsText(h.baseUrl), "groq")).toBe(before + 1);
  });

  it("the other dialects' routes and embeddings report it the same way, each under its own route", async () => {
    const post = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
      const started = performance.now();
      const res = await fetch(`${h.baseUrl}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${h.tenant.apiKey}`, "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
      });
      const elapsedMs = performance.now() - started;
      return { status: res.status, header: res.headers.get(HEADER), elapsedMs, text: await res.text() };
    };
    const cases = [
      ["/api/v1/messages", "/api/v1/messages", { model: "groq/llama-3.3-70b", max_tokens: 50, messages }],
      ["/api/v1/messages", "/api/v1/messages", { model: "groq/llama-3.3-70b", max_tokens: 50, messages, stream: true }],
      ["/api/v1/responses", "/api/v1/responses", { model: "groq/llama-3.3-70b", input: "hi" }],
      ["/api/v1/responses", "/api/v1/responses", { model: "groq/llama-3.3-70b", input: "hi", stream: true }],
      ["/api/v1beta/models", "/api/v1beta/models/groq/llama-3.3-70b:generateContent", { contents: [{ role: "user", parts: [{ text: "hi" }] }] }],
      ["/api/v1beta/models", "/api/v1beta/models/groq/llama-3.3-70b:streamGenerateContent?alt=sse", { contents: [{ role: "user", parts: [{ text: "hi" }] }] }],
      ["/api/v1/embeddings", "/api/v1/embeddings", { model: "groq/fake-embed", input: "hi" }],
    ] as const;
    for (const [route, path, body] of cases) {
      const before = countOf(await metricsText(h.baseUrl), "groq", route);
      const res = await post(path, body);
      expect(res.status, `${path}: ${res.text}`).toBe(200);
      expect(overheadOf(res.header)).toBeLessThanOrEqual(res.elapsedMs - PROVIDER_DELAY_MS);
      expect(countOf(await metricsText(h.baseUrl), "groq", route), path).toBe(before + 1);
    }
  });

  it("errors carry it too: after failed attempts without their wait, before any attempt as the whole time", async () => {
    const before = countOf(await metricsText(h.baseUrl), "none");
    const failed = await chat(h.baseUrl, h.tenant.apiKey, { model: "openai/gpt-4o", messages });
    expect(failed.status).toBe(502);
    expect(overheadOf(failed.header)).toBeLessThanOrEqual(failed.elapsedMs - PROVIDER_DELAY_MS);
    const failedStream = await chat(h.baseUrl, h.tenant.apiKey, { model: "openai/gpt-4o", messages, stream: true });
    expect(failedStream.status).toBe(502);
    expect(overheadOf(failedStream.header)).toBeLessThanOrEqual(failedStream.elapsedMs - PROVIDER_DELAY_MS);
    const invalid = await chat(h.baseUrl, h.tenant.apiKey, { model: "groq/llama-3.3-70b", messages, temperature: "hot" });
    expect(invalid.status).toBe(400);
    expect(overheadOf(invalid.header)).toBeLessThanOrEqual(invalid.elapsedMs);
    expect(countOf(await metricsText(h.baseUrl), "none")).toBe(before + 3);
  });

  it("a gateway split from the core (gRPC) gets the provider's time from the core and sets the same header", async () => {
    const { buildGateway } = await import("../../../src/gateway/app.js");
    const { createCoreTransport } = await import("../../../src/gateway/core-transport.js");
    const { createMetrics } = await import("../../../src/lib/metrics.js");
    const metrics = createMetrics();
    const split = await buildGateway({
      transport: createCoreTransport(h.coreUrl),
      coreOverTheWire: true,
      logger: h.gateway.log as never,
      metrics,
      bodyLimitBytes: h.config.bodyLimitBytes,
      brand: h.config.brand,
    });
    await split.listen({ host: "127.0.0.1", port: 0 });
    try {
      const url = `http://127.0.0.1:${(split.server.address() as { port: number }).port}`;
      const unary = await chat(url, h.tenant.apiKey, { model: "groq/llama-3.3-70b", messages });
      expect(JSON.parse(unary.text).choices[0].message.content).toBe("Hello, world");
      expect(overheadOf(unary.header)).toBeLessThanOrEqual(unary.elapsedMs - PROVIDER_DELAY_MS);
      const stream = await chat(url, h.tenant.apiKey, { model: "groq/llama-3.3-70b", messages, stream: true });
      expect(stream.text).toContain('"content":"Hello"');
      expect(overheadOf(stream.header)).toBeLessThanOrEqual(stream.elapsedMs - PROVIDER_DELAY_MS);
      const failed = await chat(url, h.tenant.apiKey, { model: "openai/gpt-4o", messages });
      expect(failed.status).toBe(502);
      expect(overheadOf(failed.header)).toBeLessThanOrEqual(failed.elapsedMs - PROVIDER_DELAY_MS);
      const text = await metrics.render();
      expect(countOf(text, "groq")).toBe(2);
      expect(countOf(text, "none")).toBe(1);
    } finally {
      await split.close();
    }
  });
});
