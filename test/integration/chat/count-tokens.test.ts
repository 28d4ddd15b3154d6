/**
 * `POST /api/v1/messages/count_tokens` (docs/dialects.md, "Counting") with `@anthropic-ai/sdk`'s
 * `messages.countTokens`: the provider's count where the first planned endpoint offers counting (Anthropic's
 * `count_tokens`, Gemini's `countTokens`), Portico's documented estimate otherwise (the o200k tokenizer, 3 per
 * message, 1,600 per image); errors in Anthropic's envelope; the gRPC ChatService.CountMessageTokens the gateway
 * translates to. Nothing is recorded as a generation. SQLite and PostgreSQL.
 */
import Anthropic from "@anthropic-ai/sdk";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChatService } from "../../../src/gen/portico/chat/v1/chat_service_pb.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeAnthropic } from "../../helpers/fake-upstreams/anthropic.js";
import { startFakeGemini } from "../../helpers/fake-upstreams/gemini.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";

describe.each(["sqlite", "postgresql"] as const)("Messages count_tokens (%s)", (provider) => {
  let h: Harness;
  let anthropic: FakeUpstream;
  let gemini: FakeUpstream;
  let openai: FakeUpstream;
  let client: Anthropic;

  beforeAll(async () => {
    anthropic = await startFakeAnthropic();
    gemini = await startFakeGemini();
    openai = await startFakeOpenAI();
    h = await startHarness({
      provider,
      env: {
        PORTICO_PROVIDER_ANTHROPIC_BASE_URL: anthropic.url,
        PORTICO_PROVIDER_GOOGLE_AI_STUDIO_BASE_URL: `${gemini.url}/v1beta`,
        PORTICO_PROVIDER_GROQ_BASE_URL: `${openai.url}/v1`,
      },
    });
    for (const [p, key] of [["anthropic", "sk-ant-count"], ["google-ai-studio", "goog-count"], ["groq", "gsk-count"]] as const) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: p, key } })).status).toBe(200);
    }
    client = new Anthropic({ baseURL: `${h.baseUrl}/api`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([anthropic?.close(), gemini?.close(), openai?.close()]);
  });

  const prompt = {
    system: "You are terse.",
    messages: [
      { role: "user" as const, content: "What is the weather in Paris?" },
      { role: "assistant" as const, content: [{ type: "tool_use" as const, id: "toolu_1", name: "get_weather", input: { city: "Paris" } }] },
      { role: "user" as const, content: [{ type: "tool_result" as const, tool_use_id: "toolu_1", content: "Sunny, 21 C" }] },
    ],
    tools: [{ name: "get_weather", description: "Weather of a city", input_schema: { type: "object" as const, properties: { city: { type: "string" } } } }],
  };

  it("Anthropic: the SDK's countTokens gets Anthropic's own count", async () => {
    anthropic.script = { text: [], finish: "end_turn", usage: { input: 321, output: 0 } };
    expect(await client.messages.countTokens({ model: "anthropic/claude-sonnet-4", ...prompt })).toEqual({ input_tokens: 321 });
    const up = anthropic.requests.at(-1)!;
    expect(up.url).toBe("/v1/messages/count_tokens");
    expect(up.headers["x-api-key"]).toBe("sk-ant-count");
    expect(up.body).toMatchObject({ model: "claude-sonnet-4-20250514", system: "You are terse.", tools: [{ name: "get_weather" }] });
    expect(up.body.max_tokens).toBeUndefined();
  });

  it("Gemini: the count is Gemini's countTokens, with the system instruction and tools in a generateContentRequest", async () => {
    gemini.script = { text: [], finish: "STOP", usage: { input: 77, output: 0 } };
    const res = await fetch(`${h.baseUrl}/api/v1/messages/count_tokens`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": h.tenant.apiKey },
      body: JSON.stringify({ model: "google/gemini-2.5-flash", ...prompt }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-portico-token-count")).toBe("exact");
    expect(await res.json()).toEqual({ input_tokens: 77 });
    const up = gemini.requests.at(-1)!;
    expect(up.url).toBe("/v1beta/models/gemini-2.5-flash:countTokens");
    expect(up.headers["x-goog-api-key"]).toBe("goog-count");
    const req = up.body.generateContentRequest;
    expect(req.model).toBe("models/gemini-2.5-flash");
    expect(req.systemInstruction).toEqual({ parts: [{ text: "You are terse." }] });
    expect(req.contents).toHaveLength(3);
    expect(req.tools[0].functionDeclarations[0].name).toBe("get_weather");
    expect(req.generationConfig).toBeUndefined();
    expect(await client.messages.countTokens({ model: "google/gemini-2.5-flash", ...prompt })).toEqual({ input_tokens: 77 });
  });

  it("an OpenAI-compatible endpoint offers no counting: Portico's estimate (o200k, 3 per message, 1,600 per image), no upstream call", async () => {
    const before = openai.requests.length;
    const image = { type: "image" as const, source: { type: "base64" as const, media_type: "image/png" as const, data: "iVBORw0KGgo=" } };
    const body = { model: "groq/llama-4", messages: [{ role: "user" as const, content: [{ type: "text" as const, text: "Describe this picture, please." }, image] }] };
    const res = await fetch(`${h.baseUrl}/api/v1/messages/count_tokens`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${h.tenant.apiKey}` },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-portico-token-count")).toBe("estimate");
    const expected = countTokens("Describe this picture, please.") + 3 + 1600;
    expect(await res.json()).toEqual({ input_tokens: expected });
    expect(await client.messages.countTokens(body)).toEqual({ input_tokens: expected });
    // System prompt, tool call and result, and the tool's definition are all counted.
    const full = await client.messages.countTokens({ model: "groq/llama-4", ...prompt });
    const text = ["You are terse.", "What is the weather in Paris?", "Sunny, 21 C", "get_weather", JSON.stringify({ city: "Paris" })];
    const tool = JSON.stringify({ name: "get_weather", description: "Weather of a city", parameters: prompt.tools[0]!.input_schema });
    expect(full.input_tokens).toBe(text.reduce((n, t) => n + countTokens(t), 0) + countTokens(tool) + 4 * 3);
    expect(openai.requests.length).toBe(before);
  });

  it("errors in Anthropic's envelope: a refused field, no key, a provider that fails to count", async () => {
    await expect(client.messages.countTokens({ model: "groq/llama-4", messages: [{ role: "user", content: "x" }], max_tokens: 5 } as any)).rejects.toBeInstanceOf(Anthropic.BadRequestError);
    const bad = await fetch(`${h.baseUrl}/api/v1/messages/count_tokens`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": h.tenant.apiKey },
      body: JSON.stringify({ model: "groq/llama-4", messages: [{ role: "user", content: "x" }], temperature: 0.5 }),
    });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error", message: expect.stringContaining("temperature") } });
    const anonymous = new Anthropic({ baseURL: `${h.baseUrl}/api`, apiKey: "pk-v1-" + "0".repeat(64), maxRetries: 0 });
    await expect(anonymous.messages.countTokens({ model: "groq/llama-4", messages: [{ role: "user", content: "x" }] })).rejects.toBeInstanceOf(Anthropic.AuthenticationError);
    gemini.knobs = { failStatus: 503, failMessage: "backend unavailable" };
    try {
      const failed = await fetch(`${h.baseUrl}/api/v1/messages/count_tokens`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": h.tenant.apiKey },
        body: JSON.stringify({ model: "google/gemini-2.5-flash", messages: [{ role: "user", content: "x" }] }),
      });
      expect(failed.status).toBe(502);
      const json = (await failed.json()) as any;
      expect(json).toMatchObject({ type: "error", error: { type: "api_error" } });
      expect(json.error.message).toContain("backend unavailable");
      expect(JSON.stringify(json)).not.toContain("goog-count");
    } finally {
      gemini.knobs = {};
    }
  });

  it("gRPC: ChatService.CountMessageTokens says whether the count is exact and whose it is", async () => {
    const grpc = createClient(ChatService, createGrpcTransport({ baseUrl: h.coreUrl }));
    const headers = { authorization: `Bearer ${h.tenant.apiKey}` };
    gemini.script = { text: [], finish: "STOP", usage: { input: 12, output: 0 } };
    const exact = await grpc.countMessageTokens({ body: { model: "google/gemini-2.5-flash", messages: [{ role: "user", content: "hi" }] } }, { headers });
    expect(exact).toMatchObject({ inputTokens: 12n, exact: true, provider: "google-ai-studio" });
    const estimate = await grpc.countMessageTokens({ body: { model: "groq/llama-4", messages: [{ role: "user", content: "hi" }] } }, { headers });
    expect(estimate).toMatchObject({ inputTokens: BigInt(countTokens("hi") + 3), exact: false, provider: "" });
  });
});
