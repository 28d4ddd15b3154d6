/**
 * Streams over the split hop with the events at hand packed into one stream message (src/core/chat/pack.ts,
 * StreamChatCompletionRequest.pack_chunks): a split gateway (gRPC over HTTP/2 to the harness's core) relays a stream
 * whose fake upstream writes every event in one write, whole and in order, for chat completions (OpenAI-compatible
 * and Gemini upstreams) and Messages, with
 * fewer messages than events on the wire; each packed message stays within the bound unless its first item alone is
 * larger; a gRPC client (@grpc/grpc-js) that does not set `pack_chunks` gets one chunk per message, one that sets it
 * gets them packed. SQLite only: packing does not touch the database.
 */
import type { Transport } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildGateway } from "../../../src/gateway/app.js";
import { createCoreTransport } from "../../../src/gateway/core-transport.js";
import { createMetrics } from "../../../src/lib/metrics.js";
import { PACK_MAX_CHARS, PACK_MAX_ITEMS } from "../../../src/core/chat/pack.js";
import { bearer, grpcClient } from "../../helpers/grpc.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { anthropicWire, startFakeAnthropic } from "../../helpers/fake-upstreams/anthropic.js";
import { geminiWire, startFakeGemini } from "../../helpers/fake-upstreams/gemini.js";
import { openAiWire, startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream, RecordedRequest, Script } from "../../helpers/fake-upstreams/server.js";

/** A script answered with all its stream's frames in one write (so the core reads many events at once). */
const inOneWrite = (wire: typeof openAiWire, script: Script) => (req: RecordedRequest): Script => ({ ...script, raw: { events: [wire.streamEvents(script, req).join("")] } });

const pieces = (n: number, size = 0) => Array.from({ length: n }, (_, i) => `w${i}${"x".repeat(size)} `);

