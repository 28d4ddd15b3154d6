/**
 * The Anthropic Messages dialect module without a server: decoding into the canonical request, the stream
 * encoder's block bookkeeping on inputs the fake upstreams do not produce (reasoning without details, interleaved
 * tool-call pieces, usage after the finish, an error, an empty stream), and the Anthropic adapter sending
 * reasoning details back as signed thinking blocks.
 */
import { describe, expect, it } from "vitest";
import { decodeRequest, encodeResponse, estimateInputTokens, MessagesStreamEncoder, stopReasonOf } from "../../../../src/core/chat/dialects/anthropic-messages.js";
import { tokenCounter } from "../../../../src/lib/token-count.js";
import { MessagesRequest } from "../../../../src/contract/requests/messages-request.js";
import { AnthropicAdapter } from "../../../../src/core/chat/providers/anthropic.js";
import type { StreamEvent } from "../../../../src/core/chat/model.js";
import { Reason } from "../../../../src/contract/reasons.js";

const ev = (delta: StreamEvent["choices"][number]["delta"], finish: StreamEvent["choices"][number]["finish_reason"] = null, extra: Partial<StreamEvent> = {}): StreamEvent => ({
  id: "gen-1",
  object: "chat.completion.chunk",
  created: 1,
  model: "m",
  choices: [{ index: 0, delta, finish_reason: finish }],
  ...extra,
});
const names = (events: Array<{ type: string; data: any }>) =>
  events.map((e) => (e.type === "content_block_start" ? `start:${e.data.index}:${e.data.content_block.type}` : e.type === "content_block_delta" ? `${e.data.delta.type}:${e.data.index}` : e.type === "content_block_stop" ? `stop:${e.data.index}` : e.type));

describe("decodeRequest", () => {
  it("maps a full Messages body onto the canonical request", () => {
    const body = MessagesRequest.parse({
      model: "anthropic/claude",
      max_tokens: 100,
      system: "sys",
      metadata: { user_id: "u1" },
      stop_sequences: ["X"],
      thinking: { type: "enabled", budget_tokens: 2000 },
      tool_choice: { type: "tool", name: "f", disable_parallel_tool_use: true },
      tools: [{ name: "f", description: "d", input_schema: { type: "object" }, cache_control: { type: "ephemeral" } }],
      messages: [
        { role: "user", content: "q" },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "hmm", signature: "s1" },
            { type: "redacted_thinking", data: "enc" },
            { type: "text", text: "calling" },
            { type: "tool_use", id: "t1", name: "f", input: { a: 1 } },
          ],
        },
        { role: "user", content: [{ type: "text", text: "also" }, { type: "tool_result", tool_use_id: "t1", content: [{ type: "text", text: "r" }], is_error: true }] },
      ],
    });
    expect(decodeRequest(body)).toEqual({
      model: "anthropic/claude",
      max_tokens: 100,
      user: "u1",
      stop: ["X"],
      reasoning: { max_tokens: 2000, effort: "high" },
      tool_choice: { type: "function", function: { name: "f" } },
      parallel_tool_calls: false,
      tools: [{ type: "function", function: { name: "f", description: "d", parameters: { type: "object" } }, cache_control: { type: "ephemeral" } }],
      messages: [
        { role: "system", content: "sys" },
        { role: "user", content: "q" },
        {
          role: "assistant",
          content: [{ type: "text", text: "calling" }],
          tool_calls: [{ id: "t1", type: "function", function: { name: "f", arguments: '{"a":1}' } }],
          reasoning: "hmm",
          reasoning_details: [
            { type: "reasoning.text", text: "hmm", signature: "s1", format: "anthropic-claude-v1", index: 0 },
            { type: "reasoning.encrypted", data: "enc", format: "anthropic-claude-v1", index: 1 },
          ],
        },
        { role: "tool", tool_call_id: "t1", content: [{ type: "text", text: "r" }], is_error: true },
        { role: "user", content: [{ type: "text", text: "also" }] },
      ],
    });
  });

  it("the Anthropic adapter sends reasoning details back as signed thinking before the turn's other blocks", () => {
    const body = decodeRequest(
      MessagesRequest.parse({
        model: "anthropic/claude",
        max_tokens: 100,
        messages: [
          { role: "user", content: "q" },
          { role: "assistant", content: [{ type: "thinking", thinking: "hmm", signature: "s1" }, { type: "redacted_thinking", data: "enc" }, { type: "text", text: "a" }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: "bad", is_error: true }] },
          { role: "assistant", content: [{ type: "tool_use", id: "t2", name: "f", input: {}, cache_control: { type: "ephemeral" } }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "t2", content: "ok", cache_control: { type: "ephemeral", ttl: "1h" } }] },
        ],
      }),
    );
    const up = new AnthropicAdapter().upstreamBody({ model: "claude", body, baseUrl: "http://x", apiKey: "k", signal: new AbortController().signal }) as any;
    expect(up.messages[1].content).toEqual([{ type: "thinking", thinking: "hmm", signature: "s1" }, { type: "redacted_thinking", data: "enc" }, { type: "text", text: "a" }]);
    expect(up.messages[2].content).toEqual([{ type: "tool_result", tool_use_id: "t1", content: "bad", is_error: true }]);
    // Cache breakpoints on tool_use and tool_result blocks survive the canonical request.
    expect(up.messages[3].content).toEqual([{ type: "tool_use", id: "t2", name: "f", input: {}, cache_control: { type: "ephemeral" } }]);
    expect(up.messages[4].content).toEqual([{ type: "tool_result", tool_use_id: "t2", content: "ok", cache_control: { type: "ephemeral", ttl: "1h" } }]);
  });
});

