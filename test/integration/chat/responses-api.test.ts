/**
 * `POST /api/v1/responses` beyond the conformance matrix: the whole `response` object, refusals in OpenAI's error
 * envelope naming the field (stateful fields, unknown fields, hosted tools, foreign encrypted reasoning), fields
 * translated upstream (text.format, images, tool outputs with images, parallel_tool_calls, tool_choice, metadata),
 * presets made from Responses bodies and used from every dialect (and a Messages-made preset used from Responses),
 * the generation record, and the gRPC ChatService RPCs the gateway translates to. SQLite and PostgreSQL.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChatService } from "../../../src/gen/portico/chat/v1/chat_service_pb.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeAnthropic } from "../../helpers/fake-upstreams/anthropic.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";

describe.each(["sqlite", "postgresql"] as const)("OpenAI Responses API (%s)", (provider) => {
  let h: Harness;
  let anthropic: FakeUpstream;
  let openai: FakeUpstream;
  let client: OpenAI;

  beforeAll(async () => {
    anthropic = await startFakeAnthropic();
    openai = await startFakeOpenAI();
    h = await startHarness({ provider, env: { PORTICO_PROVIDER_ANTHROPIC_BASE_URL: anthropic.url, PORTICO_PROVIDER_GROQ_BASE_URL: `${openai.url}/v1` } });
    for (const [p, key] of [["anthropic", "sk-ant-test"], ["groq", "gsk-test"]] as const) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: p, key } })).status).toBe(200);
    }
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([anthropic?.close(), openai?.close()]);
  });

  const post = (body: unknown, key = h.tenant.apiKey) =>
    fetch(`${h.baseUrl}/api/v1/responses`, { method: "POST", headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) }, body: JSON.stringify(body) });

  it("answers the whole response object, echoing the request's settings", async () => {
    openai.script = { text: ["Hi", "!"], finish: "stop", usage: { input: 7, output: 2, cached: 3 } };
    const res = await post({
      model: "groq/llama-4",
      input: "hello",
      instructions: "Greet.",
      temperature: 0.5,
      top_p: 0.9,
      max_output_tokens: 50,
      store: false,
      metadata: { team: "a" },
      user: "u-1",
      tool_choice: "none",
      parallel_tool_calls: false,
      truncation: "disabled",
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as any;
    expect(body).toEqual({
      id: expect.stringMatching(/^gen-/),
      object: "response",
      created_at: expect.any(Number),
      status: "completed",
      background: false,
      error: null,
      incomplete_details: null,
      instructions: "Greet.",
      max_output_tokens: 50,
      metadata: { team: "a" },
      model: expect.any(String),
      output: [{ id: `msg_${body.id}_0`, type: "message", status: "completed", role: "assistant", content: [{ type: "output_text", text: "Hi!", annotations: [], logprobs: [] }] }],
      parallel_tool_calls: false,
      previous_response_id: null,
      reasoning: { effort: null, summary: null },
      store: false,
      temperature: 0.5,
      text: { format: { type: "text" } },
      tool_choice: "none",
      tools: [],
      top_p: 0.9,
      truncation: "disabled",
      usage: { input_tokens: 7, input_tokens_details: { cached_tokens: 3 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 9 },
      user: "u-1",
    });
    const up = openai.requests.at(-1)!.body;
    expect(up).toMatchObject({ messages: [{ role: "system", content: "Greet." }, { role: "user", content: "hello" }], temperature: 0.5, top_p: 0.9, max_tokens: 50, user: "u-1", tool_choice: "none", parallel_tool_calls: false });
    const gen = await waitFor("the generation record", async () => {
      const r = await api(h, "GET", `/generation?id=${body.id}`, { key: h.tenant.apiKey });
      return r.status === 200 ? r.json.data : undefined;
    });
    expect(gen).toMatchObject({ id: body.id, provider: "groq", prompt_tokens: 7, completion_tokens: 2, status: "success", streamed: false });
  });

  it("streams exactly OpenAI's frames (event lines, data objects with sequence_number, no [DONE])", async () => {
    openai.script = { text: ["Hi", "!"], finish: "stop", usage: { input: 7, output: 2 } };
    const res = await post({ model: "groq/llama-4", input: "hello", stream: true });
    expect(res.status).toBe(200);
    // Keepalive comments (a loaded machine may need one before the first event) are not frames.
    const text = (await res.text()).replace(/^: keepalive\n\n/gm, "");
    const first = JSON.parse(/^event: response.created\ndata: (.*)\n\n/.exec(text)![1]!).response;
    const { id, created_at, model } = first;
    const response = (status: string, output: unknown[], usage: unknown) => ({
      id, object: "response", created_at, status, background: false, error: null, incomplete_details: null, instructions: null,
      max_output_tokens: null, metadata: {}, model, output, parallel_tool_calls: true, previous_response_id: null,
      reasoning: { effort: null, summary: null }, store: false, temperature: 1, text: { format: { type: "text" } }, tool_choice: "auto",
      tools: [], top_p: 1, truncation: "disabled", usage, user: null,
    });
    const item = `msg_${id}_0`;
    const part = (t: string) => ({ type: "output_text", text: t, annotations: [], logprobs: [] });
    const done = { id: item, type: "message", status: "completed", role: "assistant", content: [part("Hi!")] };
    const frames: Array<[string, Record<string, unknown>]> = [
      ["response.created", { response: response("in_progress", [], null) }],
      ["response.in_progress", { response: response("in_progress", [], null) }],
      ["response.output_item.added", { output_index: 0, item: { id: item, type: "message", status: "in_progress", role: "assistant", content: [] } }],
      ["response.content_part.added", { item_id: item, output_index: 0, content_index: 0, part: part("") }],
      ["response.output_text.delta", { item_id: item, output_index: 0, content_index: 0, delta: "Hi", logprobs: [] }],
      ["response.output_text.delta", { item_id: item, output_index: 0, content_index: 0, delta: "!", logprobs: [] }],
      ["response.output_text.done", { item_id: item, output_index: 0, content_index: 0, text: "Hi!", logprobs: [] }],
      ["response.content_part.done", { item_id: item, output_index: 0, content_index: 0, part: part("Hi!") }],
      ["response.output_item.done", { output_index: 0, item: done }],
      [
        "response.completed",
        { response: response("completed", [done], { input_tokens: 7, input_tokens_details: { cached_tokens: 0 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 9 }) },
      ],
    ];
    expect(text).toBe(frames.map(([e, d], i) => `event: ${e}\ndata: ${JSON.stringify({ type: e, ...d, sequence_number: i })}\n\n`).join(""));
    expect(id).toMatch(/^gen-/);
  });

  it("a provider failing after the stream opened (keepalive) but before its first event: response.created, error, response.failed", async () => {
    anthropic.knobs = { headerDelayMs: 1_500, failStatus: 500, failMessage: "slow and broken" };
    try {
      const res = await post({ model: "anthropic/claude-sonnet-4", input: "x", stream: true });
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text.startsWith(": keepalive\n\n")).toBe(true);
      const events = text
        .split("\n\n")
        .filter((f) => f.startsWith("event: "))
        .map((f) => JSON.parse(f.split("\n")[1]!.slice(6)));
      expect(events.map((e) => [e.type, e.sequence_number])).toEqual([["response.created", 0], ["error", 1], ["response.failed", 2]]);
      expect(events[1]).toMatchObject({ code: "server_error", message: expect.any(String) });
      expect(events[2].response).toMatchObject({ object: "response", status: "failed", model: "anthropic/claude-sonnet-4", error: { code: "server_error" } });
      // The SDK's stream helper rejects with the provider's failure, not with a complaint about the first event.
      const err = await client.responses.stream({ model: "anthropic/claude-sonnet-4", input: "x" }).finalResponse().then(() => undefined, (e: unknown) => e as { message?: string });
      expect(err?.message).toBe(events[1].message);
    } finally {
      anthropic.knobs = {};
    }
  });

  it("refuses what it does not serve with 400 in OpenAI's envelope naming the field", async () => {
    const base = { model: "groq/llama-4", input: "x" };
    const cases: Array<[unknown, string, RegExp]> = [
      [{ ...base, previous_response_id: "resp_123" }, "previous_response_id", /stateless/],
      [{ ...base, store: true }, "store", /stateless/],
      [{ ...base, conversation: "conv_1" }, "conversation", /not a recognised property/],
      [{ ...base, background: true }, "background", /not a recognised property/],
      [{ ...base, tools: [{ type: "web_search" }] }, "tools[0].type", /must be one of "function"/],
      [{ ...base, tool_choice: { type: "web_search_preview" } }, "tool_choice.type", /must be one of "function"/],
      [{ ...base, tools: [{ type: "namespace", name: "ns", description: "", tools: [{ type: "custom", name: "apply_patch" }] }] }, "tools[0].tools[0].type", /must be one of "function", got "custom"/],
      [{ ...base, tools: [{ type: "namespace", name: "ns", description: "", tools: [{ type: "function", name: "a" }, { type: "function", name: "a" }] }] }, "tools[0].tools[1].name", /declared twice/],
      [{ ...base, include: ["message.output_text.logprobs"] }, "include[0]", /reasoning.encrypted_content/],
      [{ ...base, truncation: "auto" }, "truncation", /disabled/],
      [{ ...base, input: [{ type: "item_reference", id: "msg_1" }] }, "input[0].type", /must be one of/],
      [{ ...base, input: [{ role: "system", content: [{ type: "input_image", image_url: "https://x/y.png" }] }] }, "input[0].content[0].type", /only accepted in user messages/],
      [{ ...base, input: [{ role: "user", content: "x" }, { type: "reasoning", summary: [], encrypted_content: "gAAAAopaque" }] }, "input[1].encrypted_content", /not issued by Portico/],
      [{ ...base, text: { format: { type: "json_schema", schema: {} } } }, "text.format.name", /required/],
      [{ ...base, max_output_tokens: 0 }, "max_output_tokens", /at least 1/],
      [{ input: "x" }, "model", /required/],
    ];
    for (const [body, param, message] of cases) {
      const res = await post(body);
      const json = (await res.json()) as any;
      expect([res.status, json.error.param], JSON.stringify(body)).toEqual([400, param]);
      expect(json.error).toMatchObject({ type: "invalid_request_error", code: "bad_request" });
      expect(json.error.message).toMatch(message);
    }
    expect((await post({ ...base, store: false, previous_response_id: null })).status).toBe(200);
    // Without a key: 401 in the same envelope.
    const anon = await post(base, "");
    expect(anon.status).toBe(401);
    expect(((await anon.json()) as any).error).toMatchObject({ type: "authentication_error", message: expect.any(String) });
    // The SDK reads the envelope.
    await expect(client.responses.create({ model: "groq/llama-4", input: "x", previous_response_id: "resp_1" })).rejects.toMatchObject({ status: 400, param: "previous_response_id" });
  });

  it("translates text.format, images, tool outputs with images, tool_choice and verbosity upstream", async () => {
    openai.script = { text: ['{"a":1}'], finish: "stop", usage: { input: 5, output: 3 } };
    const schema = { type: "object", properties: { a: { type: "number" } }, required: ["a"] };
    const r = await client.responses.create({
      model: "groq/llama-4",
      text: { format: { type: "json_schema", name: "answer", schema, strict: true }, verbosity: "low" },
      tools: [{ type: "function", name: "look", parameters: { type: "object" }, strict: false }],
      tool_choice: { type: "function", name: "look" },
      input: [
        { role: "developer", content: "Rules." },
        { role: "user", content: [{ type: "input_text", text: "see" }, { type: "input_image", image_url: "data:image/png;base64,AAAA", detail: "low" }] },
        { type: "function_call", call_id: "c1", name: "look", arguments: "{}" },
        { type: "function_call_output", call_id: "c1", output: [{ type: "input_text", text: "a cat" }, { type: "input_image", image_url: "https://img/cat.png" }] },
      ],
    });
    expect(r.output_text).toBe('{"a":1}');
    expect(r.text).toEqual({ format: { type: "json_schema", name: "answer", schema, strict: true }, verbosity: "low" });
    const up = openai.requests.at(-1)!.body;
    expect(up.response_format).toEqual({ type: "json_schema", json_schema: { name: "answer", schema, strict: true } });
    expect(up.verbosity).toBe("low");
    expect(up.tool_choice).toEqual({ type: "function", function: { name: "look" } });
    expect(up.tools).toEqual([{ type: "function", function: { name: "look", parameters: { type: "object" }, strict: false } }]);
    expect(up.messages).toEqual([
      { role: "developer", content: "Rules." },
      { role: "user", content: [{ type: "text", text: "see" }, { type: "image_url", image_url: { url: "data:image/png;base64,AAAA", detail: "low" } }] },
      { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "look", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "c1", content: [{ type: "text", text: "a cat" }, { type: "image_url", image_url: { url: "https://img/cat.png" } }] },
    ]);
  });

  it("presets from Responses bodies serve every dialect, and a Messages-made preset serves Responses", async () => {
    const made = await api(h, "POST", "/presets/terse-resp/responses", {
      key: h.tenant.managementKey,
      body: {
        model: "groq/llama-4",
        instructions: "Be terse.",
        input: "ignored",
        max_output_tokens: 77,
        temperature: 0.3,
        text: { format: { type: "json_object" } },
        stream: true,
        include: ["reasoning.encrypted_content"],
        metadata: { k: "v" },
      },
    });
    expect(made.status).toBe(200);
    expect(made.json.data.designated_version).toMatchObject({ version: 1, system_prompt: "Be terse.", config: { model: "groq/llama-4", max_tokens: 77, temperature: 0.3, response_format: { type: "json_object" } } });
    expect(Object.keys(made.json.data.designated_version.config).sort()).toEqual(["max_tokens", "model", "response_format", "temperature"]);
    // A second body is version 2, designated.
    const again = await api(h, "POST", "/presets/terse-resp/responses", { key: h.tenant.managementKey, body: { model: "groq/llama-4", instructions: "Be terse.", input: "x", max_output_tokens: 77, temperature: 0.3 } });
    expect(again.json.data.designated_version.version).toBe(2);
    // A namespace tool is stored as its flattened function tools.
    const ns = await api(h, "POST", "/presets/ns-resp/responses", {
      key: h.tenant.managementKey,
      body: { model: "groq/llama-4", input: "x", tools: [{ type: "namespace", name: "mcp__repl", description: "REPL.", tools: [{ type: "function", name: "js", description: "Run.", parameters: { type: "object" } }] }] },
    });
    expect(ns.status).toBe(200);
    expect(ns.json.data.designated_version.config.tools).toEqual([{ type: "function", function: { name: "mcp__repl__js", description: 'Run.\n\n(Tool "js" of mcp__repl: REPL.)', parameters: { type: "object" } } }]);
    const refused = await api(h, "POST", "/presets/terse-resp/responses", { key: h.tenant.managementKey, body: { model: "groq/llama-4", input: "x", previous_response_id: "r" } });
    expect(refused.status).toBe(400);
    expect(refused.json.error.message).toContain("previous_response_id");

    openai.script = { text: ["Ok."], finish: "stop", usage: { input: 4, output: 1 } };
    const viaResponses = await client.responses.create({ model: "@preset/terse-resp", input: "explain" });
    expect(viaResponses.output_text).toBe("Ok.");
    expect(openai.requests.at(-1)!.body).toMatchObject({ messages: [{ role: "system", content: "Be terse." }, { role: "user", content: "explain" }], max_tokens: 77, temperature: 0.3 });
    const gen = await waitFor("the preset's generation", async () => {
      const r = await api(h, "GET", `/generation?id=${viaResponses.id}`, { key: h.tenant.apiKey });
      return r.status === 200 ? r.json.data : undefined;
    });
    expect(gen).toMatchObject({ preset_slug: "terse-resp" });
    const anthropicClient = new Anthropic({ baseURL: `${h.baseUrl}/api`, apiKey: h.tenant.apiKey, maxRetries: 0 });
    await anthropicClient.messages.create({ model: "@preset/terse-resp", max_tokens: 20, messages: [{ role: "user", content: "explain" }] });
    expect(openai.requests.at(-1)!.body.messages[0]).toEqual({ role: "system", content: "Be terse." });
    const chat = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "@preset/terse-resp", messages: [{ role: "user", content: "explain" }] } });
    expect(chat.status).toBe(200);
    expect(openai.requests.at(-1)!.body).toMatchObject({ messages: [{ role: "system", content: "Be terse." }, { role: "user", content: "explain" }], max_tokens: 77 });

    // A preset made from a Messages body, used from Responses.
    expect((await api(h, "POST", "/presets/claude-m/messages", { key: h.tenant.managementKey, body: { model: "anthropic/claude-sonnet-4", max_tokens: 300, system: "From Messages.", messages: [{ role: "user", content: "x" }] } })).status).toBe(200);
    anthropic.script = { text: ["Yes."], finish: "end_turn", usage: { input: 3, output: 1 } };
    const fromMessages = await client.responses.create({ model: "@preset/claude-m", input: "q" });
    expect(fromMessages.output_text).toBe("Yes.");
    expect(anthropic.requests.at(-1)!.body).toMatchObject({ system: "From Messages.", max_tokens: 300 });
  });

  it("gRPC: ChatService.CreateResponse and StreamResponse answer the same response and events", async () => {
    anthropic.script = { text: ["g", "rpc"], finish: "end_turn", usage: { input: 3, output: 2 } };
    const grpc = createClient(ChatService, createGrpcTransport({ baseUrl: h.coreUrl }));
    const headers = { authorization: `Bearer ${h.tenant.apiKey}` };
    const body = { model: "anthropic/claude-sonnet-4", input: "x" };
    const res = await grpc.createResponse({ body }, { headers });
    const response = JSON.parse(res.responseJson);
    expect(response).toMatchObject({ object: "response", status: "completed", output: [{ type: "message", content: [{ type: "output_text", text: "grpc" }] }], usage: { input_tokens: 3, output_tokens: 2 } });
    expect(res.provider).toBe("anthropic");
    const types: string[] = [];
    for await (const m of grpc.streamResponse({ body: { ...body, stream: true } }, { headers })) for (const e of m.events) types.push(e.type);
    expect(types.filter((t) => t !== "response.output_text.delta")).toEqual([
      "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
      "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed",
    ]);
    await expect(grpc.createResponse({ body: { model: "anthropic/claude-sonnet-4", input: "x", store: true } }, { headers })).rejects.toThrow(/store: true is not supported/);
  });
});
