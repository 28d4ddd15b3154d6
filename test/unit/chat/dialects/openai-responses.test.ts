/**
 * The OpenAI Responses dialect module without a server: decoding into the canonical request (one assistant turn
 * from consecutive reasoning / message / function_call items, Portico's encrypted reasoning restored), the
 * reasoning blob, and the stream encoder's bookkeeping on inputs the fake upstreams do not produce (late pieces of
 * an earlier tool call, redacted thinking only, usage after the finish, an error before any content, an empty
 * stream, a content-filter stop).
 */
import { describe, expect, it } from "vitest";
import {
  decodeReasoningBlob,
  decodeRequest,
  echoOf,
  encodeReasoningBlob,
  encodeResponse,
  ResponsesStreamEncoder,
} from "../../../../src/core/chat/dialects/openai-responses.js";
import { ResponsesRequest } from "../../../../src/contract/requests/responses-request.js";
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
const names = (events: Array<{ type: string; data: any }>) => events.map((e) => e.type.replace(/^response\./, "") + (e.data.output_index !== undefined ? `:${e.data.output_index}` : ""));

describe("decodeRequest", () => {
  it("makes one assistant turn of consecutive reasoning, message and function_call items, and restores Portico's reasoning", () => {
    const details = [
      { type: "reasoning.text" as const, text: "think", signature: "sig", format: "anthropic-claude-v1", index: 0 },
      { type: "reasoning.encrypted" as const, data: "opaque", format: "anthropic-claude-v1", index: 1 },
    ];
    const body = ResponsesRequest.parse({
      model: "anthropic/claude",
      instructions: "sys",
      reasoning: { effort: "high", generate_summary: "concise" },
      input: [
        { role: "user", content: "q" },
        { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "think" }], encrypted_content: encodeReasoningBlob(details) },
        { type: "message", role: "assistant", id: "msg_1", status: "completed", content: [{ type: "output_text", text: "a", annotations: [] }, { type: "refusal", refusal: "no" }] },
        { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
        { type: "function_call", call_id: "c2", name: "f", arguments: '{"x":1}' },
        { type: "function_call_output", call_id: "c1", output: "r1" },
        { type: "function_call_output", call_id: "c2", output: "r2" },
      ],
    });
    expect(decodeRequest(body)).toEqual({
      model: "anthropic/claude",
      reasoning: { effort: "high", summary: "concise" },
      messages: [
        { role: "system", content: "sys" },
        { role: "user", content: "q" },
        {
          role: "assistant",
          content: "a",
          refusal: "no",
          reasoning: "think",
          reasoning_details: details,
          tool_calls: [
            { id: "c1", type: "function", function: { name: "f", arguments: "{}" } },
            { id: "c2", type: "function", function: { name: "f", arguments: '{"x":1}' } },
          ],
        },
        { role: "tool", tool_call_id: "c1", content: "r1" },
        { role: "tool", tool_call_id: "c2", content: "r2" },
      ],
    });
  });

  it("a message item may omit its type; the blob refuses what Portico did not encode", () => {
    expect(ResponsesRequest.parse({ model: "m", input: [{ role: "user", content: "x" }] }).input).toEqual([{ type: "message", role: "user", content: "x" }]);
    expect(decodeReasoningBlob("gAAAA")).toBeUndefined();
    expect(decodeReasoningBlob("portico.r1.bm90IGpzb24")).toBeUndefined();
    expect(decodeReasoningBlob(encodeReasoningBlob([{ type: "reasoning.text", text: "t" }]))).toEqual([{ type: "reasoning.text", text: "t", index: 0 }]);
  });
});

describe("encodeResponse", () => {
  it("a content-filter stop is incomplete with its reason; reasoning without details has no encrypted content", () => {
    const r = encodeResponse(
      {
        id: "gen-9",
        object: "chat.completion",
        created: 5,
        model: "m",
        choices: [{ index: 0, message: { role: "assistant", content: "par", reasoning: "hm" }, finish_reason: "content_filter" }],
        usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7, completion_tokens_details: { reasoning_tokens: 2 } },
      },
      echoOf(ResponsesRequest.parse({ model: "m", input: "x", include: ["reasoning.encrypted_content"] })),
    );
    expect(r).toMatchObject({
      id: "gen-9",
      created_at: 5,
      status: "incomplete",
      incomplete_details: { reason: "content_filter" },
      output: [
        { id: "rs_gen-9_0", type: "reasoning", summary: [{ type: "summary_text", text: "hm" }], encrypted_content: null },
        { id: "msg_gen-9_1", type: "message", status: "incomplete" },
      ],
      usage: { input_tokens: 3, output_tokens: 4, output_tokens_details: { reasoning_tokens: 2 }, total_tokens: 7 },
    });
  });
});

