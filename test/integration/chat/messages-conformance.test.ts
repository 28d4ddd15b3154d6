/**
 * The conformance matrix of the Anthropic Messages dialect (docs/dialects.md): inbound `POST /api/v1/messages`
 * × upstream {OpenAI-compatible, Anthropic, Gemini} × {plain text, one tool call, parallel tool calls, thinking
 * sent back on the next turn, max_tokens stop, error mid-stream, client cancel}, streaming and not. Streams are
 * read raw and their exact event sequence asserted (runs of the same delta on the same block collapsed to one
 * `+` entry, since the number of pieces is the upstream's); the official `@anthropic-ai/sdk` client's
 * `messages.create` and `messages.stream(...).finalMessage()` must assemble the same content.
 */
import Anthropic from "@anthropic-ai/sdk";
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

const tools = [{ name: "get_weather", description: "Weather of a city", input_schema: { type: "object" as const, properties: { city: { type: "string" } } } }];

interface SseEvent {
  event: string;
  data: any;
}

async function readSse(res: Response): Promise<SseEvent[]> {
  const text = await res.text();
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

/** The sequence as short names; a run of the same delta type on the same block becomes one `…+` entry. */
function shape(events: SseEvent[]): string[] {
  const out: string[] = [];
  for (const e of events) {
    let name: string = e.event;
    if (e.event === "content_block_start") name = `start:${e.data.index}:${e.data.content_block.type}`;
    else if (e.event === "content_block_delta") name = `${e.data.delta.type}:${e.data.index}+`;
    else if (e.event === "content_block_stop") name = `stop:${e.data.index}`;
    else if (e.event === "message_delta") name = `message_delta:${e.data.delta.stop_reason}`;
    if (name.endsWith("+") && out.at(-1) === name) continue;
    out.push(name);
  }
  return out;
}

/** The content a stream assembles (text and arguments joined per block). */
function assemble(events: SseEvent[]): any[] {
  const blocks: any[] = [];
  for (const e of events) {
    if (e.event === "content_block_start") blocks[e.data.index] = structuredClone(e.data.content_block);
    if (e.event !== "content_block_delta") continue;
    const b = blocks[e.data.index];
    const d = e.data.delta;
    if (d.type === "text_delta") b.text += d.text;
    if (d.type === "thinking_delta") b.thinking += d.thinking;
    if (d.type === "signature_delta") b.signature = d.signature;
    if (d.type === "input_json_delta") b.partial = (b.partial ?? "") + d.partial_json;
  }
  return blocks.map((b) => (b.type === "tool_use" ? { ...b, input: JSON.parse(b.partial ?? "{}"), partial: undefined } : b)).map((b) => JSON.parse(JSON.stringify(b)));
}

describe("Anthropic Messages dialect: conformance matrix", () => {
  let h: Harness;
  let client: Anthropic;
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
    client = new Anthropic({ baseURL: `${h.baseUrl}/api`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all(ups.map((u) => u.fake.close()));
  });

  const post = (body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) =>
    fetch(`${h.baseUrl}/api/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": h.tenant.apiKey, "anthropic-version": "2023-06-01", ...headers },
      body: JSON.stringify(body),
      signal,
    });

  const setScript = (u: Upstream, script: Script) => {
    u.fake.script = script;
    u.fake.knobs = {};
  };

  /** Streams raw and through the SDK, creates through the SDK; the three agree. Returns the raw events. */
  async function allWays(u: Upstream, body: Anthropic.MessageCreateParamsNonStreaming): Promise<{ events: SseEvent[]; message: Anthropic.Message }> {
    const res = await post({ ...body, stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const events = await readSse(res);
    const message = await client.messages.create(body);
    const final = await client.messages.stream(body).finalMessage();
    expect(final.content).toEqual(message.content);
    expect(final.stop_reason).toBe(message.stop_reason);
    expect(final.usage.output_tokens).toBe(message.usage.output_tokens);
    expect(assemble(events)).toEqual(message.content);
    expect(events.filter((e) => e.event === "message_start")).toHaveLength(1);
    expect(events[0]!.data.message.id).toMatch(/^gen-/);
    expect(u.fake.requests.at(-1)!.url).not.toContain("count_tokens");
    return { events, message };
  }

  for (const kind of ["openai", "anthropic", "gemini"] as const) {
    describe(`upstream ${kind}`, () => {
      const up = () => ups.find((u) => u.kind === kind)!;

      it("plain text", async () => {
        const u = up();
        setScript(u, { text: ["Hello", ", ", "world"], finish: u.finish[0], usage: { input: 11, output: 3 } });
        const { events, message } = await allWays(u, { model: u.model, max_tokens: 100, messages: [{ role: "user", content: "hi" }] });
        expect(shape(events)).toEqual(["message_start", "ping", "start:0:text", "text_delta:0+", "stop:0", "message_delta:end_turn", "message_stop"]);
        expect(message.content).toEqual([{ type: "text", text: "Hello, world" }]);
        expect(message.stop_reason).toBe("end_turn");
        expect(message.usage).toMatchObject({ input_tokens: 11, output_tokens: 3 });
        // message_start carries usage; input tokens there where the upstream reports them first (Anthropic).
        expect(events[0]!.data.message.usage.input_tokens).toBe(kind === "anthropic" ? 11 : 0);
        expect(events.at(-2)!.data.usage).toMatchObject({ input_tokens: 11, output_tokens: 3 });
      });

      it("one tool call", async () => {
        const u = up();
        setScript(u, {
          text: ["Let me ", "check."],
          toolCalls: [{ id: "toolu_1", name: "get_weather", arguments: '{"city":"Paris"}', argumentPieces: ['{"city"', ':"Paris"}'] }],
          finish: u.finish[1],
          usage: { input: 20, output: 7 },
        });
        const { events, message } = await allWays(u, { model: u.model, max_tokens: 100, tools, messages: [{ role: "user", content: "weather in Paris?" }] });
        expect(shape(events)).toEqual([
          "message_start", "ping", "start:0:text", "text_delta:0+", "stop:0", "start:1:tool_use", "input_json_delta:1+", "stop:1", "message_delta:tool_use", "message_stop",
        ]);
        expect(message.stop_reason).toBe("tool_use");
        expect(message.content[0]).toEqual({ type: "text", text: "Let me check." });
        expect(message.content[1]).toMatchObject({ type: "tool_use", name: "get_weather", input: { city: "Paris" } });
        if (kind !== "gemini") expect((message.content[1] as Anthropic.ToolUseBlock).id).toBe("toolu_1");
        // The upstream got the tool in its own dialect.
        const sent = u.fake.requests.at(-1)!.body;
        if (kind === "openai") expect(sent.tools[0].function.name).toBe("get_weather");
        if (kind === "anthropic") expect(sent.tools[0]).toMatchObject({ name: "get_weather", input_schema: tools[0]!.input_schema });
        if (kind === "gemini") expect(JSON.stringify(sent.tools)).toContain("get_weather");
      });

      it("parallel tool calls keep their blocks and arguments apart", async () => {
        const u = up();
        setScript(u, {
          text: [],
          toolCalls: [
            { id: "toolu_a", name: "get_weather", arguments: '{"city":"Paris"}', argumentPieces: ['{"ci', 'ty":"Paris"}'] },
            { id: "toolu_b", name: "get_weather", arguments: '{"city":"Rome"}', argumentPieces: ['{"city":', '"Rome"}'] },
          ],
          finish: u.finish[1],
          usage: { input: 20, output: 9 },
        });
        const { events, message } = await allWays(u, { model: u.model, max_tokens: 100, tools, messages: [{ role: "user", content: "Paris and Rome?" }] });
        expect(shape(events)).toEqual([
          "message_start", "ping", "start:0:tool_use", "input_json_delta:0+", "stop:0", "start:1:tool_use", "input_json_delta:1+", "stop:1", "message_delta:tool_use", "message_stop",
        ]);
        expect(message.content.map((b) => (b as Anthropic.ToolUseBlock).input)).toEqual([{ city: "Paris" }, { city: "Rome" }]);
        const ids = message.content.map((b) => (b as Anthropic.ToolUseBlock).id);
        expect(new Set(ids).size).toBe(2);

        // The results go back as tool results, in order, answered by the same upstream.
        setScript(u, { text: ["Both sunny"], finish: u.finish[0], usage: { input: 30, output: 2 } });
        const next = await client.messages.create({
          model: u.model,
          max_tokens: 100,
          tools,
          messages: [
            { role: "user", content: "Paris and Rome?" },
            { role: "assistant", content: message.content },
            { role: "user", content: [{ type: "tool_result", tool_use_id: ids[0]!, content: "sunny" }, { type: "tool_result", tool_use_id: ids[1]!, content: "sunny too", is_error: false }] },
          ],
        });
        expect(next.content).toEqual([{ type: "text", text: "Both sunny" }]);
        const sent = u.fake.requests.at(-1)!.body;
        if (kind === "anthropic") {
          expect(sent.messages[1].content.map((b: any) => b.type)).toEqual(["tool_use", "tool_use"]);
          expect(sent.messages[2].content).toEqual([
            { type: "tool_result", tool_use_id: ids[0], content: "sunny" },
            { type: "tool_result", tool_use_id: ids[1], content: "sunny too" },
          ]);
        }
        if (kind === "openai") expect(sent.messages.slice(2).map((m: any) => [m.role, m.tool_call_id])).toEqual([["tool", ids[0]], ["tool", ids[1]]]);
      });

      it("thinking, sent back on the next turn with its signature", async () => {
        const u = up();
        setScript(u, { reasoning: ["Let me ", "think."], text: ["Answer"], finish: u.finish[0], usage: { input: 15, output: 12 } });
        const body = { model: u.model, max_tokens: 4096, thinking: { type: "enabled" as const, budget_tokens: 2048 }, messages: [{ role: "user" as const, content: "why?" }] };
        const { events, message } = await allWays(u, body);
        const signed = kind === "anthropic";
        expect(shape(events)).toEqual([
          "message_start", "ping", "start:0:thinking", "thinking_delta:0+", ...(signed ? ["signature_delta:0+"] : []), "stop:0", "start:1:text", "text_delta:1+", "stop:1", "message_delta:end_turn", "message_stop",
        ]);
        expect(message.content).toEqual([
          { type: "thinking", thinking: "Let me think.", signature: signed ? "sig" : "" },
          { type: "text", text: "Answer" },
        ]);
        const asked = u.fake.requests.at(-1)!.body;
        if (kind === "anthropic") expect(asked.thinking).toEqual({ type: "enabled", budget_tokens: 2048 });
        if (kind === "gemini") expect(asked.generationConfig.thinkingConfig).toMatchObject({ thinkingBudget: 2048 });
        // An OpenAI-compatible endpoint takes an effort: the budget's share of max_tokens (2048 / 4096).
        if (kind === "openai") expect(asked.reasoning_effort).toBe("medium");

        setScript(u, { text: ["Because."], finish: u.finish[0], usage: { input: 30, output: 2 } });
        const next = await client.messages.create({
          ...body,
          messages: [...body.messages, { role: "assistant", content: message.content }, { role: "user", content: "and then?" }],
        });
        expect(next.content).toEqual([{ type: "text", text: "Because." }]);
        const sent = u.fake.requests.at(-1)!.body;
        if (kind === "anthropic") {
          // The thinking block goes back first, with its signature, exactly as it came.
          expect(sent.messages[1]).toEqual({ role: "assistant", content: [{ type: "thinking", thinking: "Let me think.", signature: "sig" }, { type: "text", text: "Answer" }] });
        }
        if (kind === "openai") expect(sent.messages[1]).toMatchObject({ role: "assistant", reasoning: "Let me think." });
      });

      it("max_tokens stop", async () => {
        const u = up();
        setScript(u, { text: ["Once upon"], finish: u.finish[2], usage: { input: 5, output: 2 } });
        const { events, message } = await allWays(u, { model: u.model, max_tokens: 2, messages: [{ role: "user", content: "tell a story" }] });
        expect(shape(events)).toEqual(["message_start", "ping", "start:0:text", "text_delta:0+", "stop:0", "message_delta:max_tokens", "message_stop"]);
        expect(message.stop_reason).toBe("max_tokens");
        expect(u.fake.requests.at(-1)!.body).toMatchObject(kind === "gemini" ? { generationConfig: { maxOutputTokens: 2 } } : { max_tokens: 2 });
      });

      it("an error mid-stream is an `error` event after the first bytes, and nothing after it", async () => {
        const u = up();
        setScript(u, { text: ["one ", "two ", "three ", "four"], finish: u.finish[0], usage: { input: 5, output: 4 } });
        u.fake.knobs = { failAfterChunks: 3, failMessage: "overloaded now" };
        const res = await post({ model: u.model, max_tokens: 50, stream: true, messages: [{ role: "user", content: "count" }] });
        expect(res.status).toBe(200);
        const events = await readSse(res);
        const s = shape(events);
        expect(s.slice(0, 2)).toEqual(["message_start", "ping"]);
        expect(s.at(-1)).toBe("error");
        expect(s).not.toContain("message_stop");
        expect(s).not.toContain("message_delta:end_turn");
        expect(events.at(-1)!.data).toMatchObject({ type: "error", error: { type: expect.any(String), message: expect.stringContaining("overloaded now") } });
        // The SDK's stream helper rejects with the error rather than resolving a partial message.
        await expect(client.messages.stream({ model: u.model, max_tokens: 50, messages: [{ role: "user", content: "count" }] }).finalMessage()).rejects.toThrow(/overloaded now/);
        // Not streamed: the provider's failure before an answer is Anthropic's error envelope.
        u.fake.knobs = { failStatus: 500, failMessage: "upstream broke" };
        const plain = await post({ model: u.model, max_tokens: 50, messages: [{ role: "user", content: "count" }] });
        expect(plain.status).toBe(502);
        expect(await plain.json()).toMatchObject({ type: "error", error: { type: "api_error", message: expect.any(String) } });
        u.fake.knobs = {};
      });

      it("a client that leaves mid-stream stops the upstream request and the generation is recorded as cancelled", async () => {
        const u = up();
        setScript(u, { text: Array.from({ length: 40 }, (_, i) => `w${i} `), finish: u.finish[0], usage: { input: 5, output: 40 } });
        u.fake.knobs = { chunkDelayMs: 30 };
        const abortedBefore = u.fake.requests.length;
        const ac = new AbortController();
        const res = await post({ model: u.model, max_tokens: 50, stream: true, messages: [{ role: "user", content: "long" }] }, {}, ac.signal);
        const reader = res.body!.getReader();
        let text = "";
        while (!text.includes("text_delta")) text += new TextDecoder().decode((await reader.read()).value);
        const id = /"id":"(gen-[^"]+)"/.exec(text)![1]!;
        ac.abort();
        await u.fake.clientAborted();
        expect(u.fake.requests.length).toBe(abortedBefore + 1);
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
