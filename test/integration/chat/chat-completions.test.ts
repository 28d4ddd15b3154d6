/**
 * POST /api/v1/chat/completions end to end on the real stack with real clients (the `openai` SDK, a
 * grpc-js-compatible Connect gRPC client), against fake upstreams that speak OpenAI's wire format: BYOK
 * credentials stored through the API, a preset by reference, fallbacks across providers on a 5xx, the
 * no-credential error, a credential disabled taking effect, and a client leaving mid-stream aborting
 * the upstream request.
 */
import OpenAI from "openai";
import type { Transport } from "@connectrpc/connect";
import { OpenRouter } from "@openrouter/sdk";
import { bearer, grpcClient } from "../../helpers/grpc.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI, } from "../../helpers/fake-upstreams/openai.js";
import { defaultScript, type FakeUpstream } from "../../helpers/fake-upstreams/server.js";

describe.each(["sqlite", "postgresql"] as const)("chat completions through BYOK credentials (%s)", (provider) => {
  let h: Harness;
  let ok: FakeUpstream;
  let down: FakeUpstream;
  let slow: FakeUpstream;
  let client: OpenAI;
  const credentials: Record<string, string> = {};

  beforeAll(async () => {
    ok = await startFakeOpenAI();
    down = await startFakeOpenAI(defaultScript(), { failStatus: 500, failMessage: "upstream is down" });
    slow = await startFakeOpenAI({ text: Array.from({ length: 50 }, (_, i) => `w${i} `), finish: "stop", usage: { input: 1, output: 50 } }, { chunkDelayMs: 50 });
    h = await startHarness({
      provider,
      env: {
        PORTICO_PROVIDER_GROQ_BASE_URL: `${ok.url}/v1`,
        PORTICO_PROVIDER_OPENAI_BASE_URL: `${down.url}/v1`,
        PORTICO_PROVIDER_TOGETHER_BASE_URL: `${slow.url}/v1`,
      },
    });
    for (const [slug, key] of [["groq", "gsk-test-groq"], ["openai", "sk-test-openai"], ["together", "tg-test"]] as const) {
      const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: slug, key } });
      expect(res.status).toBe(200);
      credentials[slug] = res.json.data.id;
    }
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([ok, down, slow].map((f) => f?.close()));
  });

  it("non-streaming: the provider's answer, named, sent with the stored key and the provider's model id", async () => {
    const res = await client.chat.completions.create({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "hi" }] });
    expect(res.choices[0]!.message.content).toBe("Hello, world");
    expect((res as unknown as { provider: string }).provider).toBe("groq");
    const upstream = ok.requests.at(-1)!;
    expect(upstream.headers.authorization).toBe("Bearer gsk-test-groq");
    expect(upstream.body.model).toBe("llama-3.3-70b");
  });

  it("the published SDK's chat call (@openrouter/sdk)", async () => {
    const sdk = new OpenRouter({ apiKey: h.tenant.apiKey, serverURL: `${h.baseUrl}/api/v1`, retryConfig: { strategy: "none" } });
    const res = await sdk.chat.send({ chatRequest: { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "hi" }] } });
    expect(JSON.stringify(res)).toContain("Hello, world");
  });

  it("grpc-js: unary and server-streaming ChatService calls", async () => {
    /** google.protobuf.Struct as proto-loader represents it. */
    const value = (v: unknown): unknown =>
      typeof v === "string" ? { stringValue: v }
      : typeof v === "number" ? { numberValue: v }
      : typeof v === "boolean" ? { boolValue: v }
      : Array.isArray(v) ? { listValue: { values: v.map(value) } }
      : { structValue: struct(v as Record<string, unknown>) };
    const struct = (o: Record<string, unknown>) => ({ fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, value(v)])) });
    const text = (s: any): string => JSON.stringify(s);
    const chat = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
    const body = struct({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "hi" }] });
    const unaryRes = await new Promise<any>((resolve, reject) =>
      chat.CreateChatCompletion({ body }, bearer(h.tenant.apiKey), (err: Error | null, res: unknown) => (err ? reject(err) : resolve(res))),
    );
    expect(text(unaryRes)).toContain("Hello, world");
    const pieces: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const call = chat.StreamChatCompletion({ body }, bearer(h.tenant.apiKey));
      call.on("data", (m: any) => pieces.push(m.chunk?.fields?.choices?.listValue?.values?.[0]?.structValue?.fields?.delta?.structValue?.fields?.content?.stringValue ?? ""));
      call.on("end", resolve);
      call.on("error", reject);
    });
    expect(pieces.join("")).toBe("Hello, world");
    const refused = await new Promise<any>((resolve) => chat.CreateChatCompletion({ body }, bearer("pk-v1-" + "0".repeat(64)), (err: unknown) => resolve(err)));
    expect(refused.code).toBe(16); // UNAUTHENTICATED
  });

  it("grpc-js: the body as JSON text (body_json) and as a Struct give the same answer and the same upstream request", async () => {
    const chat = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
    const request = { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "hé \u2603" }], temperature: 0.5, max_tokens: 7, user: "u1" };
    const struct = (o: unknown): unknown =>
      typeof o === "string" ? { stringValue: o }
      : typeof o === "number" ? { numberValue: o }
      : Array.isArray(o) ? { listValue: { values: o.map(struct) } }
      : { structValue: { fields: Object.fromEntries(Object.entries(o as object).map(([k, v]) => [k, struct(v)])) } };
    const call = (msg: unknown) =>
      new Promise<any>((resolve) => chat.CreateChatCompletion(msg, bearer(h.tenant.apiKey), (err: any, res: any) => resolve(err ? { err } : { res })));
    const answer = (r: any) => JSON.parse(r.res.completion_json);
    const viaStruct = await call({ body: (struct(request) as any).structValue, json_text: true });
    const structUpstream = ok.requests.at(-1)!.body;
    const viaText = await call({ body_json: JSON.stringify(request), json_text: true });
    const textUpstream = ok.requests.at(-1)!.body;
    expect(textUpstream).toEqual(structUpstream);
    const { id: _a, created: _b, ...a } = answer(viaStruct);
    const { id: _c, created: _d, ...b } = answer(viaText);
    expect(b).toEqual(a);
    expect(b.choices[0].message.content).toBe("Hello, world");
    // body_json wins over body; streams take it too.
    const both = await call({ body: (struct({ model: "@preset/nope", messages: [] }) as any).structValue, body_json: JSON.stringify(request), json_text: true });
    expect(answer(both).choices[0].message.content).toBe("Hello, world");
    const pieces: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const s = chat.StreamChatCompletion({ body_json: JSON.stringify(request), json_text: true }, bearer(h.tenant.apiKey));
      s.on("data", (m: any) => m.chunk_json && pieces.push(JSON.parse(m.chunk_json).choices[0]?.delta?.content ?? ""));
      s.on("end", resolve);
      s.on("error", reject);
    });
    expect(pieces.join("")).toBe("Hello, world");
    // Text that is not a JSON object, or that the gateway would have refused, is InvalidArgument naming body_json.
    for (const [text, says] of [
      ["{not json", "not valid JSON"],
      ["[1,2]", "must be a JSON object"],
      ['{"model":"groq/x","messages":[{"role":"user","content":"\\ud800"}]}', "messages[0].content contains invalid Unicode"],
      ['{"model":"groq/x","__proto__":{"admin":true}}', '"__proto__"'],
      [`{"a":${"[".repeat(40)}${"]".repeat(40)}}`, "nests deeper than 32 levels"],
    ] as const) {
      const refused = await call({ body_json: text });
      expect(refused.err?.code, text).toBe(3); // INVALID_ARGUMENT
      expect(refused.err.details, text).toContain("body_json");
      expect(refused.err.details, text).toContain(says);
    }
  });

  it("a split gateway (gRPC to the core) streams the same answer and maps an error before the first chunk", async () => {
    const { buildGateway } = await import("../../../src/gateway/app.js");
    const { createCoreTransport } = await import("../../../src/gateway/core-transport.js");
    const { createMetrics } = await import("../../../src/lib/metrics.js");
    // Over the wire (coreOverTheWire) the body goes as its JSON text (body_json); in process as the parsed object.
    const sent: Array<{ body?: unknown; bodyJson?: string }> = [];
    const recording = (t: Transport): Transport => ({
      unary(method, signal, timeoutMs, header, input, contextValues) {
        if (method.name === "CreateChatCompletion") sent.push(input as { body?: unknown; bodyJson?: string });
        return t.unary(method, signal, timeoutMs, header, input, contextValues);
      },
      stream: (...args) => t.stream(...args),
    });
    const inProcess = await buildGateway({
      transport: recording(h.core.createInMemoryTransport()),
      logger: h.gateway.log as never,
      metrics: createMetrics(),
      bodyLimitBytes: h.config.bodyLimitBytes,
      brand: h.config.brand,
    });
    const local = await inProcess.inject({
      method: "POST",
      url: "/api/v1/chat/completions",
      headers: { authorization: `Bearer ${h.tenant.apiKey}`, "content-type": "application/json" },
      payload: JSON.stringify({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "in process" }], max_tokens: 5 }),
    });
    await inProcess.close();
    expect(local.statusCode).toBe(200);
    expect(sent.at(-1)!.bodyJson ?? "").toBe("");
    expect(sent.at(-1)!.body).toMatchObject({ messages: [{ role: "user", content: "in process" }] });
    const split = await buildGateway({
      transport: recording(createCoreTransport(h.coreUrl)),
      coreOverTheWire: true,
      logger: h.gateway.log as never,
      metrics: createMetrics(),
      bodyLimitBytes: h.config.bodyLimitBytes,
      brand: h.config.brand,
    });
    await split.listen({ host: "127.0.0.1", port: 0 });
    try {
      const port = (split.server.address() as { port: number }).port;
      const remote = new OpenAI({ baseURL: `http://127.0.0.1:${port}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
      const once = await remote.chat.completions.create({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "hé ☃" }], max_tokens: 5 });
      expect(once.choices[0]!.message.content).toBe("Hello, world");
      expect(ok.requests.at(-1)!.body).toMatchObject({ model: "llama-3.3-70b", messages: [{ role: "user", content: "hé ☃" }], max_tokens: 5 });
      expect(sent.at(-1)!.body).toBeUndefined();
      expect(JSON.parse(sent.at(-1)!.bodyJson!)).toMatchObject({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "hé ☃" }], max_tokens: 5 });
      const stream = await remote.chat.completions.create({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "hi" }], stream: true });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
      expect(text).toBe("Hello, world");
      const missing = await remote.chat.completions
        .create({ model: "@preset/does-not-exist", messages: [{ role: "user", content: "hi" }], stream: true })
        .catch((e: unknown) => e);
      expect(missing).toMatchObject({ status: 404 });
    } finally {
      await split.close();
    }
  });

  it("streaming: chunks in order, usage on the last, [DONE] at the end", async () => {
    const stream = await client.chat.completions.create({
      model: "groq/llama-3.3-70b",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage: unknown;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe("Hello, world");
    expect(usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 });
  });

  it("streaming: each chunk is the upstream's with id and provider set, as JSON.stringify writes it (same-dialect text pass-through)", async () => {
    const res = await api(h, "POST", "/chat/completions", {
      key: h.tenant.apiKey,
      body: { model: "together/some-model", messages: [{ role: "user", content: "x" }], stream: true, stream_options: { include_usage: true } },
    });
    expect(res.status).toBe(200);
    const lines = res.text.split("\n\n").filter((l) => l.startsWith("data: {")).map((l) => l.slice(6));
    expect(lines.length).toBe(1 + 50 + 1 + 1); // role chunk, 50 pieces, finishing chunk, usage
    const id = (JSON.parse(lines[0]!) as { id: string }).id;
    expect(id).toMatch(/^gen-/);
    let text = "";
    for (const line of lines) {
      const chunk = JSON.parse(line) as Record<string, unknown> & { choices: Array<{ delta: { content?: string } }> };
      expect(line).toBe(JSON.stringify(chunk));
      // The upstream's keys in its order, `id` in its place, `provider` added last.
      expect(Object.keys(chunk)).toEqual(["id", "object", "created", "model", "system_fingerprint", "choices", "usage", "provider"]);
      expect(chunk).toMatchObject({ id, object: "chat.completion.chunk", created: 1_700_000_000, system_fingerprint: "fp_fake", provider: "together" });
      text += chunk.choices[0]?.delta.content ?? "";
    }
    expect(text).toBe(Array.from({ length: 50 }, (_, i) => `w${i} `).join(""));
    expect(JSON.parse(lines.at(-1)!).usage).toMatchObject({ prompt_tokens: 1, completion_tokens: 50 });
  });

  it("a 5xx before the first byte moves on to the next model's provider", async () => {
    const before = down.requests.length;
    const res = await client.chat.completions.create({
      model: "openai/gpt-4o",
      messages: [{ role: "user", content: "hi" }],
      // `models` is a routing extension the SDK's types do not know.
      ...({ models: ["groq/llama-3.3-70b"] } as object),
    });
    expect(down.requests.length).toBe(before + 1);
    expect((res as unknown as { provider: string }).provider).toBe("groq");
    expect(res.choices[0]!.message.content).toBe("Hello, world");
  });

  it("every attempt failing is a 502 upstream_failed in the envelope", async () => {
    const res = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }] } });
    expect(res.status).toBe(502);
    expect(res.json.error.metadata.reason).toBe("upstream_failed");
    expect(res.text).not.toContain("sk-test-openai");
  });

  it("a preset by reference: its config fills the request, its system prompt comes first", async () => {
    const created = await api(h, "POST", "/presets/brief/chat/completions", {
      key: h.tenant.managementKey,
      body: { model: "groq/llama-3.3-70b", temperature: 0.3, messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "x" }] },
    });
    expect(created.status).toBe(200);
    const res = await client.chat.completions.create({ model: "@preset/brief", messages: [{ role: "user", content: "hi" }] });
    expect((res as unknown as { provider: string }).provider).toBe("groq");
    const upstream = ok.requests.at(-1)!.body;
    expect(upstream.temperature).toBe(0.3);
    expect(upstream.model).toBe("llama-3.3-70b");
    expect(upstream.messages).toEqual([{ role: "system", content: "Be brief." }, { role: "user", content: "hi" }]);
    expect(upstream.preset).toBeUndefined();
  });

  it("a model no credential may serve is a 400 no_credential; bad bodies are 400 on their field", async () => {
    const none = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "anthropic/claude-sonnet-4", messages: [{ role: "user", content: "hi" }] } });
    expect(none.status).toBe(400);
    expect(none.json.error.metadata.reason).toBe("no_credential");
    const bad = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "groq/x", messages: "hi" } });
    expect(bad.status).toBe(400);
    expect(bad.json.error.metadata.field).toBe("messages");
    const unauth = await api(h, "POST", "/chat/completions", { body: { model: "groq/x", messages: [] } });
    expect(unauth.status).toBe(401);
  });

  it("a client that leaves mid-stream aborts the upstream request", async () => {
    const ac = new AbortController();
    const stream = await client.chat.completions.create(
      { model: "together/some-model", messages: [{ role: "user", content: "long" }], stream: true },
      { signal: ac.signal },
    );
    let seen = 0;
    try {
      for await (const _chunk of stream) {
        if (++seen === 2) ac.abort();
      }
    } catch {
      // the SDK reports the abort
    }
    await slow.clientAborted();
    expect(seen).toBeLessThan(50);
  });

  it("each request is recorded as a generation, readable by its id within the organization only", async () => {
    const res = await client.chat.completions.create({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "secret prompt text" }] });
    expect(res.id).toMatch(/^gen-/);
    const got = await api(h, "GET", `/generation?id=${res.id}`, { key: h.tenant.apiKey });
    expect(got.status).toBe(200);
    expect(got.json.data).toMatchObject({
      id: res.id,
      key_hash: h.tenant.apiKeyHash,
      requested_model: "groq/llama-3.3-70b",
      model: "groq/llama-3.3-70b",
      provider: "groq",
      credential_id: credentials.groq,
      streamed: false,
      prompt_tokens: 11,
      completion_tokens: 3,
      total_tokens: 14,
      status: "success",
      finish_reason: "stop",
      attempts: 1,
    });
    // Written with a raw INSERT: the time must read back as the moment of the request.
    expect(Math.abs(Date.parse(got.json.data.created_at) - Date.now())).toBeLessThan(60_000);
    expect(got.text).not.toContain("secret prompt text");
    expect(got.text).not.toContain("gsk-test-groq");

    const stream = await client.chat.completions.create({ model: "openai/gpt-4o", models: ["groq/llama-3.3-70b"], messages: [{ role: "user", content: "hi" }], stream: true } as never);
    let id = "";
    for await (const chunk of stream as unknown as AsyncIterable<{ id: string }>) id = chunk.id;
    const streamed = await api(h, "GET", `/generation?id=${id}`, { key: h.tenant.apiKey });
    expect(streamed.json.data).toMatchObject({ streamed: true, attempts: 2, provider: "groq", status: "success" });
    expect(streamed.json.data.time_to_first_token_ms).toEqual(expect.any(Number));

    const failed = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }] } });
    expect(failed.status).toBe(502);

    const other = await h.createTenant();
    expect((await api(h, "GET", `/generation?id=${res.id}`, { key: other.apiKey })).status).toBe(404);
    expect((await api(h, "GET", `/generation?id=nope`, { key: h.tenant.apiKey })).status).toBe(400);
  });

  it("GET /models lists the presets and what the caller's credentials can route (openai SDK)", async () => {
    const page = await client.models.list();
    const ids = page.data.map((m) => m.id);
    expect(ids).toEqual(expect.arrayContaining(["@preset/brief", "groq/*", "openai/*", "together/*"]));
    expect(page.data.find((m) => m.id === "groq/*")?.owned_by).toBe("groq");
  });

  it("a disabled credential stops being used at once (the BYOK change drops the cached keys)", async () => {
    const patched = await api(h, "PATCH", `/byok/${credentials.groq}`, { key: h.tenant.managementKey, body: { disabled: true } });
    expect(patched.status).toBe(200);
    const res = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "hi" }] } });
    expect(res.status).toBe(400);
    expect(res.json.error.metadata.reason).toBe("no_credential");
  });
});
