/**
 * Streams over the split hop with the events at hand packed into one stream message (src/core/chat/pack.ts,
 * StreamChatCompletionRequest.pack_chunks): a split gateway (gRPC over HTTP/2 to the harness's core) relays a stream
 * whose fake upstream writes every event in one write, whole and in order, for chat completions (OpenAI-compatible
 * and Gemini upstreams) and Messages, with
 * fewer messages than events on the wire; each packed message stays within the bound unless its first item alone is
 * larger; a gRPC client (@grpc/grpc-js) that does not set `pack_chunks` gets one chunk per message, one that sets it
 * gets them packed, one that sets `sse_bytes` too gets them as ready SSE frames (what the split gateway asks for; its
 * SSE body is byte for byte the one it writes from `chunk_json` / `more_chunks_json`, as from a core that predates
 * `sse_bytes`). SQLite only: packing does not touch the database.
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
  /** `older`: the request's `sse_bytes` left out, as a core that predates it would ignore it. */
  const watching = (t: Transport, seen: Seen, older = false): Transport => ({
    unary: (...args) => t.unary(...args),
    async stream(method, signal, timeoutMs, header, input, contextValues) {
      if (older) {
        // A server stream's one request message, read here and handed on without the flag.
        const first = await input[Symbol.asyncIterator]().next();
        const message = { ...(first.value as object), sseBytes: false } as unknown as typeof first.value;
        input = { [Symbol.asyncIterator]: () => [message][Symbol.iterator]() as unknown as AsyncIterator<typeof message> };
      }
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

  async function splitGateway(seen: Seen, older = false) {
    const app = await buildGateway({
      transport: watching(createCoreTransport(h.coreUrl), seen, older),
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

  type ChatMessage = { chunkJson: string; moreChunksJson: string[]; sse: Uint8Array; provider: string };
  /** The chunks of a chat stream message: its SSE frames (`sse_bytes`), else `chunk_json` and `more_chunks_json`. */
  const chunksOf = (m: ChatMessage): string[] => {
    if (m.sse.byteLength === 0) return m.chunkJson ? [m.chunkJson, ...m.moreChunksJson] : [];
    expect(m.chunkJson).toBe("");
    expect(m.moreChunksJson).toEqual([]);
    const text = Buffer.from(m.sse).toString("utf8");
    expect(text.endsWith("\n\n")).toBe(true);
    const items = dataOf(text);
    expect(items.map((d) => `data: ${d}\n\n`).join("")).toBe(text);
    return items;
  };

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
      const messages = seen.get("StreamChatCompletion")!.at(-1)! as ChatMessage[];
      // Every chunk the client got came over the wire, in the same order, in fewer messages than chunks, as SSE bytes.
      const wired = messages.flatMap(chunksOf);
      expect(wired).toEqual(data.slice(0, -1));
      expect(messages.length).toBeLessThan(text.length / 2);
      expect(messages.some((m) => chunksOf(m).length > 1)).toBe(true);
      expect(messages.filter((m) => m.sse.byteLength > 0).length).toBeGreaterThan(0);
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
      const messages = seen.get("StreamChatCompletion")!.at(-1)! as ChatMessage[];
      const wired = messages.flatMap(chunksOf);
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
      const chatMessages = seen.get("StreamChatCompletion")!.at(-1)! as ChatMessage[];
      expect(chatMessages.some((m) => chunksOf(m).length > 1)).toBe(true);
      for (const m of chatMessages) {
        const items = chunksOf(m);
        const size = items.reduce((n, s) => n + s.length, 0);
        expect(items.length).toBeLessThanOrEqual(PACK_MAX_ITEMS);
        if (items.length > 1) expect(size).toBeLessThanOrEqual(PACK_MAX_CHARS);
      }
      expect(chatMessages.some((m) => chunksOf(m).length === 1 && chunksOf(m)[0]!.length > PACK_MAX_CHARS)).toBe(true);
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

  it("chat completions: the SSE body from sse_bytes is byte for byte the one from chunk_json / more_chunks_json (a core that predates sse_bytes)", async () => {
    const text = pieces(150);
    text[7] = "é ✓ 😀 \\ \" ";
    openai.scriptFor = inOneWrite(openAiWire, { text, finish: "stop", usage: { input: 3, output: 150 } });
    const bodyOf = async (older: boolean) => {
      const seen: Seen = new Map();
      const { app, url } = await splitGateway(seen, older);
      try {
        const res = await post(`${url}/api/v1/chat/completions`, { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "count" }], stream: true });
        expect(res.status).toBe(200);
        expect(res.headers.get("x-portico-overhead-ms")).toMatch(/^\d/);
        const messages = seen.get("StreamChatCompletion")!.at(-1)! as ChatMessage[];
        expect(messages.some((m) => m.sse.byteLength > 0)).toBe(!older);
        // The generation id differs per request; all else is the same bytes.
        const body = await res.text();
        const ids = new Set([...body.matchAll(/"id":"([^"]+)"/g)].map((m) => m[1]));
        expect(ids.size).toBe(1);
        return body.replaceAll([...ids][0]!, "ID");
      } finally {
        await app.close();
      }
    };
    try {
      const now = await bodyOf(false);
      const older = await bodyOf(true);
      expect(now).toBe(older);
      expect(dataOf(now).slice(0, -1).map((d) => JSON.parse(d).choices[0]?.delta?.content ?? "").join("")).toBe(text.join(""));
      expect(now.endsWith("data: [DONE]\n\n")).toBe(true);
    } finally {
      openai.scriptFor = undefined;
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
      // With sse_bytes: the same chunks as SSE frames, in `sse` only.
      const framed = await new Promise<Array<{ chunk_json: string; more_chunks_json: string[]; sse: Buffer }>>((resolve, reject) => {
        const out: Array<{ chunk_json: string; more_chunks_json: string[]; sse: Buffer }> = [];
        const s = chat.StreamChatCompletion({ body_json, json_text: true, pack_chunks: true, sse_bytes: true }, bearer(h.tenant.apiKey));
        s.on("data", (m: { chunk_json: string; more_chunks_json: string[]; sse: Buffer }) => out.push(m));
        s.on("end", () => resolve(out));
        s.on("error", reject);
      });
      expect(framed.every((m) => m.chunk_json === "" && m.more_chunks_json.length === 0 && m.sse.length > 0)).toBe(true);
      const frames = framed.flatMap((m) => dataOf(m.sse.toString("utf8")));
      expect(frames.length).toBe(plain.length);
      expect(contentOf(frames)).toBe(text.join(""));
      expect(plain.every((m) => !("sse" in m) || (m as unknown as { sse: Buffer }).sse.length === 0)).toBe(true);
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
