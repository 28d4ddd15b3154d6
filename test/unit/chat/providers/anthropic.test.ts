import { describe, expect, it, afterEach } from "vitest";
import { ANTHROPIC_MAX_PAUSE_CONTINUATIONS, AnthropicAdapter, anthropicFinish } from "../../../../src/core/chat/providers/anthropic.js";
import type { UpstreamCall } from "../../../../src/core/chat/providers/types.js";
import type { ChatToolChoice } from "../../../../src/contract/requests/chat-request.js";
import { messageEvents, startFakeAnthropic } from "../../../helpers/fake-upstreams/anthropic.js";
import type { FakeUpstream, Script } from "../../../helpers/fake-upstreams/server.js";
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
    const eph = { type: "ephemeral" as const };
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
    const tc = (tool_choice?: ChatToolChoice) => adapter.upstreamBody({ ...call({ url: "http://x" } as FakeUpstream), body: { model: "m", messages: [], tools, tool_choice } });
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

// A turn Anthropic pauses (`pause_turn`: its server tools' loop hit its limit) after a search, then ends on the
// continuation (docs.anthropic.com, "Handling stop reasons", pause_turn: send the paused response back as-is).
const C1 = { type: "web_search_result_location", url: "https://a.example/1", title: "One", cited_text: "first fact" };
const C2 = { type: "web_search_result_location", url: "https://b.example/2", title: "Two", cited_text: "second fact" };
const pausedMessage = {
  id: "msg_p1", model: "claude-sonnet-4-5", stop_reason: "pause_turn",
  content: [
    { type: "text", text: "Searching. " },
    { type: "server_tool_use", id: "srvtoolu_1", name: "web_search", input: { query: "first" } },
    { type: "web_search_tool_result", tool_use_id: "srvtoolu_1", content: [{ type: "web_search_result", url: "https://a.example/1", title: "One", encrypted_content: "EqA" }] },
    { type: "text", text: "The first fact (é).", citations: [C1] },
  ],
  usage: { input_tokens: 500, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 40, server_tool_use: { web_search_requests: 1 } },
};
const resumedMessage = {
  id: "msg_p2", model: "claude-sonnet-4-5", stop_reason: "end_turn",
  content: [
    { type: "server_tool_use", id: "srvtoolu_2", name: "web_search", input: { query: "second" } },
    { type: "web_search_tool_result", tool_use_id: "srvtoolu_2", content: [{ type: "web_search_result", url: "https://b.example/2", title: "Two", encrypted_content: "EqB" }] },
    { type: "text", text: " The second fact.", citations: [C2] },
  ],
  usage: { input_tokens: 900, cache_creation_input_tokens: 0, cache_read_input_tokens: 100, output_tokens: 30, server_tool_use: { web_search_requests: 2 } },
};
const raw = (m: typeof pausedMessage): Script => ({ text: [], finish: m.stop_reason, usage: { input: 0, output: 0 }, raw: { completion: m, events: messageEvents(m) } });
const WHOLE = "Searching. The first fact (é). The second fact.";