describe("ResponsesStreamEncoder", () => {
  const echo = echoOf(ResponsesRequest.parse({ model: "m", input: "x", include: ["reasoning.encrypted_content"] }));

  it("numbers every event; late pieces of an earlier tool call go to its item; usage after the finish is reported", () => {
    const enc = new ResponsesStreamEncoder("fallback", echo);
    const out = [
      ...enc.push(ev({ tool_calls: [{ index: 0, id: "a", function: { name: "f", arguments: '{"x"' } }] })),
      ...enc.push(ev({ tool_calls: [{ index: 1, id: "b", function: { name: "g", arguments: "{}" } }] })),
      ...enc.push(ev({ tool_calls: [{ index: 0, function: { arguments: ":1}" } }] })),
      ...enc.push(ev({}, "tool_calls")),
      ...enc.push({ ...ev({}), choices: [], usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } }),
      ...enc.end(),
    ];
    out.forEach((e, i) => expect(e.data.sequence_number).toBe(i));
    expect(names(out)).toEqual([
      "created", "in_progress",
      "output_item.added:0", "function_call_arguments.delta:0",
      "function_call_arguments.done:0", "output_item.done:0",
      "output_item.added:1", "function_call_arguments.delta:1",
      "function_call_arguments.delta:0",
      "function_call_arguments.done:1", "output_item.done:1",
      "completed",
    ]);
    const final = out.at(-1)!.data.response as any;
    expect(final.output.map((i: any) => [i.call_id, i.arguments])).toEqual([["a", '{"x":1}'], ["b", "{}"]]);
    expect(final.usage).toMatchObject({ input_tokens: 1, output_tokens: 2, total_tokens: 3 });
    expect(enc.end()).toEqual([]);
  });

  it("redacted thinking only: a reasoning item without summary, its data in encrypted_content", () => {
    const enc = new ResponsesStreamEncoder("m", echo);
    const out = [...enc.push(ev({ reasoning_details: [{ type: "reasoning.encrypted", data: "xyz", index: 0 }] })), ...enc.push(ev({ content: "hi" }, "stop")), ...enc.end()];
    expect(names(out)).toEqual([
      "created", "in_progress", "output_item.added:0", "output_item.done:0",
      "output_item.added:1", "content_part.added:1", "output_text.delta:1", "output_text.done:1", "content_part.done:1", "output_item.done:1", "completed",
    ]);
    const item = out[3]!.data.item as any;
    expect(item.summary).toEqual([]);
    expect(decodeReasoningBlob(item.encrypted_content)).toEqual([{ type: "reasoning.encrypted", data: "xyz", index: 0 }]);
  });

  it("an error as the first event: created, in_progress, error, response.failed, then nothing", () => {
    const enc = new ResponsesStreamEncoder("fallback", echo);
    const out = enc.push({ ...ev({}), choices: [], error: { reason: Reason.RATE_LIMITED, code: 429, message: "slow down" } });
    expect(names(out)).toEqual(["created", "in_progress", "error", "failed"]);
    expect(out[2]!.data).toEqual({ type: "error", code: "rate_limit_exceeded", message: "slow down", param: null, sequence_number: 2 });
    expect(out[3]!.data.response).toMatchObject({ status: "failed", error: { code: "rate_limit_exceeded", message: "slow down" } });
    expect(enc.push(ev({ content: "late" }))).toEqual([]);
    expect(enc.end()).toEqual([]);
  });

  it("an upstream refusal is a refusal part, streamed and not", () => {
    const enc = new ResponsesStreamEncoder("m", echo);
    const out = [...enc.push(ev({ refusal: "I can" } as never)), ...enc.push(ev({ refusal: "not." } as never, "stop")), ...enc.end()];
    expect(names(out)).toEqual([
      "created", "in_progress", "output_item.added:0", "content_part.added:0", "refusal.delta:0", "refusal.delta:0", "refusal.done:0", "content_part.done:0", "output_item.done:0", "completed",
    ]);
    const part = { type: "refusal", refusal: "I cannot." };
    expect((out.at(-1)!.data.response as any).output[0].content).toEqual([part]);
    const r = encodeResponse(
      { id: "gen-2", object: "chat.completion", created: 1, model: "m", choices: [{ index: 0, message: { role: "assistant", content: null, refusal: "I cannot." } as never, finish_reason: "stop" }] },
      echo,
    );
    expect((r.output as any)[0]).toMatchObject({ type: "message", content: [part] });
  });

  it("an empty stream still opens and completes", () => {
    const enc = new ResponsesStreamEncoder("fallback", echo);
    const out = enc.end();
    expect(names(out)).toEqual(["created", "in_progress", "completed"]);
    expect(out[2]!.data.response).toMatchObject({ model: "fallback", status: "completed", output: [] });
  });
});