describe("encodeResponse and stop reasons", () => {
  it("keeps the native stop reason and splits cached tokens out of input_tokens", () => {
    const msg = encodeResponse({
      id: "gen-9",
      object: "chat.completion",
      created: 1,
      model: "m",
      choices: [{ index: 0, message: { role: "assistant", content: "hi", reasoning: "r" }, finish_reason: "stop", native_finish_reason: "stop_sequence" }],
      usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12, prompt_tokens_details: { cached_tokens: 4, cache_write_tokens: 1 } },
    });
    expect(msg).toEqual({
      id: "gen-9",
      type: "message",
      role: "assistant",
      model: "m",
      content: [{ type: "thinking", thinking: "r", signature: "" }, { type: "text", text: "hi" }],
      stop_reason: "stop_sequence",
      stop_sequence: null,
      usage: { input_tokens: 5, cache_creation_input_tokens: 1, cache_read_input_tokens: 4, output_tokens: 2 },
    });
    expect([stopReasonOf("length", null), stopReasonOf("tool_calls", "STOP"), stopReasonOf("content_filter", null), stopReasonOf("stop", null)]).toEqual(["max_tokens", "tool_use", "refusal", "end_turn"]);
  });
});

describe("MessagesStreamEncoder", () => {
  it("reasoning text without details opens one thinking block; usage after the finish reaches message_delta", () => {
    const enc = new MessagesStreamEncoder("fallback");
    const out = [
      ...enc.push(ev({ role: "assistant", content: "" })),
      ...enc.push(ev({ reasoning: "a" })),
      ...enc.push(ev({ reasoning: "b" })),
      ...enc.push(ev({ content: "x" })),
      ...enc.push(ev({}, "stop")),
      ...enc.push({ ...ev({}), choices: [], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } }),
      ...enc.end(),
    ];
    expect(names(out)).toEqual(["message_start", "ping", "start:0:thinking", "thinking_delta:0", "thinking_delta:0", "stop:0", "start:1:text", "text_delta:1", "stop:1", "message_delta", "message_stop"]);
    expect(out.at(-2)!.data).toMatchObject({ delta: { stop_reason: "end_turn" }, usage: { input_tokens: 3, output_tokens: 4 } });
  });

  it("a late piece of an earlier tool call goes to that call's block", () => {
    const enc = new MessagesStreamEncoder("m");
    const out = [
      ...enc.push(ev({ tool_calls: [{ index: 0, id: "a", type: "function", function: { name: "f", arguments: "{" } }] })),
      ...enc.push(ev({ tool_calls: [{ index: 1, id: "b", type: "function", function: { name: "g", arguments: "{}" } }] })),
      ...enc.push(ev({ tool_calls: [{ index: 0, function: { arguments: "}" } }] }, "tool_calls")),
      ...enc.end(),
    ];
    expect(names(out)).toEqual(["message_start", "ping", "start:0:tool_use", "input_json_delta:0", "stop:0", "start:1:tool_use", "input_json_delta:1", "input_json_delta:0", "stop:1", "message_delta", "message_stop"]);
    expect(out.at(-2)!.data).toMatchObject({ delta: { stop_reason: "tool_use" } });
  });

  it("an error ends the stream with one error event and nothing after it", () => {
    const enc = new MessagesStreamEncoder("m");
    const out = [
      ...enc.push(ev({ content: "x" })),
      ...enc.push({ ...ev({}, "error"), error: { reason: Reason.UPSTREAM_FAILED, code: 529, message: "busy" } }),
      ...enc.end(),
    ];
    expect(names(out)).toEqual(["message_start", "ping", "start:0:text", "text_delta:0", "error"]);
    expect(out.at(-1)!.data).toEqual({ type: "error", error: { type: "overloaded_error", message: "busy" } });
  });

  it("a stream without content still has message_start, message_delta and message_stop; start_usage fills message_start", () => {
    const enc = new MessagesStreamEncoder("m");
    const first = enc.push(ev({ role: "assistant", content: "" }, null, { start_usage: { prompt_tokens: 9, completion_tokens: 0, total_tokens: 9 } }));
    expect(first[0]!.data).toMatchObject({ message: { usage: { input_tokens: 9, output_tokens: 0 } } });
    expect(names([...first, ...enc.end()])).toEqual(["message_start", "ping", "message_delta", "message_stop"]);
  });
});

describe("estimateInputTokens", () => {
  it("counts the text with the tokenizer, 3 per message and 1600 per image", async () => {
    const count = await tokenCounter();
    expect(count("Hello, world")).toBe(3);
    expect(estimateInputTokens({ model: "m", messages: [{ role: "user", content: [{ type: "text", text: "Hello, world" }, { type: "image_url", image_url: { url: "data:" } }] }] }, count)).toBe(3 + 3 + 1600);
    // Tool calls' names and arguments and the tools' definitions count too; special-token text is plain text.
    const withTools = {
      model: "m",
      messages: [{ role: "assistant" as const, content: "<|endoftext|>", tool_calls: [{ id: "c", type: "function" as const, function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] }],
      tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }],
    };
    const expected = 3 + count("<|endoftext|>") + count("get_weather") + count('{"city":"Paris"}') + count(JSON.stringify({ name: "get_weather", parameters: { type: "object" } }));
    expect(estimateInputTokens(withTools, count)).toBe(expected);
    expect(count("<|endoftext|>")).toBeGreaterThan(1);
  });
});