describe("stream messages packed over the split hop", () => {
  let h: Harness;
  let openai: FakeUpstream;
  let anthropic: FakeUpstream;
  let gemini: FakeUpstream;

  beforeAll(async () => {
    openai = await startFakeOpenAI();
    anthropic = await startFakeAnthropic();
    gemini = await startFakeGemini();
    h = await startHarness({
      provider: "sqlite",
      env: { PORTICO_PROVIDER_GROQ_BASE_URL: `${openai.url}/v1`, PORTICO_PROVIDER_ANTHROPIC_BASE_URL: anthropic.url, PORTICO_PROVIDER_GOOGLE_AI_STUDIO_BASE_URL: `${gemini.url}/v1beta` },
    });
    for (const [p, key] of [["groq", "gsk-test"], ["anthropic", "sk-ant-test"], ["google-ai-studio", "AIza-test"]] as const) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: p, key } })).status).toBe(200);
    }
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([openai?.close(), anthropic?.close(), gemini?.close()]);
  });

  /** The messages each stream call received over the wire, by method name. */
  type Seen = Map<string, unknown[][]>;
  const watching = (t: Transport, seen: Seen): Transport => ({
    unary: (...args) => t.unary(...args),
    async stream(method, signal, timeoutMs, header, input, contextValues) {
      const res = await t.stream(method, signal, timeoutMs, header, input, contextValues);
      const messages: unknown[] = [];
      seen.set(method.name, [...(seen.get(method.name) ?? []), messages]);
      const inner = res.message[Symbol.asyncIterator]();
      const it = {
        [Symbol.asyncIterator]: () => it,
        next: async () => {
          const r = await inner.next();
          if (!r.done) messages.push(r.value);
          return r;
        },
        return: async () => (await inner.return?.()) ?? { done: true as const, value: undefined },
      };
      return { ...res, message: it } as typeof res;
    },
  });

  async function splitGateway(seen: Seen) {
    const app = await buildGateway({
      transport: watching(createCoreTransport(h.coreUrl), seen),
      coreOverTheWire: true,
      logger: h.gateway.log as never,
      metrics: createMetrics(),
      bodyLimitBytes: h.config.bodyLimitBytes,
      brand: h.config.brand,
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    return { app, url: `http://127.0.0.1:${(app.server.address() as { port: number }).port}` };
  }

  const post = (url: string, body: unknown) =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${h.tenant.apiKey}` }, body: JSON.stringify(body) });

  /** The `data:` payloads of an SSE body (chat completions), `[DONE]` included. */
  const dataOf = (text: string) => text.split("\n\n").filter((f) => f.startsWith("data: ")).map((f) => f.slice(6));

  it("chat completions: many events in one upstream read arrive whole and in order, packed into fewer messages", async () => {
    const text = pieces(300);
    openai.scriptFor = inOneWrite(openAiWire, { text, finish: "stop", usage: { input: 3, output: 300 } });
    const seen: Seen = new Map();
    const { app, url } = await splitGateway(seen);
    try {
      const res = await post(`${url}/api/v1/chat/completions`, { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "count" }], stream: true });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-portico-overhead-ms")).toMatch(/^\d/);
      const data = dataOf(await res.text());
      expect(data.at(-1)).toBe("[DONE]");
      const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe(text.join(""));
      expect(chunks.at(-1).usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 300 });
      const messages = seen.get("StreamChatCompletion")!.at(-1)! as Array<{ chunkJson: string; moreChunksJson: string[]; provider: string }>;
      // Every chunk the client got came over the wire, in the same order, in fewer messages than chunks.
      const wired = messages.flatMap((m) => (m.chunkJson ? [m.chunkJson, ...m.moreChunksJson] : []));
      expect(wired).toEqual(data.slice(0, -1));
      expect(messages.length).toBeLessThan(text.length / 2);
      expect(messages.some((m) => m.moreChunksJson.length > 0)).toBe(true);
      // The first message carries the timing (the overhead header above), the others not.
      expect(messages[0]!.provider).toBe("groq");
      expect(messages.slice(1).every((m) => m.provider === "")).toBe(true);
    } finally {
      openai.scriptFor = undefined;
      await app.close();
    }
  });

  it("Messages: many events in one upstream read arrive whole and in order, packed into fewer messages", async () => {
    const text = pieces(300);
    anthropic.scriptFor = inOneWrite(anthropicWire, { text, finish: "end_turn", usage: { input: 5, output: 300 } });
    const seen: Seen = new Map();
    const { app, url } = await splitGateway(seen);
    try {
      const res = await post(`${url}/api/v1/messages`, { model: "anthropic/claude-sonnet-4", max_tokens: 400, messages: [{ role: "user", content: "count" }], stream: true });
      expect(res.status).toBe(200);
      const body = await res.text();
      const frames = body.split("\n\n").filter(Boolean).map((f) => {
        const [event, data] = f.split("\n");
        return { type: event!.slice(7), data: JSON.parse(data!.slice(6)) };
      });
      expect(frames.map((f) => f.type)).toEqual([
        "message_start",
        "ping",
        "content_block_start",
        ...text.map(() => "content_block_delta"),
        "content_block_stop",
        "message_delta",
        "message_stop",
      ]);
      expect(frames.filter((f) => f.type === "content_block_delta").map((f) => f.data.delta.text).join("")).toBe(text.join(""));
      expect(frames.find((f) => f.type === "message_delta")!.data.usage).toMatchObject({ output_tokens: 300 });
      const messages = seen.get("StreamMessage")!.at(-1)! as Array<{ events: Array<{ type: string; dataJson: string }> }>;
      const wired = messages.flatMap((m) => m.events.map((e) => `event: ${e.type}\ndata: ${e.dataJson}\n\n`));
      expect(wired.join("")).toBe(body);
      // The 300 deltas did not come one a message (the Anthropic adapter's chunks are at hand as they are parsed).
      expect(messages.length).toBeLessThan(text.length / 2);
    } finally {
      anthropic.scriptFor = undefined;
      await app.close();
    }
  });

  it("chat completions from a Gemini upstream: many events in one upstream read arrive whole and in order, packed into fewer messages", async () => {
    const text = pieces(300);
    gemini.scriptFor = inOneWrite(geminiWire, { text, finish: "STOP", usage: { input: 3, output: 300 } });
    const seen: Seen = new Map();
    const { app, url } = await splitGateway(seen);
    try {
      const res = await post(`${url}/api/v1/chat/completions`, { model: "google-ai-studio/gemini-2.5-flash", messages: [{ role: "user", content: "count" }], stream: true });
      expect(res.status).toBe(200);
      const data = dataOf(await res.text());
      expect(data.at(-1)).toBe("[DONE]");
      const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe(text.join(""));
      expect(chunks.filter((c) => c.choices[0]?.finish_reason).map((c) => c.choices[0].finish_reason)).toEqual(["stop"]);
      expect(chunks.at(-1).usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 300 });
      const messages = seen.get("StreamChatCompletion")!.at(-1)! as Array<{ chunkJson: string; moreChunksJson: string[] }>;
      const wired = messages.flatMap((m) => (m.chunkJson ? [m.chunkJson, ...m.moreChunksJson] : []));
      expect(wired).toEqual(data.slice(0, -1));
      // The 300 chunks did not come one a message (the Gemini adapter's chunks are at hand as they are parsed).
      expect(messages.length).toBeLessThan(text.length / 2);
    } finally {
      gemini.scriptFor = undefined;
      await app.close();
    }
  });

  it("a packed message stays within the bound unless its first item alone is larger (chat and Messages)", async () => {
    // 120 pieces of ≈ 3 kB (one of 70 kB, above the bound alone), all in one upstream write: ≈ 430 kB at hand.
    const text = pieces(120, 3000);
    text[40] = `big${"y".repeat(70_000)} `;
    openai.scriptFor = inOneWrite(openAiWire, { text, finish: "stop", usage: { input: 3, output: 120 } });
    anthropic.scriptFor = inOneWrite(anthropicWire, { text, finish: "end_turn", usage: { input: 3, output: 120 } });
    const seen: Seen = new Map();
    const { app, url } = await splitGateway(seen);
    try {
      const chat = await post(`${url}/api/v1/chat/completions`, { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "count" }], stream: true });
      const data = dataOf(await chat.text());
      expect(data.slice(0, -1).map((d) => JSON.parse(d).choices[0]?.delta?.content ?? "").join("")).toBe(text.join(""));
      const msgs = await post(`${url}/api/v1/messages`, { model: "anthropic/claude-sonnet-4", max_tokens: 400, messages: [{ role: "user", content: "count" }], stream: true });
      const body = await msgs.text();
      expect(body).toContain("event: message_stop");
      const chatMessages = seen.get("StreamChatCompletion")!.at(-1)! as Array<{ chunkJson: string; moreChunksJson: string[] }>;
      expect(chatMessages.some((m) => m.moreChunksJson.length > 0)).toBe(true);
      for (const m of chatMessages) {
        const items = m.chunkJson ? [m.chunkJson, ...m.moreChunksJson] : [];
        const size = items.reduce((n, s) => n + s.length, 0);
        expect(items.length).toBeLessThanOrEqual(PACK_MAX_ITEMS);
        if (items.length > 1) expect(size).toBeLessThanOrEqual(PACK_MAX_CHARS);
      }
      expect(chatMessages.some((m) => m.chunkJson.length > PACK_MAX_CHARS && m.moreChunksJson.length === 0)).toBe(true);
      const eventMessages = seen.get("StreamMessage")!.at(-1)! as Array<{ events: Array<{ type: string; dataJson: string }> }>;
      expect(eventMessages.some((m) => m.events.length > 1)).toBe(true);
      for (const m of eventMessages) {
        const size = m.events.reduce((n, e) => n + e.type.length + e.dataJson.length, 0);
        expect(m.events.length).toBeLessThanOrEqual(PACK_MAX_ITEMS);
        // One canonical event becomes at most one content_block_delta here, so "its first item alone" is its first event.
        if (size > PACK_MAX_CHARS) expect(size - m.events[0]!.type.length - m.events[0]!.dataJson.length, "only the first event is over").toBeLessThan(2000);
      }
    } finally {
      openai.scriptFor = undefined;
      anthropic.scriptFor = undefined;
      await app.close();
    }
  });

  it("grpc-js: without pack_chunks one chunk per message; with it, the chunks at hand packed", async () => {
    const text = pieces(200);
    openai.scriptFor = inOneWrite(openAiWire, { text, finish: "stop", usage: { input: 3, output: 200 } });
    const chat = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
    const body_json = JSON.stringify({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "count" }] });
    const read = (request: Record<string, unknown>) =>
      new Promise<Array<{ chunk_json: string; more_chunks_json: string[] }>>((resolve, reject) => {
        const out: Array<{ chunk_json: string; more_chunks_json: string[] }> = [];
        const s = chat.StreamChatCompletion(request, bearer(h.tenant.apiKey));
        s.on("data", (m: { chunk_json: string; more_chunks_json: string[] }) => out.push(m));
        s.on("end", () => resolve(out));
        s.on("error", reject);
      });
    const contentOf = (chunks: string[]) => chunks.map((c) => JSON.parse(c).choices[0]?.delta?.content ?? "").join("");
    try {
      const plain = await read({ body_json, json_text: true });
      expect(plain.every((m) => m.more_chunks_json.length === 0 && m.chunk_json !== "")).toBe(true);
      expect(plain.length).toBeGreaterThan(text.length); // the content chunks and those around them (role, finish, usage)
      expect(contentOf(plain.map((m) => m.chunk_json))).toBe(text.join(""));
      const packed = await read({ body_json, json_text: true, pack_chunks: true });
      const all = packed.flatMap((m) => [m.chunk_json, ...m.more_chunks_json]);
      expect(all.length).toBe(plain.length);
      expect(contentOf(all)).toBe(text.join(""));
      expect(packed.length).toBeLessThan(all.length);
      // pack_chunks without json_text: Struct chunks, one per message.
      const structs = await new Promise<Array<{ chunk?: unknown; more_chunks_json: string[] }>>((resolve, reject) => {
        const out: Array<{ chunk?: unknown; more_chunks_json: string[] }> = [];
        const s = chat.StreamChatCompletion({ body_json, pack_chunks: true }, bearer(h.tenant.apiKey));
        s.on("data", (m: { chunk?: unknown; more_chunks_json: string[] }) => out.push(m));
        s.on("end", () => resolve(out));
        s.on("error", reject);
      });
      expect(structs.length).toBe(plain.length);
      expect(structs.every((m) => m.chunk && m.more_chunks_json.length === 0)).toBe(true);
    } finally {
      openai.scriptFor = undefined;
      chat.close();
    }
  });
});