describe("Anthropic adapter: a paused turn (pause_turn) is continued", () => {
  const searchCall = (f: FakeUpstream) => ({ ...call(f), webSearch: { maxUses: 5 } });

  it("non-streamed: the paused content goes back as the last assistant turn, unchanged; one answer, usage summed, citations offset", async () => {
    fake = await startFakeAnthropic();
    fake.scripts = [raw(pausedMessage), raw(resumedMessage)];
    const res = await adapter.complete(searchCall(fake));
    expect(fake.requests).toHaveLength(2);
    const [first, second] = fake.requests.map((r) => r.body);
    expect(first.messages).toEqual([{ role: "user", content: [{ type: "text", text: "hi" }] }]);
    expect(second.messages).toEqual([...first.messages, { role: "assistant", content: pausedMessage.content }]);
    expect(second.tools).toEqual(first.tools);
    const message = res.choices[0]!.message;
    expect(message.content).toBe(WHOLE);
    expect(res.choices[0]).toMatchObject({ finish_reason: "stop", native_finish_reason: "end_turn" });
    const span = (text: string) => ({ start_index: WHOLE.indexOf(text), end_index: WHOLE.indexOf(text) + text.length });
    expect(message.annotations).toEqual([
      { type: "url_citation", url_citation: { url: C1.url, title: "One", content: "first fact", ...span("The first fact (é).") } },
      { type: "url_citation", url_citation: { url: C2.url, title: "Two", content: "second fact", ...span(" The second fact.") } },
    ]);
    expect(res.usage).toEqual({
      prompt_tokens: 1500, completion_tokens: 70, total_tokens: 1570,
      prompt_tokens_details: { cached_tokens: 100, cache_write_tokens: 0 }, server_tool_use: { web_search_requests: 3 },
    });
  });

  it("streamed: one stream across the continuation (one role chunk, one finish), the paused blocks rebuilt from the events and sent back", async () => {
    fake = await startFakeAnthropic();
    fake.scripts = [raw(pausedMessage), raw(resumedMessage)];
    const chunks = await collect(adapter.stream(searchCall(fake)));
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[1]!.body.messages.at(-1)).toEqual({ role: "assistant", content: pausedMessage.content });
    expect(chunks.filter((c) => c.choices[0]?.delta.role)).toHaveLength(1);
    const finishing = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finishing).toHaveLength(1);
    expect(finishing[0]!.choices[0]).toMatchObject({ finish_reason: "stop", native_finish_reason: "end_turn" });
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe(WHOLE);
    expect(chunks.every((c) => c.id === "msg_p1")).toBe(true);
    const done = await adapter.complete(searchCall(Object.assign(fake, { scripts: [raw(pausedMessage), raw(resumedMessage)] })));
    expect(finishing[0]!.choices[0]!.delta.annotations).toEqual(done.choices[0]!.message.annotations);
    expect(finishing[0]!.usage).toEqual(done.usage);
  });

  it(`bounded: after ${ANTHROPIC_MAX_PAUSE_CONTINUATIONS} continuations the answer ends with what there is (native_finish_reason pause_turn)`, async () => {
    fake = await startFakeAnthropic();
    fake.scripts = [raw(pausedMessage)];
    const res = await adapter.complete(searchCall(fake));
    expect(fake.requests).toHaveLength(1 + ANTHROPIC_MAX_PAUSE_CONTINUATIONS);
    // Each continuation carries every paused message's content so far, in order.
    expect(fake.requests.at(-1)!.body.messages.at(-1).content).toHaveLength(pausedMessage.content.length * ANTHROPIC_MAX_PAUSE_CONTINUATIONS);
    expect(res.choices[0]).toMatchObject({ finish_reason: "stop", native_finish_reason: "pause_turn" });
    expect(res.usage!.server_tool_use).toEqual({ web_search_requests: 1 + ANTHROPIC_MAX_PAUSE_CONTINUATIONS });

    fake.requests.length = 0;
    const chunks = await collect(adapter.stream(searchCall(fake)));
    expect(fake.requests).toHaveLength(1 + ANTHROPIC_MAX_PAUSE_CONTINUATIONS);
    const finishing = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finishing).toHaveLength(1);
    expect(finishing[0]!.choices[0]!.native_finish_reason).toBe("pause_turn");
  });

  it("a prefilled assistant turn: the paused content joins it rather than following it", async () => {
    fake = await startFakeAnthropic();
    fake.scripts = [raw(pausedMessage), raw(resumedMessage)];
    await adapter.complete({ ...searchCall(fake), body: { model: "m", messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "Sure:" }] } });
    expect(fake.requests[1]!.body.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "hi" }] },
      { role: "assistant", content: [{ type: "text", text: "Sure:" }, ...pausedMessage.content] },
    ]);
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
