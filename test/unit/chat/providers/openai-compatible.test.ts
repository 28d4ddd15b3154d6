import { afterEach, describe, expect, it } from "vitest";
import { OpenAICompatibleAdapter } from "../../../../src/core/chat/providers/openai-compatible.js";
import { ProviderRegistry } from "../../../../src/core/chat/providers/index.js";
import type { ChatBody, UpstreamCall } from "../../../../src/core/chat/providers/types.js";
import { loadConfig } from "../../../../src/config.js";
import { startFakeOpenAI } from "../../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../../helpers/fake-upstreams/server.js";
import { KEY, adapterContract, collect } from "./contract.js";

const adapter = new OpenAICompatibleAdapter();
let fake: FakeUpstream | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

function call(f: FakeUpstream, body: Record<string, unknown> = {}, signal = new AbortController().signal): UpstreamCall {
  return {
    model: "gpt-4o-mini",
    baseUrl: `${f.url}/v1`,
    apiKey: KEY,
    signal,
    body: { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], temperature: 0.2, ...body },
  };
}

describe("OpenAI-compatible adapter", () => {
  it("passes the body through with the upstream model and the key as a bearer token", async () => {
    fake = await startFakeOpenAI();
    const result = await adapter.complete(call(fake, { tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }] }));
    const req = fake.requests[0]!;
    expect(req.url).toBe("/v1/chat/completions");
    expect(req.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(req.body).toMatchObject({ model: "gpt-4o-mini", stream: false, temperature: 0.2, tools: [{ type: "function" }] });
    expect(result.choices[0]!.message.content).toBe("Hello, world");
    expect(result.choices[0]!.finish_reason).toBe("stop");
    expect(result.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 });
    expect(JSON.stringify(adapter.upstreamBody(call(fake)))).not.toContain(KEY);
  });

  it("streams chunks in order, asks for usage and ends with usage", async () => {
    fake = await startFakeOpenAI({ text: ["a", "b", "c"], finish: "length", usage: { input: 5, output: 3 } });
    const chunks = await collect(adapter.stream(call(fake, { stream: true, stream_options: { include_usage: false } })));
    expect(fake.requests[0]!.body.stream_options).toEqual({ include_usage: true });
    expect(fake.requests[0]!.headers.accept).toBe("text/event-stream");
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("abc");
    expect(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0]!.finish_reason).toBe("length");
    expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 3 });
  });

  it("relays streamed tool calls", async () => {
    fake = await startFakeOpenAI({
      text: [],
      toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}', argumentPieces: ['{"city"', ':"Paris"}'] }],
      finish: "tool_calls",
      usage: { input: 1, output: 1 },
    });
    const chunks = await collect(adapter.stream(call(fake, { stream: true })));
    const calls = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    expect(calls[0]).toMatchObject({ index: 0, id: "call_1", function: { name: "get_weather" } });
    expect(calls.map((c) => c.function?.arguments ?? "").join("")).toBe('{"city":"Paris"}');
  });

});

describe("OpenAI-compatible adapter contract", () => {
  adapterContract({
    adapter,
    start: startFakeOpenAI,
    call,
    longScript: { text: Array.from({ length: 40 }, (_, i) => `t${i} `), finish: "stop", usage: { input: 1, output: 40 } },
    statuses: [[400, false], [401, true], [403, true], [404, false], [429, true], [500, true], [503, true]],
  });
});

describe("provider registry", () => {
  it("maps slugs to adapters and default base URLs, overridable per provider, plus operator-added providers", () => {
    const config = loadConfig({
      PORTICO_PROVIDER_GROQ_BASE_URL: "http://127.0.0.1:9999/openai/v1/",
      PORTICO_OPENAI_COMPATIBLE_PROVIDERS: "vllm=http://10.0.0.5:8000/v1, ollama=http://localhost:11434/v1",
    });
    const registry = new ProviderRegistry(config.providers);
    expect(registry.get("openai")).toMatchObject({ baseUrl: "https://api.openai.com/v1", adapter: { format: "openai" } });
    expect(registry.get("groq")!.baseUrl).toBe("http://127.0.0.1:9999/openai/v1");
    expect(registry.get("vllm")).toMatchObject({ baseUrl: "http://10.0.0.5:8000/v1", adapter: { format: "openai" } });
    expect(registry.get("ollama")!.baseUrl).toBe("http://localhost:11434/v1");
    expect(registry.get("anthropic")).toMatchObject({ baseUrl: "https://api.anthropic.com", adapter: { format: "anthropic" } });
    expect(registry.get("google-ai-studio")).toMatchObject({ baseUrl: "https://generativelanguage.googleapis.com/v1beta", adapter: { format: "gemini" } });
    expect(new ProviderRegistry(loadConfig({ PORTICO_PROVIDER_GOOGLE_AI_STUDIO_BASE_URL: "http://127.0.0.1:1/v1beta" }).providers).get("google-ai-studio")!.baseUrl).toBe("http://127.0.0.1:1/v1beta");
    expect(registry.slugs()).toEqual(expect.arrayContaining(["openai", "groq", "deepseek", "mistral", "together", "fireworks", "xai", "anthropic", "google-ai-studio", "vllm", "ollama"]));
    expect(registry.get("nope")).toBeUndefined();
    expect(() => loadConfig({ PORTICO_PROVIDER_OPENAI_BASE_URL: "ftp://x" })).toThrow(/PORTICO_PROVIDER_OPENAI_BASE_URL/);
    expect(() => loadConfig({ PORTICO_OPENAI_COMPATIBLE_PROVIDERS: "no-url" })).toThrow(/PORTICO_OPENAI_COMPATIBLE_PROVIDERS/);
  });
});

describe("OpenAI-compatible body filtering", () => {
  const base: ChatBody = { model: "x", messages: [{ role: "user", content: "hi" }], top_k: 5, min_p: 0.1, models: ["a"], provider: { order: ["openai"] }, plugins: [{ id: "web" }], debug: { echo_upstream_body: true }, session_id: "s", trace: { trace_id: "t" }, reasoning: { effort: "low" }, seed: 1 };
  const c = { model: "gpt-4o", baseUrl: "http://x/v1", apiKey: KEY, signal: new AbortController().signal, body: base };

  it("drops gateway-only fields and maps reasoning.effort to reasoning_effort", () => {
    const body = adapter.upstreamBody(c);
    for (const f of ["models", "provider", "plugins", "debug", "session_id", "trace", "reasoning"]) expect(body).not.toHaveProperty(f);
    expect(body).toMatchObject({ model: "gpt-4o", seed: 1, top_k: 5, min_p: 0.1, reasoning_effort: "low" });
  });

  it("the openai provider also drops sampling extras OpenAI rejects", () => {
    const body = new ProviderRegistry().get("openai")!.adapter.upstreamBody(c) as Record<string, unknown>;
    expect(body).not.toHaveProperty("top_k");
    expect(body).not.toHaveProperty("min_p");
    expect(new ProviderRegistry().get("together")!.adapter.upstreamBody(c)).toHaveProperty("top_k", 5);
  });
});