describe("namespace tools", () => {
  const member = (name: string, description?: string) => ({ type: "function", name, ...(description ? { description } : {}), parameters: { type: "object", properties: {} }, strict: false });
  const violation = (body: unknown): { field: string; message: string } => {
    try {
      decodeRequest(ResponsesRequest.parse(body));
    } catch (err) {
      return { field: (err as { field: string }).field, message: (err as Error).message };
    }
    throw new Error("no violation");
  };

  it("flattens members into uniquely named function tools, hashed when too long, invalid or taken, deterministically", () => {
    const long = "n".repeat(70);
    const body = ResponsesRequest.parse({
      model: "m",
      input: "x",
      tools: [
        { type: "function", name: "mcp__node_repl__reset" },
        { type: "namespace", name: "mcp__node_repl", description: "A JS REPL.", tools: [member("js", "Run JS."), member("reset"), member(long)] },
        { type: "namespace", name: "crm.v2", description: "", tools: [member("find")] },
      ],
    });
    const req = decodeRequest(body) as unknown as { tools: Array<{ function: { name: string; description?: string } }> };
    const got = req.tools.map((t) => t.function);
    expect(got[0]).toEqual({ name: "mcp__node_repl__reset" });
    expect(got[1]).toMatchObject({ name: "mcp__node_repl__js", description: 'Run JS.\n\n(Tool "js" of mcp__node_repl: A JS REPL.)' });
    expect(got[2]!.name).toMatch(/^mcp__node_repl__reset_[0-9a-f]{10}$/);
    expect(got[2]!.description).toBe("mcp__node_repl: A JS REPL.");
    expect(got[3]!.name).toMatch(/^mcp__node_repl__n+_[0-9a-f]{10}$/);
    expect(got[4]!.name).toMatch(/^crm_v2__find_[0-9a-f]{10}$/);
    expect(got[4]).not.toHaveProperty("description");
    for (const t of got) expect(t.name).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    expect((decodeRequest(body) as unknown as { tools: unknown }).tools).toEqual(req.tools);

    // The answer's calls to qualified names come back as name + namespace; a top-level function stays as it is.
    const echo = echoOf(body);
    const r = encodeResponse(
      {
        id: "g",
        object: "chat.completion",
        created: 1,
        model: "m",
        choices: [
          {
            index: 0,
            message: {
              role: "assistant",
              content: null,
              tool_calls: [
                { id: "c1", type: "function", function: { name: "mcp__node_repl__js", arguments: "{}" } },
                { id: "c2", type: "function", function: { name: got[2]!.name, arguments: "{}" } },
                { id: "c3", type: "function", function: { name: "mcp__node_repl__reset", arguments: "{}" } },
              ],
            },
            finish_reason: "tool_calls",
          },
        ],
      },
      echo,
    ) as { output: unknown[]; tools: unknown[] };
    expect(r.output).toEqual([
      { id: "fc_g_0", type: "function_call", status: "completed", call_id: "c1", name: "js", namespace: "mcp__node_repl", arguments: "{}" },
      { id: "fc_g_1", type: "function_call", status: "completed", call_id: "c2", name: "reset", namespace: "mcp__node_repl", arguments: "{}" },
      { id: "fc_g_2", type: "function_call", status: "completed", call_id: "c3", name: "mcp__node_repl__reset", arguments: "{}" },
    ]);
    expect(r.tools[1]).toMatchObject({ type: "namespace", name: "mcp__node_repl", description: "A JS REPL.", tools: [{ type: "function", name: "js" }, {}, {}] });

    // Replayed calls with their namespace go back under the qualified name; outputs are unchanged.
    const next = decodeRequest(
      ResponsesRequest.parse({
        model: "m",
        tools: body.tools,
        input: [
          { role: "user", content: "x" },
          { type: "function_call", call_id: "c1", name: "js", namespace: "mcp__node_repl", arguments: "{}" },
          { type: "function_call", call_id: "c2", name: "reset", namespace: "mcp__node_repl", arguments: "{}" },
          { type: "function_call", call_id: "c3", name: "gone", namespace: "old", arguments: "{}" },
          { type: "function_call_output", call_id: "c1", output: "1" },
        ],
      }),
    ) as unknown as { messages: Array<{ tool_calls?: Array<{ function: { name: string } }> }> };
    expect(next.messages[1]!.tool_calls!.map((c) => c.function.name)).toEqual(["mcp__node_repl__js", got[2]!.name, "old__gone"]);
    expect(next.messages[2]).toEqual({ role: "tool", tool_call_id: "c1", content: "1" });
  });

  it("streams name + namespace in output_item.added / .done, arguments events and response.completed", () => {
    const body = ResponsesRequest.parse({ model: "m", input: "x", tools: [{ type: "namespace", name: "ns", description: "d", tools: [member("js")] }] });
    const enc = new ResponsesStreamEncoder("m", echoOf(body));
    const out = [
      ...enc.push(ev({ tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "ns__js", arguments: '{"a"' } }] })),
      ...enc.push(ev({ tool_calls: [{ index: 0, function: { arguments: ":1}" } }] }, "tool_calls")),
      ...enc.end(),
    ];
    const added = out.find((e) => e.type === "response.output_item.added")!.data as any;
    expect(added.item).toMatchObject({ type: "function_call", name: "js", namespace: "ns", call_id: "c1" });
    expect(out.find((e) => e.type === "response.function_call_arguments.done")!.data).toMatchObject({ name: "js", arguments: '{"a":1}' });
    expect((out.find((e) => e.type === "response.output_item.done")!.data as any).item).toMatchObject({ name: "js", namespace: "ns", arguments: '{"a":1}', status: "completed" });
    expect((out.at(-1)!.data as any).response.output).toEqual([expect.objectContaining({ name: "js", namespace: "ns", arguments: '{"a":1}' })]);
  });

  it("refuses custom members, a member declared twice, and a namespace without tools, naming the field", () => {
    expect(violation({ model: "m", input: "x", tools: [{ type: "namespace", name: "ns", description: "", tools: [{ type: "custom", name: "apply_patch" }] }] })).toMatchObject({
      field: "tools[0].tools[0].type",
      message: expect.stringMatching(/must be one of "function", got "custom"/),
    });
    expect(violation({ model: "m", input: "x", tools: [{ type: "namespace", name: "ns", tools: [member("a"), member("a")] }] })).toMatchObject({
      field: "tools[0].tools[1].name",
      message: expect.stringMatching(/declared twice in namespace "ns"/),
    });
    expect(violation({ model: "m", input: "x", tools: [{ type: "namespace", name: "ns", tools: [] }] }).field).toBe("tools[0].tools");
    // OpenAI's tool_choice has no namespace: refused naming it; a member is forced by its qualified name.
    const nsTool = { type: "namespace", name: "ns", description: "", tools: [member("js")] };
    expect(violation({ model: "m", input: "x", tools: [nsTool], tool_choice: { type: "function", name: "js", namespace: "ns" } })).toMatchObject({ field: "tool_choice.namespace" });
    expect(decodeRequest(ResponsesRequest.parse({ model: "m", input: "x", tools: [nsTool], tool_choice: { type: "function", name: "ns__js" } })).tool_choice).toEqual({ type: "function", function: { name: "ns__js" } });
    expect(violation({ model: "m", input: "x", tools: [{ type: "web_search" }] })).toMatchObject({ field: "tools[0].type", message: expect.stringMatching(/must be one of "function", "namespace", got "web_search"/) });
  });
});
