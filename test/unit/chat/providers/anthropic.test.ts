import { describe, expect, it, afterEach } from "vitest";
import { AnthropicAdapter, anthropicFinish } from "../../../../src/core/chat/providers/anthropic.js";
import type { UpstreamCall } from "../../../../src/core/chat/providers/types.js";
import { startFakeAnthropic } from "../../../helpers/fake-upstreams/anthropic.js";
import type { FakeUpstream } from "../../../helpers/fake-upstreams/server.js";
import { KEY, adapterContract, collect } from "./contract.js";

const adapter = new AnthropicAdapter();
const call = (f: FakeUpstream, body: Record<string, unknown> = {}, signal = new AbortController().signal): UpstreamCall => ({
  model: "claude-sonnet-4-5",
  baseUrl: f.url,
  apiKey: KEY,
  signal,
  body: { model: "anthropic/claude-sonnet-4-5", messages: [{ role: "user", content: "hi" }], ...body },
});
let fake: FakeUpstream | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

describe("Anthropic adapter: request translation", () => {
  it("moves system messages out, converts parts, images, tool calls and tool results, maps sampling and tools", () => {
    const body = adapter.upstreamBody({
      ...call({ url: "http://x" } as FakeUpstream),
      body: {
        model: "m",
        messages: [
          { role: "system", content: "Be brief." },
          { role: "developer", content: [{ type: "text", text: "Use French." }] },
          { role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }, { type: "image_url", image_url: { url: "https://e.x/cat.jpg" } }] },
          { role: "assistant", content: null, tool_calls: [{ id: "toolu_1", type: "function", function: { name: "lookup", arguments: '{"q":"cat"}' } }] },
          { role: "tool", tool_call_id: "toolu_1", content: "a cat" },
          { role: "user", content: "thanks" },
        ],
        stop: "END",
        temperature: 0.5,
        top_p: 0.9,
        top_k: 40,
        user: "u-1",
        tools: [{ type: "function", function: { name: "lookup", description: "Look up", parameters: { type: "object", properties: { q: { type: "string" } } } } }],
        tool_choice: { type: "function", function: { name: "lookup" } },
        parallel_tool_calls: false,
      },
    });
    expect(body).toEqual({
      model: "claude-sonnet-4-5",
      system: "Be brief.\n\nUse French.",
      max_tokens: 4096,
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "What is this?" },
            { type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } },
            { type: "image", source: { type: "url", url: "https://e.x/cat.jpg" } },
          ],
        },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "lookup", input: { q: "cat" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "a cat" }, { type: "text", text: "thanks" }] },
      ],
      stop_sequences: ["END"],
      temperature: 0.5,
      top_p: 0.9,
      top_k: 40,
      metadata: { user_id: "u-1" },
      tools: [{ name: "lookup", description: "Look up", input_schema: { type: "object", properties: { q: { type: "string" } } } }],
      tool_choice: { type: "tool", name: "lookup", disable_parallel_tool_use: true },
    });
  });

  it("keeps cache_control breakpoints on system parts, content parts and tools", () => {
    const eph = { type: "ephemeral" };
    const body = adapter.upstreamBody({
      ...call({ url: "http://x" } as FakeUpstream),
      body: {
        model: "m",
        messages: [
          { role: "system", content: [{ type: "text", text: "Long rules", cache_control: eph }] },
          { role: "user", content: [{ type: "text", text: "Big doc", cache_control: { type: "ephemeral", ttl: "1h" } }, { type: "text", text: "Q?" }] },
        ],
        tools: [{ type: "function", function: { name: "f" }, cache_control: eph }],
      },
    });
    expect(body.system).toEqual([{ type: "text", text: "Long rules", cache_control: eph }]);
    expect(body.messages).toEqual([{ role: "user", content: [{ type: "text", text: "Big doc", cache_control: { type: "ephemeral", ttl: "1h" } }, { type: "text", text: "Q?" }] }]);
    expect((body.tools as unknown[])[0]).toMatchObject({ name: "f", cache_control: eph });
  });

  it("maps tool_choice values and max_tokens", () => {
    const tools = [{ type: "function", function: { name: "f" } }];
    const tc = (tool_choice: unknown) => adapter.upstreamBody({ ...call({ url: "http://x" } as FakeUpstream), body: { model: "m", messages: [], tools, tool_choice } });
    expect(tc("auto").tool_choice).toEqual({ type: "auto" });
    expect(tc("required").tool_choice).toEqual({ type: "any" });
    expect(tc("none").tools).toBeUndefined();
    expect(tc(undefined).tools).toEqual([{ name: "f", input_schema: { type: "object", properties: {} } }]);
    expect(adapter.upstreamBody({ ...call({ url: "http://x" } as FakeUpstream), body: { model: "m", messages: [], max_completion_tokens: 77 } }).max_tokens).toBe(77);
  });

  it("maps reasoning to an extended thinking budget within max_tokens", () => {
    const think = (body: Record<string, unknown>) => adapter.upstreamBody({ ...call({ url: "http://x" } as FakeUpstream), body: { model: "m", messages: [], ...body } }).thinking;
    expect(think({ max_tokens: 10000, reasoning: { effort: "high" } })).toEqual({ type: "enabled", budget_tokens: 8000 });
    expect(think({ max_tokens: 10000, reasoning_effort: "low" })).toEqual({ type: "enabled", budget_tokens: 2000 });
    expect(think({ max_tokens: 4000, reasoning: { effort: "minimal" } })).toEqual({ type: "enabled", budget_tokens: 1024 });
    expect(think({ max_tokens: 1000, reasoning: { effort: "high" } })).toBeUndefined();
    expect(think({ reasoning: { effort: "none" } })).toBeUndefined();
    expect(think({})).toBeUndefined();
  });

  it("maps stop reasons", () => {
    expect(["end_turn", "stop_sequence", "max_tokens", "tool_use", "refusal", null].map(anthropicFinish)).toEqual(["stop", "stop", "length", "tool_calls", "content_filter", null]);
  });
});

