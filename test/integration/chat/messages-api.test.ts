/**
 * `POST /api/v1/messages` beyond the conformance matrix: the exact bytes of a stream, authentication by
 * `x-api-key` or Bearer, refusals in Anthropic's error envelope naming the field, the Anthropic headers passed
 * upstream, fields translated to the Anthropic upstream (system blocks with cache_control, images,
 * metadata.user_id, stop_sequences, top_k), presets (`@preset/<slug>` and `POST /presets/{slug}/messages`),
 * the generation record, `count_tokens` (exact from Anthropic, estimated otherwise), and the gRPC ChatService
 * RPC the gateway translates to. SQLite and PostgreSQL.
 */
import Anthropic from "@anthropic-ai/sdk";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChatService } from "../../../src/gen/portico/chat/v1/chat_service_pb.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeAnthropic } from "../../helpers/fake-upstreams/anthropic.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";

describe.each(["sqlite", "postgresql"] as const)("Anthropic Messages API (%s)", (provider) => {
  let h: Harness;
  let anthropic: FakeUpstream;
  let openai: FakeUpstream;
  let client: Anthropic;

  beforeAll(async () => {
    anthropic = await startFakeAnthropic();
    openai = await startFakeOpenAI();
    h = await startHarness({ provider, env: { PORTICO_PROVIDER_ANTHROPIC_BASE_URL: anthropic.url, PORTICO_PROVIDER_GROQ_BASE_URL: `${openai.url}/v1` } });
    for (const [p, key] of [["anthropic", "sk-ant-test"], ["groq", "gsk-test"]] as const) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: p, key } })).status).toBe(200);
    }
    client = new Anthropic({ baseURL: `${h.baseUrl}/api`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([anthropic?.close(), openai?.close()]);
  });

  const post = (path: string, body: unknown, headers: Record<string, string> = { "x-api-key": h.tenant.apiKey }) =>
    fetch(`${h.baseUrl}/api/v1${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

  it("streams exactly Anthropic's frames (event lines, data objects, no [DONE])", async () => {
    anthropic.script = { text: ["Hi", "!"], finish: "end_turn", usage: { input: 7, output: 2, cached: 3 } };
    const res = await post("/messages", { model: "anthropic/claude-sonnet-4", max_tokens: 10, stream: true, messages: [{ role: "user", content: "hello" }] });
    expect(res.status).toBe(200);
    // SSE comments are not frames: a loaded machine may take past the first keepalive (1 s) to the first event.
    const text = (await res.text()).replace(/^: keepalive\n\n/gm, "");
    const id = /"id":"(gen-[0-9a-f-]+)"/.exec(text)![1];
    const usage = { input_tokens: 7, cache_creation_input_tokens: 0, cache_read_input_tokens: 3, output_tokens: 0 };
    const frames = [
      ["message_start", { type: "message_start", message: { id, type: "message", role: "assistant", model: "claude-sonnet-4-20250514", content: [], stop_reason: null, stop_sequence: null, usage } }],
      ["ping", { type: "ping" }],
      ["content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }],
      ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hi" } }],
      ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "!" } }],
      ["content_block_stop", { type: "content_block_stop", index: 0 }],
      ["message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { ...usage, output_tokens: 2 } }],
      ["message_stop", { type: "message_stop" }],
    ] as const;
    expect(text).toBe(frames.map(([e, d]) => `event: ${e}\ndata: ${JSON.stringify(d)}\n\n`).join(""));
  });

  it("authenticates with x-api-key or Bearer, and refuses without a key in Anthropic's envelope", async () => {
    anthropic.script = { text: ["ok"], finish: "end_turn", usage: { input: 1, output: 1 } };
    const body: Anthropic.MessageCreateParamsNonStreaming = { model: "anthropic/claude-sonnet-4", max_tokens: 10, messages: [{ role: "user", content: "x" }] };
    expect((await post("/messages", body)).status).toBe(200);
    expect((await post("/messages", body, { authorization: `Bearer ${h.tenant.apiKey}` })).status).toBe(200);
    const bearer = new Anthropic({ baseURL: `${h.baseUrl}/api`, authToken: h.tenant.apiKey, apiKey: null, maxRetries: 0 });
    expect((await bearer.messages.create(body)).content).toEqual([{ type: "text", text: "ok" }]);
    const none = await post("/messages", body, {});
    expect(none.status).toBe(401);
    expect(await none.json()).toMatchObject({ type: "error", error: { type: "authentication_error", message: expect.any(String) } });
    const wrong = new Anthropic({ baseURL: `${h.baseUrl}/api`, apiKey: "pk-v1-" + "0".repeat(64), maxRetries: 0 });
    await expect(wrong.messages.create(body)).rejects.toBeInstanceOf(Anthropic.AuthenticationError);
  });

  it("refuses bad bodies with 400 invalid_request_error naming the field, before calling a provider", async () => {
    const before = anthropic.requests.length;
    const cases: Array<[unknown, string]> = [
      [{ model: "anthropic/claude-sonnet-4", messages: [{ role: "user", content: "x" }] }, "max_tokens is required"],
      [{ model: "anthropic/claude-sonnet-4", max_tokens: 5, container: "c1", messages: [{ role: "user", content: "x" }] }, "container is not a recognised property"],
      [{ model: "anthropic/claude-sonnet-4", max_tokens: 5, messages: [{ role: "user", content: [{ type: "document", source: {} }] }] }, "messages[0].content[0].type"],
      [{ model: "anthropic/claude-sonnet-4", max_tokens: 5, tools: [{ type: "web_search_20250305", name: "web_search" }], messages: [{ role: "user", content: "x" }] }, "tools[0].type"],
      [{ model: "anthropic/claude-sonnet-4", max_tokens: 5, temperature: 1.5, messages: [{ role: "user", content: "x" }] }, "temperature"],
      [{ model: "anthropic/claude-sonnet-4", max_tokens: 5, thinking: { type: "enabled", budget_tokens: 10 }, messages: [{ role: "user", content: "x" }] }, "thinking.budget_tokens"],
      [{ model: "anthropic/claude-sonnet-4", max_tokens: 5, messages: [{ role: "system", content: "x" }] }, "messages[0].role"],
      [[1, 2], "body must be a JSON object"],
    ];
    for (const [body, says] of cases) {
      const res = await post("/messages", body);
      expect(res.status, says).toBe(400);
      const json = (await res.json()) as any;
      expect(json, says).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
      expect(json.error.message, says).toContain(says);
    }
    const broken = await fetch(`${h.baseUrl}/api/v1/messages`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": h.tenant.apiKey }, body: "{" });
    expect(broken.status).toBe(400);
    expect(await broken.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
    await expect(client.messages.create({ model: "anthropic/claude-sonnet-4", max_tokens: 5, messages: [] })).rejects.toBeInstanceOf(Anthropic.BadRequestError);
    expect(anthropic.requests.length).toBe(before);
    // A model nobody serves: 4xx in the envelope too.
    const unknown = await post("/messages", { model: "nowhere/model", max_tokens: 5, messages: [{ role: "user", content: "x" }] });
    expect(unknown.status).toBeGreaterThanOrEqual(400);
    expect(unknown.status).toBeLessThan(500);
    expect(((await unknown.json()) as any).type).toBe("error");
  });

  it("passes anthropic-beta and anthropic-version to the Anthropic endpoint, accepts ?beta=true, and translates Anthropic fields", async () => {
    anthropic.script = { text: ["seen"], finish: "end_turn", usage: { input: 9, output: 1 } };
    const body = {
      model: "anthropic/claude-sonnet-4",
      max_tokens: 64,
      system: [{ type: "text", text: "You are terse.", cache_control: { type: "ephemeral" } }],
      messages: [
        { role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }, { type: "text", text: "what is it?" }] },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_9", name: "look", input: { at: 1 }, cache_control: { type: "ephemeral" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_9", content: "a cat", cache_control: { type: "ephemeral", ttl: "1h" } }] },
      ],
      metadata: { user_id: "user-42" },
      stop_sequences: ["END"],
      top_k: 5,
      tool_choice: { type: "auto", disable_parallel_tool_use: true },
      tools: [{ name: "look", input_schema: { type: "object" } }],
    };
    const res = await fetch(`${h.baseUrl}/api/v1/messages?beta=true`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": h.tenant.apiKey, "anthropic-version": "2023-06-01", "anthropic-beta": "interleaved-thinking-2025-05-14" },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    const up = anthropic.requests.at(-1)!;
    expect(up.headers["anthropic-beta"]).toBe("interleaved-thinking-2025-05-14");
    expect(up.headers["anthropic-version"]).toBe("2023-06-01");
    expect(up.headers["x-api-key"]).toBe("sk-ant-test");
    expect(up.body).toMatchObject({
      model: "claude-sonnet-4-20250514",
      max_tokens: 64,
      system: [{ type: "text", text: "You are terse.", cache_control: { type: "ephemeral" } }],
      messages: [
        { role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }, { type: "text", text: "what is it?" }] },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_9", name: "look", input: { at: 1 }, cache_control: { type: "ephemeral" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_9", content: "a cat", cache_control: { type: "ephemeral", ttl: "1h" } }] },
      ],
      metadata: { user_id: "user-42" },
      stop_sequences: ["END"],
      top_k: 5,
      tool_choice: { type: "auto", disable_parallel_tool_use: true },
      tools: [{ name: "look", input_schema: { type: "object" } }],
    });
    // Without the header, none goes upstream.
    await post("/messages", { model: "anthropic/claude-sonnet-4", max_tokens: 5, messages: [{ role: "user", content: "x" }] });
    expect(anthropic.requests.at(-1)!.headers["anthropic-beta"]).toBeUndefined();
  });

  it("routes @preset/<slug> made from a Messages body, and records the generation with its tokens", async () => {
    const made = await api(h, "POST", "/presets/terse-claude/messages", {
      key: h.tenant.managementKey,
      body: { model: "anthropic/claude-sonnet-4", max_tokens: 300, system: "Be terse.", temperature: 0.2, stop_sequences: ["##"], messages: [{ role: "user", content: "ignored" }] },
    });
    expect(made.status).toBe(200);
    expect(made.json.data.config ?? made.json.data.version?.config ?? made.json.data).toBeDefined();
    expect(JSON.stringify(made.json.data)).toContain("Be terse.");
    const badPreset = await api(h, "POST", "/presets/bad/messages", { key: h.tenant.managementKey, body: { model: "anthropic/claude-sonnet-4", messages: [{ role: "user", content: "x" }] } });
    expect(badPreset.status).toBe(400);
    expect(badPreset.json.error.message).toContain("max_tokens");

    anthropic.script = { text: ["Short."], finish: "end_turn", usage: { input: 12, output: 2 } };
    const msg = await client.messages.create({ model: "@preset/terse-claude", max_tokens: 50, messages: [{ role: "user", content: "explain" }] });
    expect(msg.content).toEqual([{ type: "text", text: "Short." }]);
    const up = anthropic.requests.at(-1)!.body;
    expect(up.system).toBe("Be terse.");
    expect(up.temperature).toBe(0.2);
    expect(up.stop_sequences).toEqual(["##"]);
    const gen = await waitFor("the generation record", async () => {
      const r = await api(h, "GET", `/generation?id=${msg.id}`, { key: h.tenant.apiKey });
      return r.status === 200 ? r.json.data : undefined;
    });
    expect(gen).toMatchObject({ id: msg.id, provider: "anthropic", preset_slug: "terse-claude", prompt_tokens: 12, completion_tokens: 2, status: "success", finish_reason: "stop", streamed: false });
  });

  it("count_tokens: exact from Anthropic's endpoint, an estimate for other providers", async () => {
    anthropic.script = { text: [], finish: "end_turn", usage: { input: 4242, output: 0 } };
    const before = anthropic.requests.length;
    const body: Anthropic.MessageCountTokensParams = { model: "anthropic/claude-sonnet-4", system: "sys", messages: [{ role: "user", content: "count me" }], tools: [{ name: "t", input_schema: { type: "object" } }] };
    const res = await fetch(`${h.baseUrl}/api/v1/messages/count_tokens?beta=true`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": h.tenant.apiKey, "anthropic-beta": "token-counting-2024-11-01" },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-portico-token-count")).toBe("exact");
    expect(await res.json()).toEqual({ input_tokens: 4242 });
    expect(anthropic.requests.length).toBe(before + 1);
    const up = anthropic.requests.at(-1)!;
    expect(up.url).toBe("/v1/messages/count_tokens");
    expect(up.headers["anthropic-beta"]).toBe("token-counting-2024-11-01");
    expect(up.body).toEqual({ model: "claude-sonnet-4-20250514", system: "sys", messages: [{ role: "user", content: [{ type: "text", text: "count me" }] }], tools: [{ name: "t", input_schema: { type: "object" } }] });
    expect(await client.messages.countTokens(body)).toEqual({ input_tokens: 4242 });

    const openaiBefore = openai.requests.length;
    const text = "x".repeat(400);
    const est = await post("/messages/count_tokens", { model: "groq/llama-4", messages: [{ role: "user", content: text }] });
    expect(est.status).toBe(200);
    expect(est.headers.get("x-portico-token-count")).toBe("estimate");
    // The o200k tokenizer's count of the text, plus 3 for the message (docs/dialects.md).
    expect(await est.json()).toEqual({ input_tokens: countTokens(text) + 3 });
    expect(openai.requests.length).toBe(openaiBefore);
    const bad = await post("/messages/count_tokens", { model: "groq/llama-4", max_tokens: 5, messages: [{ role: "user", content: "x" }] });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error.message).toContain("max_tokens is not a recognised property");
  });

  it("gRPC: ChatService.CreateMessage and StreamMessage answer the same message and events", async () => {
    anthropic.script = { text: ["g", "rpc"], finish: "end_turn", usage: { input: 3, output: 2 } };
    const grpc = createClient(ChatService, createGrpcTransport({ baseUrl: h.coreUrl }));
    const headers = { authorization: `Bearer ${h.tenant.apiKey}` };
    const body = { model: "anthropic/claude-sonnet-4", max_tokens: 10, messages: [{ role: "user", content: "x" }] };
    const res = await grpc.createMessage({ body }, { headers });
    const message = JSON.parse(res.messageJson);
    expect(message).toMatchObject({ type: "message", content: [{ type: "text", text: "grpc" }], stop_reason: "end_turn", usage: { input_tokens: 3, output_tokens: 2 } });
    expect(res.provider).toBe("anthropic");
    const types: string[] = [];
    for await (const m of grpc.streamMessage({ body: { ...body, stream: true } }, { headers })) for (const e of m.events) types.push(e.type);
    expect(types.filter((t) => t !== "content_block_delta")).toEqual(["message_start", "ping", "content_block_start", "content_block_stop", "message_delta", "message_stop"]);
    await expect(grpc.createMessage({ body: { model: "anthropic/claude-sonnet-4", messages: [{ role: "user", content: "x" }] } }, { headers })).rejects.toThrow(/max_tokens is required/);
  });
});
