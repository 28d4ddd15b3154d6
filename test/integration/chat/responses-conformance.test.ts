/**
 * The conformance matrix of the OpenAI Responses dialect (docs/dialects.md): inbound `POST /api/v1/responses` ×
 * upstream {OpenAI-compatible, Anthropic, Gemini} × {plain text, one tool call, parallel tool calls, reasoning sent
 * back on the next turn, max_output_tokens stop, error mid-stream, client cancel}, streaming and not. Streams are
 * read raw and their exact event sequence asserted (runs of the same delta on the same item collapsed to one `+`
 * entry, since the number of pieces is the upstream's), each event's `sequence_number` its position; the official
 * `openai` client's `responses.create` and `responses.stream(...).finalResponse()` must assemble the same response.
 */
import OpenAI from "openai";
import type { ResponseStreamParams } from "openai/lib/responses/ResponseStream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeAnthropic } from "../../helpers/fake-upstreams/anthropic.js";
import { startFakeGemini } from "../../helpers/fake-upstreams/gemini.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream, Script } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";

type Kind = "openai" | "anthropic" | "gemini";
interface Upstream {
  kind: Kind;
  model: string;
  fake: FakeUpstream;
  /** The finish words of the provider: [end, tool, max]. */
  finish: [string, string, string];
}

const tools: OpenAI.Responses.FunctionTool[] = [
  { type: "function", name: "get_weather", description: "Weather of a city", parameters: { type: "object", properties: { city: { type: "string" } } }, strict: false },
];

interface SseEvent {
  event: string;
  data: any;
}

async function readSse(res: Response): Promise<SseEvent[]> {
  const text = await res.text();
  expect(text).not.toContain("[DONE]");
  const out: SseEvent[] = [];
  for (const frame of text.split("\n\n")) {
    if (frame.trim() === "" || frame.startsWith(":")) continue;
    const lines = frame.split("\n");
    const event = lines.find((l) => l.startsWith("event: "))?.slice(7) ?? "";
    const data = lines.find((l) => l.startsWith("data: "))?.slice(6) ?? "";
    out.push({ event, data: JSON.parse(data) });
  }
  return out;
}

/** The sequence as short names; a run of the same delta on the same item becomes one `…+` entry. */
function shape(events: SseEvent[]): string[] {
  const out: string[] = [];
  for (const e of events) {
    let name = e.event.replace(/^response\./, "");
    if (e.data.output_index !== undefined) name += `:${e.data.output_index}`;
    if (e.event === "response.output_item.added") name += `:${e.data.item.type}`;
    if (e.event.endsWith(".delta")) name += "+";
    if (name.endsWith("+") && out.at(-1) === name) continue;
    out.push(name);
  }
  return out;
}

/** What a response means, without what differs between two calls (ids, time; Gemini's generated call ids). */
function meaning(r: any, kind: Kind): unknown {
  return {
    status: r.status,
    incomplete_details: r.incomplete_details,
    error: r.error,
    model: r.model,
    output: r.output.map((item: any) => {
      // `parsed` / `parsed_arguments` are the SDK stream helper's own additions.
      const { id: _id, parsed_arguments: _parsed, ...rest } = item;
      if (kind === "gemini" && rest.call_id) rest.call_id = "call";
      if (Array.isArray(rest.content)) rest.content = rest.content.map(({ parsed: _p, ...part }: any) => part);
      return rest;
    }),
    usage: r.usage,
  };
}

const TEXT_ITEM = ["output_item.added:0:message", "content_part.added:0", "output_text.delta:0+", "output_text.done:0", "content_part.done:0", "output_item.done:0"];

