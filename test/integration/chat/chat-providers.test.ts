/**
 * The chat-completions route through the Anthropic Messages and Gemini adapters, end to end with the
 * `openai` SDK against fake upstreams in each provider's own wire format: text, tool calls, streaming,
 * usage and stop reasons come back in OpenAI's shape, and each provider gets its own authentication.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeAnthropic } from "../../helpers/fake-upstreams/anthropic.js";
import { startFakeGemini } from "../../helpers/fake-upstreams/gemini.js";
import type { FakeUpstream, Script } from "../../helpers/fake-upstreams/server.js";

const withTool = (finish: string): Script => ({
  text: ["Let me ", "check."],
  toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }],
  finish,
  usage: { input: 20, output: 7 },
});

describe("chat completions through the Anthropic and Gemini adapters", () => {
  let h: Harness;
  let anthropic: FakeUpstream;
  let gemini: FakeUpstream;
  let client: OpenAI;
  const tools = [{ type: "function" as const, function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];

  beforeAll(async () => {
    anthropic = await startFakeAnthropic(withTool("tool_use"));
    gemini = await startFakeGemini({ text: ["Bonjour", " !"], finish: "STOP", usage: { input: 9, output: 2 } });
    h = await startHarness({
      env: { PORTICO_PROVIDER_ANTHROPIC_BASE_URL: anthropic.url, PORTICO_PROVIDER_GOOGLE_AI_STUDIO_BASE_URL: `${gemini.url}/v1beta` },
    });
    for (const [provider, key] of [["anthropic", "sk-ant-test"], ["google-ai-studio", "AIza-test"]] as const) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider, key } })).status).toBe(200);
    }
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([anthropic, gemini].map((f) => f?.close()));
  });

  it("Anthropic, non-streaming: a tool call and the mapped stop reason, with the key in x-api-key", async () => {
    const res = await client.chat.completions.create({ model: "anthropic/claude-sonnet-4", messages: [{ role: "user", content: "weather?" }], tools, max_tokens: 100 });
    const choice = res.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.tool_calls?.[0]).toMatchObject({ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } });
    expect(res.usage).toMatchObject({ prompt_tokens: 20, completion_tokens: 7 });
    const upstream = anthropic.requests.at(-1)!;
    expect(upstream.headers["x-api-key"]).toBe("sk-ant-test");
    // A canonical slug of the catalog: the endpoint's own model id goes upstream (docs/routing.md).
    expect(upstream.body.model).toBe("claude-sonnet-4-20250514");
    expect(upstream.body.tools?.[0]?.name).toBe("get_weather");
  });

  it("Anthropic, streaming: text then tool-call deltas, finish tool_calls, usage at the end", async () => {
    const stream = await client.chat.completions.create({ model: "anthropic/claude-sonnet-4", messages: [{ role: "user", content: "weather?" }], tools, stream: true, stream_options: { include_usage: true } });
    let text = "";
    let args = "";
    let finish: string | null = null;
    let usage: unknown;
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      text += c?.delta?.content ?? "";
      args += c?.delta?.tool_calls?.[0]?.function?.arguments ?? "";
      if (c?.finish_reason) finish = c.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe("Let me check.");
    expect(JSON.parse(args)).toEqual({ city: "Paris" });
    expect(finish).toBe("tool_calls");
    expect(usage).toMatchObject({ prompt_tokens: 20, completion_tokens: 7 });
  });

  it("Gemini: text, stop, usage; streaming and not", async () => {
    const res = await client.chat.completions.create({ model: "google-ai-studio/gemini-2.5-flash", messages: [{ role: "user", content: "salut" }] });
    expect(res.choices[0]!.message.content).toBe("Bonjour !");
    expect(res.choices[0]!.finish_reason).toBe("stop");
    expect(res.usage).toMatchObject({ prompt_tokens: 9, completion_tokens: 2 });
    expect(JSON.stringify(gemini.requests.at(-1)!.headers)).toContain("AIza-test");
    const stream = await client.chat.completions.create({ model: "google-ai-studio/gemini-2.5-flash", messages: [{ role: "user", content: "salut" }], stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe("Bonjour !");
  });
});