describe("Anthropic adapter against the fake upstream", () => {
  it("sends x-api-key and anthropic-version and translates a completion with usage", async () => {
    fake = await startFakeAnthropic({ text: ["Hi", " there"], reasoning: ["hmm"], finish: "max_tokens", usage: { input: 20, output: 2, cached: 5 } });
    const result = await adapter.complete({ ...call(fake), options: { anthropic_beta: "tools-2024" } });
    const req = fake.requests[0]!;
    expect(req.url).toBe("/v1/messages");
    expect(req.headers["x-api-key"]).toBe(KEY);
    expect(req.headers["anthropic-version"]).toBe("2023-06-01");
    expect(req.headers["anthropic-beta"]).toBe("tools-2024");
    expect(req.headers.authorization).toBeUndefined();
    expect(result.choices[0]).toMatchObject({ message: { role: "assistant", content: "Hi there", reasoning: "hmm" }, finish_reason: "length", native_finish_reason: "max_tokens" });
    expect(result.usage).toEqual({ prompt_tokens: 25, completion_tokens: 2, total_tokens: 27, prompt_tokens_details: { cached_tokens: 5, cache_write_tokens: 0 } });
  });

  it("options.anthropic_version replaces the version header", async () => {
    fake = await startFakeAnthropic();
    await adapter.complete({ ...call(fake), options: { anthropic_version: "2024-01-01" } });
    expect(fake.requests[0]!.headers["anthropic-version"]).toBe("2024-01-01");
  });

  it("translates tool_use in a completion", async () => {
    fake = await startFakeAnthropic({ text: [], toolCalls: [{ id: "toolu_9", name: "get", arguments: '{"a":1}' }], finish: "tool_use", usage: { input: 1, output: 1 } });
    const result = await adapter.complete(call(fake));
    expect(result.choices[0]!.message).toEqual({ role: "assistant", content: null, tool_calls: [{ id: "toolu_9", type: "function", function: { name: "get", arguments: '{"a":1}' } }] });
    expect(result.choices[0]!.finish_reason).toBe("tool_calls");
  });

  it("translates the event stream: text, thinking, tool input deltas, stop reason and usage on the last chunk", async () => {
    fake = await startFakeAnthropic({
      text: ["Let me ", "check."],
      reasoning: ["think", "ing"],
      toolCalls: [
        { id: "toolu_1", name: "a", arguments: '{"x":1}', argumentPieces: ['{"x"', ":1}"] },
        { id: "toolu_2", name: "b", arguments: "{}" },
      ],
      finish: "tool_use",
      usage: { input: 30, output: 12 },
    });
    const chunks = await collect(adapter.stream(call(fake, { stream: true })));
    expect(fake.requests[0]!.body.stream).toBe(true);
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: "assistant", content: "" });
    expect(chunks[0]!.id).toBe("msg_fake1");
    expect(chunks.map((c) => c.choices[0]!.delta.reasoning ?? "").join("")).toBe("thinking");
    expect(chunks.map((c) => c.choices[0]!.delta.content ?? "").join("")).toBe("Let me check.");
    const calls = chunks.flatMap((c) => c.choices[0]!.delta.tool_calls ?? []);
    expect(calls.filter((c) => c.id).map((c) => [c.index, c.id, c.function?.name])).toEqual([[0, "toolu_1", "a"], [1, "toolu_2", "b"]]);
    expect(calls.filter((c) => c.index === 0).map((c) => c.function?.arguments).join("")).toBe('{"x":1}');
    const last = chunks.at(-1)!;
    expect(last.choices[0]).toMatchObject({ finish_reason: "tool_calls", native_finish_reason: "tool_use" });
    expect(last.usage).toMatchObject({ prompt_tokens: 30, completion_tokens: 12, total_tokens: 42 });
  });
});

describe("Anthropic adapter contract", () => {
  adapterContract({
    adapter,
    start: startFakeAnthropic,
    call,
    longScript: { text: Array.from({ length: 40 }, (_, i) => `t${i} `), finish: "end_turn", usage: { input: 1, output: 40 } },
    statuses: [[400, false], [401, true], [403, true], [404, false], [413, false], [429, true], [500, true], [529, true]],
  });
});
