/**
 * The Messages, Responses and Gemini dialects' request bodies as JSON text (`body_json`), as chat completions':
 * a split gateway (Fastify over gRPC to the core, `coreOverTheWire`) sends the text it received in place of the
 * Struct `body` for every dialect RPC, and the answers are the same; the core refuses text that is not a JSON object,
 * holds a `__proto__` key or nests too deep with InvalidArgument naming `body_json` (400 in the dialect's envelope at
 * the gateway), prefers `body_json` over `body`, and still takes `body` alone (an older gateway). SQLite only: the
 * body's encoding does not touch the database.
 */
import Anthropic from "@anthropic-ai/sdk";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChatService } from "../../../src/gen/portico/chat/v1/chat_service_pb.js";
import { buildGateway } from "../../../src/gateway/app.js";
import { createCoreTransport } from "../../../src/gateway/core-transport.js";
import { createMetrics } from "../../../src/lib/metrics.js";
import { OneValue, oneValue } from "../../../src/lib/one-value.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeAnthropic } from "../../helpers/fake-upstreams/anthropic.js";
import { startFakeGemini } from "../../helpers/fake-upstreams/gemini.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";

type Sent = { body?: unknown; bodyJson?: string };

describe("dialect bodies as JSON text (body_json)", () => {
  let h: Harness;
  let anthropic: FakeUpstream;
  let gemini: FakeUpstream;
  let openai: FakeUpstream;

  beforeAll(async () => {
    anthropic = await startFakeAnthropic();
    gemini = await startFakeGemini();
    openai = await startFakeOpenAI();
    h = await startHarness({
      provider: "sqlite",
      env: {
        PORTICO_PROVIDER_ANTHROPIC_BASE_URL: anthropic.url,
        PORTICO_PROVIDER_GOOGLE_AI_STUDIO_BASE_URL: `${gemini.url}/v1beta`,
        PORTICO_PROVIDER_GROQ_BASE_URL: `${openai.url}/v1`,
      },
    });
    for (const [p, key] of [["anthropic", "sk-ant-test"], ["google-ai-studio", "AIza-test"], ["groq", "gsk-test"]] as const) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: p, key } })).status).toBe(200);
    }
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([anthropic?.close(), gemini?.close(), openai?.close()]);
  });

  /** A split gateway on `transport` (gRPC to the harness's core). */
  async function splitGateway(transport: Transport) {
    const app = await buildGateway({
      transport,
      coreOverTheWire: true,
      logger: h.gateway.log as never,
      metrics: createMetrics(),
      bodyLimitBytes: h.config.bodyLimitBytes,
      brand: h.config.brand,
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    return { app, url: `http://127.0.0.1:${(app.server.address() as { port: number }).port}` };
  }

  /** `t` with each request message passed through `map` (unary and server-streaming: the value of its OneValue). */
  const mapping = (t: Transport, map: (method: string, input: Sent) => Sent): Transport => ({
    unary: (method, signal, timeoutMs, header, input, contextValues) => t.unary(method, signal, timeoutMs, header, map(method.name, input as Sent) as never, contextValues),
    stream: (method, signal, timeoutMs, header, input, contextValues) =>
      t.stream(method, signal, timeoutMs, header, (input instanceof OneValue ? oneValue(map(method.name, input.value as Sent)) : input) as never, contextValues),
  });

  const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${h.tenant.apiKey}`, ...headers }, body: JSON.stringify(body) });

  const messagesBody: Anthropic.MessageCreateParamsNonStreaming = { model: "anthropic/claude-sonnet-4", max_tokens: 20, system: "Be brief. ☃", messages: [{ role: "user", content: "hé" }] };
  const responsesBody = { model: "groq/llama-3.3-70b", instructions: "Greet.", input: "hé ☃", max_output_tokens: 20 };
  const geminiBody = { contents: [{ role: "user", parts: [{ text: "hé ☃" }] }], generationConfig: { maxOutputTokens: 20 } };
  const geminiModel = "google-ai-studio%2Fgemini-2.5-flash";

  it("a split gateway sends every dialect's body as body_json (no Struct) and answers as in process", async () => {
    anthropic.script = { text: ["Hello", ", ", "world"], finish: "end_turn", usage: { input: 11, output: 3 } };
    gemini.script = { text: ["Hello", ", ", "world"], finish: "STOP", usage: { input: 11, output: 3 } };
    const sent = new Map<string, Sent[]>();
    const { app, url } = await splitGateway(
      mapping(createCoreTransport(h.coreUrl), (method, input) => {
        sent.set(method, [...(sent.get(method) ?? []), input]);
        return input;
      }),
    );
    try {
      // Anthropic Messages: unary (the SDK), streamed, count_tokens; the anthropic-beta header still goes along.
      const sdk = new Anthropic({ baseURL: `${url}/api`, apiKey: h.tenant.apiKey, maxRetries: 0, defaultHeaders: { "anthropic-beta": "test-beta" } });
      const message = await sdk.messages.create(messagesBody);
      expect(message.content).toEqual([{ type: "text", text: "Hello, world" }]);
      expect(anthropic.requests.at(-1)!.body).toMatchObject({ system: "Be brief. ☃", messages: [{ role: "user", content: [{ type: "text", text: "hé" }] }] });
      expect(anthropic.requests.at(-1)!.headers["anthropic-beta"]).toBe("test-beta");
      const streamed = await post(`${url}/api/v1/messages`, { ...messagesBody, stream: true });
      expect(streamed.status).toBe(200);
      expect(await streamed.text()).toContain("event: message_stop");
      const counted = await post(`${url}/api/v1/messages/count_tokens`, { model: messagesBody.model, messages: messagesBody.messages });
      expect(await counted.json()).toEqual({ input_tokens: 11 });

      // Responses: unary and streamed.
      const response = await post(`${url}/api/v1/responses`, responsesBody);
      expect(response.status).toBe(200);
      expect(((await response.json()) as any).output[0].content[0].text).toBe("Hello, world");
      expect(openai.requests.at(-1)!.body.messages).toEqual([
        { role: "system", content: "Greet." },
        { role: "user", content: "hé ☃" },
      ]);
      const events = await post(`${url}/api/v1/responses`, { ...responsesBody, stream: true });
      expect(await events.text()).toContain("event: response.completed");

      // Gemini: generateContent, streamGenerateContent (alt=sse), countTokens.
      const generated = await post(`${url}/api/v1beta/models/${geminiModel}:generateContent`, geminiBody);
      expect(((await generated.json()) as any).candidates[0].content.parts[0].text).toBe("Hello, world");
      expect(gemini.requests.at(-1)!.body.contents).toEqual(geminiBody.contents);
      const chunks = await post(`${url}/api/v1beta/models/${geminiModel}:streamGenerateContent?alt=sse`, geminiBody);
      expect(await chunks.text()).toContain('"finishReason":"STOP"');
      const tokens = await post(`${url}/api/v1beta/models/${geminiModel}:countTokens`, { contents: geminiBody.contents });
      expect(await tokens.json()).toEqual({ totalTokens: 11 });
    } finally {
      await app.close();
    }
    const methods = ["CreateMessage", "StreamMessage", "CountMessageTokens", "CreateResponse", "StreamResponse", "GenerateContent", "StreamGenerateContent", "CountGeminiTokens"];
    expect([...sent.keys()].sort()).toEqual([...methods].sort());
    for (const [method, inputs] of sent) {
      for (const input of inputs) {
        expect(input.body, method).toBeUndefined();
        expect(JSON.parse(input.bodyJson!), method).toBeTypeOf("object");
      }
    }
    expect(JSON.parse(sent.get("CreateMessage")![0]!.bodyJson!)).toEqual(messagesBody);
    expect(JSON.parse(sent.get("CreateResponse")![0]!.bodyJson!)).toEqual(responsesBody);
    expect(JSON.parse(sent.get("GenerateContent")![0]!.bodyJson!)).toEqual(geminiBody);
  });

  it("body_json the core refuses is 400 in the dialect's envelope at the split gateway (unary and streamed)", async () => {
    // The gateway's own parser refuses such bodies first; a core that does is seen through a transport rewriting the text.
    const { app, url } = await splitGateway(mapping(createCoreTransport(h.coreUrl), (_method, input) => ({ ...input, bodyJson: '{"__proto__":{"admin":true}}' })));
    try {
      for (const stream of [false, true]) {
        const m = await post(`${url}/api/v1/messages`, { ...messagesBody, stream });
        expect(m.status).toBe(400);
        expect(await m.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error", message: expect.stringContaining("__proto__") } });
        const r = await post(`${url}/api/v1/responses`, { ...responsesBody, stream });
        expect(r.status).toBe(400);
        expect(await r.json()).toMatchObject({ error: { type: "invalid_request_error", message: expect.stringContaining("__proto__") } });
        const g = await post(`${url}/api/v1beta/models/${geminiModel}:${stream ? "streamGenerateContent?alt=sse" : "generateContent"}`, geminiBody);
        expect(g.status).toBe(400);
        expect(await g.json()).toMatchObject({ error: { code: 400, status: "INVALID_ARGUMENT", message: expect.stringContaining("__proto__") } });
      }
      const c = await post(`${url}/api/v1/messages/count_tokens`, { model: messagesBody.model, messages: messagesBody.messages });
      expect(c.status).toBe(400);
      const t = await post(`${url}/api/v1beta/models/${geminiModel}:countTokens`, { contents: geminiBody.contents });
      expect(t.status).toBe(400);
    } finally {
      await app.close();
    }
  });

  it("gRPC: every dialect RPC refuses bad body_json with InvalidArgument, prefers body_json over body, and takes body alone", async () => {
    anthropic.script = { text: ["Hello", ", ", "world"], finish: "end_turn", usage: { input: 11, output: 3 } };
    gemini.script = { text: ["Hello", ", ", "world"], finish: "STOP", usage: { input: 11, output: 3 } };
    const grpc = createClient(ChatService, createGrpcTransport({ baseUrl: h.coreUrl }));
    const options = { headers: { authorization: `Bearer ${h.tenant.apiKey}` } };
    const drain = async <T>(stream: AsyncIterable<T>) => {
      const out: T[] = [];
      for await (const m of stream) out.push(m);
      return out;
    };
    const model = "google-ai-studio/gemini-2.5-flash";
    /** Each RPC: a call with `input` (body and/or bodyJson) and a check of its answer to a good body. */
    const rpcs: Array<{ name: string; good: object; call: (input: Sent) => Promise<unknown>; answered: (res: any) => void }> = [
      { name: "CreateMessage", good: messagesBody, call: (i) => grpc.createMessage(i as never, options), answered: (r) => expect(JSON.parse(r.messageJson).content[0].text).toBe("Hello, world") },
      { name: "StreamMessage", good: { ...messagesBody, stream: true }, call: (i) => drain(grpc.streamMessage(i as never, options)), answered: (r) => expect(r.flatMap((m: any) => m.events.map((e: any) => e.type))).toContain("message_stop") },
      { name: "CountMessageTokens", good: { model: messagesBody.model, messages: messagesBody.messages }, call: (i) => grpc.countMessageTokens(i as never, options), answered: (r) => expect(Number(r.inputTokens)).toBe(11) },
      { name: "CreateResponse", good: responsesBody, call: (i) => grpc.createResponse(i as never, options), answered: (r) => expect(JSON.parse(r.responseJson).output[0].content[0].text).toBe("Hello, world") },
      { name: "StreamResponse", good: { ...responsesBody, stream: true }, call: (i) => drain(grpc.streamResponse(i as never, options)), answered: (r) => expect(r.flatMap((m: any) => m.events.map((e: any) => e.type))).toContain("response.completed") },
      { name: "GenerateContent", good: geminiBody, call: (i) => grpc.generateContent({ ...i, model } as never, options), answered: (r) => expect(JSON.parse(r.responseJson).candidates[0].content.parts[0].text).toBe("Hello, world") },
      { name: "StreamGenerateContent", good: geminiBody, call: (i) => drain(grpc.streamGenerateContent({ ...i, model } as never, options)), answered: (r) => expect(r.flatMap((m: any) => m.chunksJson).join("")).toContain('"finishReason":"STOP"') },
      { name: "CountGeminiTokens", good: { contents: geminiBody.contents }, call: (i) => grpc.countGeminiTokens({ ...i, model } as never, options), answered: (r) => expect(Number(r.totalTokens)).toBe(11) },
    ];
    const refused = [
      ["[1,2]", "must be a JSON object"],
      ['"text"', "must be a JSON object"],
      ["{not json", "not valid JSON"],
      ['{"model":"groq/x","__proto__":{"admin":true}}', '"__proto__"'],
      [`{"a":${"[".repeat(40)}${"]".repeat(40)}}`, "nests deeper than 32 levels"],
    ] as const;
    for (const rpc of rpcs) {
      for (const [text, says] of refused) {
        const err = await rpc.call({ bodyJson: text }).then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
        expect(err?.code, `${rpc.name} ${text}`).toBe(Code.InvalidArgument);
        expect(err!.rawMessage, `${rpc.name} ${text}`).toContain("body_json");
        expect(err!.rawMessage, `${rpc.name} ${text}`).toContain(says);
      }
      // An older gateway's call: the Struct body alone.
      rpc.answered(await rpc.call({ body: rpc.good }));
      // body_json wins over body (a body the core would refuse: no model).
      rpc.answered(await rpc.call({ body: { messages: [] }, bodyJson: JSON.stringify(rpc.good) }));
    }
  });
});