describe("OpenAI Responses dialect: conformance matrix", () => {
  let h: Harness;
  let client: OpenAI;
  const ups: Upstream[] = [];

  beforeAll(async () => {
    const openai = await startFakeOpenAI();
    const anthropic = await startFakeAnthropic();
    const gemini = await startFakeGemini();
    ups.push(
      { kind: "openai", model: "groq/llama-4", fake: openai, finish: ["stop", "tool_calls", "length"] },
      { kind: "anthropic", model: "anthropic/claude-sonnet-4", fake: anthropic, finish: ["end_turn", "tool_use", "max_tokens"] },
      { kind: "gemini", model: "google-ai-studio/gemini-2.5-flash", fake: gemini, finish: ["STOP", "STOP", "MAX_TOKENS"] },
    );
    h = await startHarness({
      env: {
        PORTICO_PROVIDER_GROQ_BASE_URL: `${openai.url}/v1`,
        PORTICO_PROVIDER_ANTHROPIC_BASE_URL: anthropic.url,
        PORTICO_PROVIDER_GOOGLE_AI_STUDIO_BASE_URL: `${gemini.url}/v1beta`,
      },
    });
    for (const [provider, key] of [["groq", "gsk-test"], ["anthropic", "sk-ant-test"], ["google-ai-studio", "AIza-test"]] as const) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider, key } })).status).toBe(200);
    }
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all(ups.map((u) => u.fake.close()));
  });

  const post = (body: unknown, signal?: AbortSignal) =>
    fetch(`${h.baseUrl}/api/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${h.tenant.apiKey}` },
      body: JSON.stringify(body),
      signal,
    });

  const setScript = (u: Upstream, script: Script) => {
    u.fake.script = script;
    u.fake.knobs = {};
  };

  /** Streams raw and through the SDK, creates through the SDK; the three agree. Returns the raw events and the response. */
  async function allWays(u: Upstream, body: OpenAI.Responses.ResponseCreateParamsNonStreaming): Promise<{ events: SseEvent[]; response: OpenAI.Responses.Response }> {
    const res = await post({ ...body, stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const events = await readSse(res);
    const response = await client.responses.create(body);
    const final = await client.responses.stream(body as ResponseStreamParams).finalResponse();
    expect(meaning(final, u.kind)).toEqual(meaning(response, u.kind));
    expect(final.output_text).toBe(response.output_text);
    // Every event names itself, is numbered by its position, and the terminal event's response is the answer.
    events.forEach((e, i) => {
      expect(e.data.type).toBe(e.event);
      expect(e.data.sequence_number).toBe(i);
    });
    expect(events.filter((e) => e.event === "response.created")).toHaveLength(1);
    const created = events[0]!.data.response;
    expect(created).toMatchObject({ object: "response", status: "in_progress", output: [], store: false, previous_response_id: null });
    expect(created.id).toMatch(/^gen-/);
    const last = events.at(-1)!.data.response;
    expect(last.id).toBe(created.id);
    expect(meaning(last, u.kind)).toEqual(meaning(response, u.kind));
    // Each item's `output_item.done` is the item in the final response.
    for (const e of events.filter((x) => x.event === "response.output_item.done")) expect(e.data.item).toEqual(last.output[e.data.output_index]);
    expect(response.id).toMatch(/^gen-/);
    expect(response.object).toBe("response");
    return { events, response };
  }

  for (const kind of ["openai", "anthropic", "gemini"] as const) {
    describe(`upstream ${kind}`, () => {
      const up = () => ups.find((u) => u.kind === kind)!;

      it("plain text", async () => {
        const u = up();
        setScript(u, { text: ["Hello", ", ", "world"], finish: u.finish[0], usage: { input: 11, output: 3 } });
        const { events, response } = await allWays(u, { model: u.model, input: "hi", instructions: "Be brief." });
        expect(shape(events)).toEqual(["created", "in_progress", ...TEXT_ITEM, "completed"]);
        expect(response.status).toBe("completed");
        expect(response.output_text).toBe("Hello, world");
        expect(response.output).toEqual([
          { id: expect.stringMatching(/^msg_/), type: "message", status: "completed", role: "assistant", content: [{ type: "output_text", text: "Hello, world", annotations: [], logprobs: [] }] },
        ]);
        expect(response.usage).toMatchObject({ input_tokens: 11, output_tokens: 3, total_tokens: 14 });
        expect(response.instructions).toBe("Be brief.");
        // The instructions reached the upstream as its system prompt.
        const sent = u.fake.requests.at(-1)!.body;
        if (kind === "openai") expect(sent.messages[0]).toEqual({ role: "system", content: "Be brief." });
        if (kind === "anthropic") expect(sent.system).toBe("Be brief.");
        if (kind === "gemini") expect(JSON.stringify(sent.systemInstruction)).toContain("Be brief.");
      });

      it("one tool call, its output sent back", async () => {
        const u = up();
        setScript(u, {
          text: ["Let me ", "check."],
          toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}', argumentPieces: ['{"city"', ':"Paris"}'] }],
          finish: u.finish[1],
          usage: { input: 20, output: 7 },
        });
        const { events, response } = await allWays(u, { model: u.model, tools, input: "weather in Paris?" });
        expect(shape(events)).toEqual([
          "created", "in_progress", ...TEXT_ITEM,
          "output_item.added:1:function_call", "function_call_arguments.delta:1+", "function_call_arguments.done:1", "output_item.done:1", "completed",
        ]);
        const call = response.output[1] as OpenAI.Responses.ResponseFunctionToolCall;
        expect(call).toMatchObject({ type: "function_call", status: "completed", name: "get_weather", arguments: '{"city":"Paris"}' });
        if (kind !== "gemini") expect(call.call_id).toBe("call_1");
        const sent = u.fake.requests.at(-1)!.body;
        if (kind === "openai") expect(sent.tools[0]).toMatchObject({ type: "function", function: { name: "get_weather", parameters: tools[0]!.parameters } });
        if (kind === "anthropic") expect(sent.tools[0]).toMatchObject({ name: "get_weather", input_schema: tools[0]!.parameters });
        if (kind === "gemini") expect(JSON.stringify(sent.tools)).toContain("get_weather");

        setScript(u, { text: ["Sunny."], finish: u.finish[0], usage: { input: 30, output: 2 } });
        const next = await client.responses.create({
          model: u.model,
          tools,
          input: [{ role: "user", content: "weather in Paris?" }, ...(response.output as OpenAI.Responses.ResponseInputItem[]), { type: "function_call_output", call_id: call.call_id, output: "sunny" }],
        });
        expect(next.output_text).toBe("Sunny.");
        const back = u.fake.requests.at(-1)!.body;
        if (kind === "openai") {
          expect(back.messages[1]).toMatchObject({ role: "assistant", content: "Let me check.", tool_calls: [{ id: "call_1", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] });
          expect(back.messages[2]).toEqual({ role: "tool", tool_call_id: "call_1", content: "sunny" });
        }
        if (kind === "anthropic") {
          expect(back.messages[1].content).toEqual([{ type: "text", text: "Let me check." }, { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } }]);
          expect(back.messages[2].content).toEqual([{ type: "tool_result", tool_use_id: "call_1", content: "sunny" }]);
        }
        if (kind === "gemini") expect(JSON.stringify(back.contents)).toContain("functionResponse");
      });

      it("a namespace tool: the upstream gets <namespace>__<name>, the client name + namespace, the replayed call goes back qualified", async () => {
        const u = up();
        const nsTools = [
          {
            type: "namespace" as const,
            name: "mcp__node_repl",
            description: "A persistent Node.js REPL.",
            tools: [{ type: "function" as const, name: "js", description: "Run JavaScript.", parameters: { type: "object", properties: { code: { type: "string" } }, required: ["code"] }, strict: false }],
          },
        ];
        setScript(u, { text: [], toolCalls: [{ id: "call_ns", name: "mcp__node_repl__js", arguments: '{"code":"1+1"}', argumentPieces: ['{"code"', ':"1+1"}'] }], finish: u.finish[1], usage: { input: 20, output: 7 } });
        const { events, response } = await allWays(u, { model: u.model, tools: nsTools, input: "add" } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
        const call = response.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
        expect(call).toMatchObject({ type: "function_call", status: "completed", name: "js", namespace: "mcp__node_repl", arguments: '{"code":"1+1"}' });
        expect(events.find((e) => e.event === "response.output_item.added")!.data.item).toMatchObject({ name: "js", namespace: "mcp__node_repl" });
        expect(response.tools[0]).toMatchObject({ type: "namespace", name: "mcp__node_repl", tools: [{ type: "function", name: "js" }] });
        const sent = u.fake.requests.at(-1)!.body;
        if (kind === "openai") expect(sent.tools).toEqual([{ type: "function", function: { name: "mcp__node_repl__js", description: 'Run JavaScript.\n\n(Tool "js" of mcp__node_repl: A persistent Node.js REPL.)', parameters: nsTools[0]!.tools[0]!.parameters, strict: false } }]);
        if (kind === "anthropic") expect(sent.tools[0]).toMatchObject({ name: "mcp__node_repl__js", input_schema: nsTools[0]!.tools[0]!.parameters });
        if (kind === "gemini") expect(JSON.stringify(sent.tools)).toContain('"name":"mcp__node_repl__js"');

        setScript(u, { text: ["2"], finish: u.finish[0], usage: { input: 30, output: 1 } });
        const next = await client.responses.create({
          model: u.model,
          tools: nsTools,
          input: [{ role: "user", content: "add" }, ...(response.output as OpenAI.Responses.ResponseInputItem[]), { type: "function_call_output", call_id: call.call_id, output: "2" }],
        } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
        expect(next.output_text).toBe("2");
        const back = u.fake.requests.at(-1)!.body;
        if (kind === "openai") expect(back.messages[1]).toMatchObject({ role: "assistant", tool_calls: [{ id: "call_ns", function: { name: "mcp__node_repl__js", arguments: '{"code":"1+1"}' } }] });
        if (kind === "anthropic") expect(back.messages[1].content).toEqual([{ type: "tool_use", id: "call_ns", name: "mcp__node_repl__js", input: { code: "1+1" } }]);
        if (kind === "gemini") expect(JSON.stringify(back.contents)).toContain('"functionCall":{');
        if (kind === "gemini") expect(JSON.stringify(back.contents)).toContain('"name":"mcp__node_repl__js"');
      });

      it("parallel tool calls keep their items and arguments apart", async () => {
        const u = up();
        setScript(u, {
          text: [],
          toolCalls: [
            { id: "call_a", name: "get_weather", arguments: '{"city":"Paris"}', argumentPieces: ['{"ci', 'ty":"Paris"}'] },
            { id: "call_b", name: "get_weather", arguments: '{"city":"Rome"}', argumentPieces: ['{"city":', '"Rome"}'] },
          ],
          finish: u.finish[1],
          usage: { input: 20, output: 9 },
        });
        const { events, response } = await allWays(u, { model: u.model, tools, input: "Paris and Rome?" });
        expect(shape(events)).toEqual([
          "created", "in_progress",
          "output_item.added:0:function_call", "function_call_arguments.delta:0+", "function_call_arguments.done:0", "output_item.done:0",
          "output_item.added:1:function_call", "function_call_arguments.delta:1+", "function_call_arguments.done:1", "output_item.done:1",
          "completed",
        ]);
        const calls = response.output as OpenAI.Responses.ResponseFunctionToolCall[];
        expect(calls.map((c) => JSON.parse(c.arguments))).toEqual([{ city: "Paris" }, { city: "Rome" }]);
        expect(new Set(calls.map((c) => c.call_id)).size).toBe(2);
        expect(new Set(calls.map((c) => c.id)).size).toBe(2);

        setScript(u, { text: ["Both sunny"], finish: u.finish[0], usage: { input: 30, output: 2 } });
        const next = await client.responses.create({
          model: u.model,
          tools,
          input: [
            { role: "user", content: "Paris and Rome?" },
            ...calls,
            { type: "function_call_output", call_id: calls[0]!.call_id, output: "sunny" },
            { type: "function_call_output", call_id: calls[1]!.call_id, output: "sunny too" },
          ],
        });
        expect(next.output_text).toBe("Both sunny");
        const sent = u.fake.requests.at(-1)!.body;
        if (kind === "anthropic") {
          expect(sent.messages[1].content.map((b: any) => b.type)).toEqual(["tool_use", "tool_use"]);
          expect(sent.messages[2].content).toEqual([
            { type: "tool_result", tool_use_id: "call_a", content: "sunny" },
            { type: "tool_result", tool_use_id: "call_b", content: "sunny too" },
          ]);
        }
        if (kind === "openai") expect(sent.messages.slice(2).map((m: any) => [m.role, m.tool_call_id])).toEqual([["tool", "call_a"], ["tool", "call_b"]]);
      });

      it("reasoning, sent back on the next turn (Anthropic's signature kept through encrypted_content)", async () => {
        const u = up();
        setScript(u, { reasoning: ["Let me ", "think."], text: ["Answer"], finish: u.finish[0], usage: { input: 15, output: 12 } });
        const body = {
          model: u.model,
          max_output_tokens: 4096,
          reasoning: { effort: "medium" as const, summary: "auto" as const },
          include: ["reasoning.encrypted_content" as const],
          input: [{ role: "user" as const, content: "why?" }],
        };
        const { events, response } = await allWays(u, body);
        expect(shape(events)).toEqual([
          "created", "in_progress",
          "output_item.added:0:reasoning", "reasoning_summary_part.added:0", "reasoning_summary_text.delta:0+", "reasoning_summary_text.done:0", "reasoning_summary_part.done:0", "output_item.done:0",
          "output_item.added:1:message", "content_part.added:1", "output_text.delta:1+", "output_text.done:1", "content_part.done:1", "output_item.done:1",
          "completed",
        ]);
        const reasoning = response.output[0] as OpenAI.Responses.ResponseReasoningItem;
        expect(reasoning).toMatchObject({ type: "reasoning", summary: [{ type: "summary_text", text: "Let me think." }] });
        // Anthropic's thinking carries a signature: Portico's encrypted_content holds it; the others have nothing to keep.
        if (kind === "anthropic") expect(reasoning.encrypted_content).toMatch(/^portico\.r1\./);
        else expect(reasoning.encrypted_content).toBeNull();
        expect(response.output_text).toBe("Answer");
        const asked = u.fake.requests.at(-1)!.body;
        if (kind === "anthropic") expect(asked.thinking).toMatchObject({ type: "enabled", budget_tokens: expect.any(Number) });
        if (kind === "gemini") expect(asked.generationConfig.thinkingConfig).toMatchObject({ includeThoughts: true });
        if (kind === "openai") expect(asked.reasoning_effort).toBe("medium");

        setScript(u, { text: ["Because."], finish: u.finish[0], usage: { input: 30, output: 2 } });
        const next = await client.responses.create({
          ...body,
          input: [...body.input, ...(response.output as OpenAI.Responses.ResponseInputItem[]), { role: "user", content: "and then?" }],
        });
        expect(next.output_text).toBe("Because.");
        const sent = u.fake.requests.at(-1)!.body;
        if (kind === "anthropic") {
          // The thinking block goes back first, with its signature, exactly as it came.
          expect(sent.messages[1]).toEqual({ role: "assistant", content: [{ type: "thinking", thinking: "Let me think.", signature: "sig" }, { type: "text", text: "Answer" }] });
        }
        if (kind === "openai") expect(sent.messages[1]).toMatchObject({ role: "assistant", content: "Answer", reasoning: "Let me think." });
        if (kind === "gemini") expect(JSON.stringify(sent.contents)).not.toContain("Let me think.");
      });

      it("max_output_tokens stop: status incomplete, response.incomplete", async () => {
        const u = up();
        setScript(u, { text: ["Once upon"], finish: u.finish[2], usage: { input: 5, output: 2 } });
        const { events, response } = await allWays(u, { model: u.model, max_output_tokens: 2, input: "tell a story" });
        expect(shape(events)).toEqual(["created", "in_progress", ...TEXT_ITEM, "incomplete"]);
        expect(response.status).toBe("incomplete");
        expect(response.incomplete_details).toEqual({ reason: "max_output_tokens" });
        expect(response.output[0]).toMatchObject({ type: "message", status: "incomplete" });
        expect(response.max_output_tokens).toBe(2);
        expect(u.fake.requests.at(-1)!.body).toMatchObject(kind === "gemini" ? { generationConfig: { maxOutputTokens: 2 } } : { max_tokens: 2 });
      });

      it("an error mid-stream is `error` then `response.failed`, and nothing after them", async () => {
        const u = up();
        setScript(u, { text: ["one ", "two ", "three ", "four"], finish: u.finish[0], usage: { input: 5, output: 4 } });
        u.fake.knobs = { failAfterChunks: 3, failMessage: "overloaded now" };
        const res = await post({ model: u.model, stream: true, input: "count" });
        expect(res.status).toBe(200);
        const events = await readSse(res);
        const s = shape(events);
        expect(s.slice(0, 2)).toEqual(["created", "in_progress"]);
        expect(s.slice(-2)).toEqual(["error", "failed"]);
        expect(s).not.toContain("completed");
        events.forEach((e, i) => expect(e.data.sequence_number).toBe(i));
        expect(events.at(-2)!.data).toMatchObject({ type: "error", code: "server_error", message: expect.stringContaining("overloaded now") });
        expect(events.at(-1)!.data.response).toMatchObject({ status: "failed", error: { code: "server_error", message: expect.stringContaining("overloaded now") } });
        // The SDK's stream helper rejects with the `error` event rather than resolving a partial response.
        await expect(client.responses.stream({ model: u.model, input: "count" }).finalResponse()).rejects.toMatchObject({ message: expect.stringContaining("overloaded now") });
        // Not streamed: the provider's failure before an answer is OpenAI's error envelope.
        u.fake.knobs = { failStatus: 500, failMessage: "upstream broke" };
        const plain = await post({ model: u.model, input: "count" });
        expect(plain.status).toBe(502);
        expect(await plain.json()).toMatchObject({ error: { type: "server_error", message: expect.any(String), code: "upstream_failed", param: null } });
        await expect(client.responses.create({ model: u.model, input: "count" })).rejects.toMatchObject({ status: 502 });
        u.fake.knobs = {};
      });

      it("a client that leaves mid-stream stops the upstream request and the generation is recorded as cancelled", async () => {
        const u = up();
        setScript(u, { text: Array.from({ length: 40 }, (_, i) => `w${i} `), finish: u.finish[0], usage: { input: 5, output: 40 } });
        u.fake.knobs = { chunkDelayMs: 30 };
        const before = u.fake.requests.length;
        const ac = new AbortController();
        const res = await post({ model: u.model, stream: true, input: "long" }, ac.signal);
        const reader = res.body!.getReader();
        let text = "";
        while (!text.includes("output_text.delta")) text += new TextDecoder().decode((await reader.read()).value);
        const id = /"id":"(gen-[^"]+)"/.exec(text)![1]!;
        ac.abort();
        await u.fake.clientAborted();
        expect(u.fake.requests.length).toBe(before + 1);
        const gen = await waitFor("the cancelled generation's record", async () => {
          const r = await api(h, "GET", `/generation?id=${id}`, { key: h.tenant.apiKey });
          return r.status === 200 && r.json.data.status !== "pending" ? r.json.data : undefined;
        });
        expect(gen.status).toBe("cancelled");
        u.fake.knobs = {};
      });
    });
  }
});
