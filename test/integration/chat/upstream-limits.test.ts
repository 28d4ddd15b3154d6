/**
 * Issue 26, "a provider that fails": a silent provider cannot hold a caller (first-byte limit per attempt,
 * then the next candidate; the request's budget, lowerable with `x-request-timeout-ms` or a gRPC deadline,
 * ends in 504 `timeout`; streams are kept alive meanwhile, gRPC ones with empty messages), a provider's 429
 * wait is passed on and honoured (the credential is not called inside it), a key the provider echoes is
 * redacted from streamed chunks as from whole answers, and a request uses its own workspace's BYOK
 * credentials. Real stack, real clients (fetch, the `openai` SDK, grpc-js), fake providers.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness, type Tenant } from "../../helpers/harness.js";
import { bearer, grpc, grpcClient } from "../../helpers/grpc.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import { defaultScript, type FakeUpstream } from "../../helpers/fake-upstreams/server.js";

const ECHOED_KEY = "gsk-echoed-secret-5c1f9a";
/** A key long enough to be guarded when spelled across chunks (src/core/chat/key-guard.ts). */
const SPELLED_KEY = "sk-spelled-0123456789abcdefghijklmnopqrstuvwxyz";

/** google.protobuf.Struct as proto-loader represents it. */
const value = (v: unknown): unknown =>
  typeof v === "string" ? { stringValue: v }
  : typeof v === "number" ? { numberValue: v }
  : typeof v === "boolean" ? { boolValue: v }
  : Array.isArray(v) ? { listValue: { values: v.map(value) } }
  : { structValue: struct(v as Record<string, unknown>) };
const struct = (o: Record<string, unknown>) => ({ fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, value(v)])) });
const chatBody = (model: string | string[]) =>
  struct({ ...(Array.isArray(model) ? { model: model[0]!, models: model } : { model }), messages: [{ role: "user", content: "hi" }] });

function metadata(key: string, extra: Record<string, string> = {}): grpc.Metadata {
  const md = bearer(key);
  for (const [k, v] of Object.entries(extra)) md.set(k, v);
  return md;
}

type GrpcStreamResult = { messages: any[]; error?: grpc.ServiceError };

describe("chat completions against failing providers", () => {
  let h: Harness;
  let silent: FakeUpstream;
  let ok: FakeUpstream;
  let limited: FakeUpstream;
  let limitedToo: FakeUpstream;
  let echo: FakeUpstream;
  let spell: FakeUpstream;
  let chat: any;

  beforeAll(async () => {
    silent = await startFakeOpenAI(defaultScript(), { headerDelayMs: 600_000 });
    ok = await startFakeOpenAI();
    limited = await startFakeOpenAI(defaultScript(), { failStatus: 429, failMessage: "slow down", failHeaders: { "retry-after": "30" } });
    limitedToo = await startFakeOpenAI(defaultScript(), { failStatus: 429, failMessage: "slow down", failHeaders: { "retry-after": "20" } });
    echo = await startFakeOpenAI({ text: ["Your key is ", ECHOED_KEY, ", keep it safe."], finish: "stop", usage: { input: 1, output: 3 } });
    // The key a few characters per chunk, as a model's tokens would carry it.
    const pieces = SPELLED_KEY.match(/.{1,3}/g)!;
    spell = await startFakeOpenAI({ text: ["Your key is ", ...pieces, ", keep it safe."], finish: "stop", usage: { input: 1, output: pieces.length + 2 } });
    h = await startHarness({
      env: {
        PORTICO_HEARTBEAT_INTERVAL_MS: "100",
        PORTICO_UPSTREAM_FIRST_BYTE_TIMEOUT_MS: "300",
        PORTICO_UPSTREAM_ANSWER_TIMEOUT_MS: "300",
        PORTICO_CHAT_BUDGET_MS: "120000",
        PORTICO_PROVIDER_GROQ_BASE_URL: `${silent.url}/v1`,
        PORTICO_PROVIDER_TOGETHER_BASE_URL: `${ok.url}/v1`,
        PORTICO_PROVIDER_MISTRAL_BASE_URL: `${limited.url}/v1`,
        PORTICO_PROVIDER_XAI_BASE_URL: `${limitedToo.url}/v1`,
        PORTICO_PROVIDER_DEEPSEEK_BASE_URL: `${echo.url}/v1`,
        PORTICO_PROVIDER_FIREWORKS_BASE_URL: `${spell.url}/v1`,
      },
    });
    for (const [provider, key] of [["groq", "gsk-silent"], ["together", "tg-ok"], ["mistral", "ms-limited"], ["xai", "xai-limited"], ["deepseek", ECHOED_KEY], ["fireworks", SPELLED_KEY]] as const) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider, key } })).status).toBe(200);
    }
    chat = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
  });
  afterAll(async () => {
    chat?.close();
    await h?.close();
    await Promise.all([silent, ok, limited, limitedToo, echo, spell].map((f) => f?.close()));
  });

  const post = (body: Record<string, unknown>, headers: Record<string, string> = {}, key = h.tenant.apiKey) =>
    fetch(`${h.baseUrl}/api/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], ...body }),
    });
  const sseData = (text: string) => text.split("\n\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
  const unary = (body: unknown, md: grpc.Metadata) =>
    new Promise<{ res?: any; err?: grpc.ServiceError }>((resolve) => chat.CreateChatCompletion({ body }, md, (err: grpc.ServiceError | null, res: unknown) => resolve(err ? { err } : { res })));
  const streamed = (body: unknown, md: grpc.Metadata) =>
    new Promise<GrpcStreamResult>((resolve) => {
      const messages: any[] = [];
      const call = chat.StreamChatCompletion({ body }, md);
      call.on("data", (m: any) => messages.push(m));
      call.on("end", () => resolve({ messages }));
      call.on("error", (error: grpc.ServiceError) => resolve({ messages, error }));
    });
  const contentOf = (m: any): string => m.chunk?.fields?.choices?.listValue?.values?.[0]?.structValue?.fields?.delta?.structValue?.fields?.content?.stringValue ?? "";

  describe("a silent provider", () => {
    it("HTTP stream: keepalives while waiting, the silent attempt given up at its first-byte limit, the next candidate answers", async () => {
      const before = silent.requests.length;
      const res = await post({ model: "groq/m", models: ["groq/m", "together/m"], stream: true });
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text.indexOf(": keepalive")).toBeGreaterThanOrEqual(0);
      expect(text.indexOf(": keepalive")).toBeLessThan(text.indexOf("data:"));
      const events = sseData(text);
      expect(events.at(-1)).toBe("[DONE]");
      expect(events.slice(0, -1).map((e) => JSON.parse(e).choices[0]?.delta?.content ?? "").join("")).toBe("Hello, world");
      expect(JSON.parse(events[0]!).provider).toBe("together");
      expect(silent.requests.length).toBe(before + 1);
      await silent.clientAborted(before + 1); // the silent attempt's request was abandoned
    });

    it("HTTP non-streaming and gRPC unary: the next candidate answers after the silent one's limit", async () => {
      const res = await post({ model: "groq/m", models: ["groq/m", "together/m"] });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { provider: string }).provider).toBe("together");
      const { res: answer, err } = await unary(chatBody(["groq/m", "together/m"]), metadata(h.tenant.apiKey));
      expect(err).toBeUndefined();
      expect(JSON.stringify(answer)).toContain("Hello, world");
    });

    it("only a silent provider: 504 timeout once its attempt timed out (HTTP, gRPC unary and stream)", async () => {
      const res = await post({ model: "groq/m" });
      expect(res.status).toBe(504);
      const body = (await res.json()) as { error: { message: string; metadata: { reason: string; retryable: boolean } } };
      expect(body.error.metadata).toMatchObject({ reason: "timeout", retryable: true });
      expect(body.error.message).toMatch(/no response within 300 ms/);
      const { err } = await unary(chatBody("groq/m"), metadata(h.tenant.apiKey));
      expect(err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
      const s = await streamed(chatBody("groq/m"), metadata(h.tenant.apiKey));
      expect(s.error?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    });

    it("x-request-timeout-ms lowers the budget: 504 timeout naming the budget, HTTP (stream in band, non-stream envelope) and gRPC", async () => {
      const res = await post({ model: "groq/m" }, { "x-request-timeout-ms": "150" });
      expect(res.status).toBe(504);
      const body = (await res.json()) as { error: { message: string; metadata: { reason: string } } };
      expect(body.error.metadata.reason).toBe("timeout");
      expect(body.error.message).toMatch(/time budget of 150 ms/);

      const s = await post({ model: "groq/m", stream: true }, { "x-request-timeout-ms": "150" });
      expect(s.status).toBe(200); // opened by then (keepalive at 100 ms)
      const events = sseData(await s.text());
      expect(events.at(-1)).toBe("[DONE]");
      const last = JSON.parse(events.at(-2)!);
      expect(last.choices[0].finish_reason).toBe("error");
      expect(last.error.code).toBe(504);
      expect(last.error.message).toMatch(/time budget of 150 ms/);

      const { err } = await unary(chatBody("groq/m"), metadata(h.tenant.apiKey, { "x-request-timeout-ms": "150" }));
      expect(err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
      expect(err?.details).toMatch(/time budget of 150 ms/);
    });

    it("a gRPC stream gets keepalive messages (no chunk) while waiting, then the status", async () => {
      const s = await streamed(chatBody("groq/m"), metadata(h.tenant.apiKey, { "x-request-timeout-ms": "250" }));
      expect(s.messages.length).toBeGreaterThanOrEqual(1);
      expect(s.messages.every((m) => m.chunk === null || m.chunk === undefined)).toBe(true);
      expect(s.error?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    });

    it("a malformed x-request-timeout-ms is a 400 naming it (HTTP) and INVALID_ARGUMENT (gRPC)", async () => {
      for (const bad of ["soon", "0", "-5", "1.5"]) {
        const res = await post({ model: "together/m" }, { "x-request-timeout-ms": bad });
        expect(res.status).toBe(400);
        const body = (await res.json()) as { error: { metadata: { field: string } } };
        expect(body.error.metadata.field).toBe("x-request-timeout-ms");
      }
      const { err } = await unary(chatBody("together/m"), metadata(h.tenant.apiKey, { "x-request-timeout-ms": "soon" }));
      expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
      // A value above the operator's budget is accepted (the operator's applies).
      expect((await post({ model: "together/m" }, { "x-request-timeout-ms": "999999999" })).status).toBe(200);
    });
  });

  describe("a provider's 429 with Retry-After", () => {
    it("is passed on as 429 with Retry-After when no candidate is left, and the credential is not called inside its wait", async () => {
      const first = await post({ model: "mistral/m" });
      expect(first.status).toBe(429);
      expect(Number(first.headers.get("retry-after"))).toBeGreaterThanOrEqual(29);
      expect(Number(first.headers.get("retry-after"))).toBeLessThanOrEqual(30);
      const body = (await first.json()) as { error: { metadata: { reason: string; retryable: boolean } } };
      expect(body.error.metadata).toMatchObject({ reason: "rate_limited", retryable: true });
      expect(limited.requests.length).toBe(1);

      // Inside the wait: answered from the cool-down, the provider is not called again.
      const again = await post({ model: "mistral/m", stream: true });
      expect(again.status).toBe(429);
      expect(Number(again.headers.get("retry-after"))).toBeGreaterThan(0);
      const { err } = await unary(chatBody("mistral/m"), metadata(h.tenant.apiKey));
      expect(err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      const s = await streamed(chatBody("mistral/m"), metadata(h.tenant.apiKey));
      expect(s.error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect(limited.requests.length).toBe(1);

      // Another candidate serves the request meanwhile, without calling the cooling credential.
      const fallback = await post({ model: "mistral/m", models: ["mistral/m", "together/m"] });
      expect(fallback.status).toBe(200);
      expect(((await fallback.json()) as { provider: string }).provider).toBe("together");
      expect(limited.requests.length).toBe(1);
    });

    it("over gRPC first: RESOURCE_EXHAUSTED with the wait in the error detail; the shortest wait of the candidates is passed on", async () => {
      const { err } = await unary(chatBody(["xai/m", "mistral/m"]), metadata(h.tenant.apiKey));
      expect(err?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect(limitedToo.requests.length).toBe(1);
      const res = await post({ model: "xai/m", models: ["xai/m", "mistral/m"] });
      expect(res.status).toBe(429);
      const wait = Number(res.headers.get("retry-after"));
      expect(wait).toBeGreaterThan(0);
      expect(wait).toBeLessThanOrEqual(20);
      expect(limitedToo.requests.length).toBe(1);
    });
  });

  describe("a provider that echoes the key", () => {
    it("is redacted in streamed chunks and in whole answers (HTTP, the openai SDK, gRPC)", async () => {
      const client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
      const stream = await client.chat.completions.create({ model: "deepseek/m", messages: [{ role: "user", content: "hi" }], stream: true });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
      expect(text).toBe("Your key is [redacted], keep it safe.");

      const raw = await (await post({ model: "deepseek/m", stream: true })).text();
      expect(raw).not.toContain(ECHOED_KEY);
      expect(raw).toContain("[redacted]");

      const whole = await client.chat.completions.create({ model: "deepseek/m", messages: [{ role: "user", content: "hi" }] });
      expect(whole.choices[0]!.message.content).toBe("Your key is [redacted], keep it safe.");

      const s = await streamed(chatBody("deepseek/m"), metadata(h.tenant.apiKey));
      expect(s.error).toBeUndefined();
      expect(s.messages.map(contentOf).join("")).toBe("Your key is [redacted], keep it safe.");
      expect(JSON.stringify(s.messages)).not.toContain(ECHOED_KEY);
      const { res } = await unary(chatBody("deepseek/m"), metadata(h.tenant.apiKey));
      expect(JSON.stringify(res)).not.toContain(ECHOED_KEY);
      expect(JSON.stringify(res)).toContain("[redacted]");
    });

    it("spelled over many chunks: withheld after its first characters (HTTP and gRPC streams); whole answers redact it", async () => {
      const shown = `Your key is ${SPELLED_KEY.slice(0, 15)}[redacted], keep it safe.`;
      const raw = await (await post({ model: "fireworks/m", stream: true })).text();
      const text = sseData(raw).slice(0, -1).map((e) => JSON.parse(e).choices[0]?.delta?.content ?? "").join("");
      expect(text).toBe(shown);
      const s = await streamed(chatBody("fireworks/m"), metadata(h.tenant.apiKey));
      expect(s.messages.map(contentOf).join("")).toBe(shown);
      const whole = (await (await post({ model: "fireworks/m" })).json()) as { choices: Array<{ message: { content: string } }> };
      expect(whole.choices[0]!.message.content).toBe("Your key is [redacted], keep it safe.");
    });
  });
});

describe.each(["sqlite", "postgresql"] as const)("BYOK credentials are the caller's workspace's (%s)", (provider) => {
  let h: Harness;
  let upstream: FakeUpstream;
  let other: Tenant;
  let chat: any;

  beforeAll(async () => {
    upstream = await startFakeOpenAI();
    h = await startHarness({ provider, env: { PORTICO_PROVIDER_GROQ_BASE_URL: `${upstream.url}/v1` } });
    // A second workspace of the same organization, with an ordinary key of its own.
    const ws = await h.identity.createWorkspace({ organizationId: h.tenant.organizationId, name: "second" });
    const key = await h.identity.createApiKey({
      organizationId: h.tenant.organizationId,
      workspaceId: ws.id,
      creatorUserId: h.tenant.userId,
      name: "second workspace key",
      isManagement: false,
    });
    other = { ...h.tenant, workspaceId: ws.id, apiKey: key.plaintext, apiKeyHash: key.record.hash };
    const stored = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "groq", key: "gsk-second-ws", workspace_id: ws.id } });
    expect(stored.status).toBe(200);
    chat = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
  });
  afterAll(async () => {
    chat?.close();
    await h?.close();
    await upstream?.close();
  });

  const post = (key: string) =>
    api(h, "POST", "/chat/completions", { key, body: { model: "groq/m", messages: [{ role: "user", content: "hi" }] } });
  const unary = (key: string) =>
    new Promise<{ res?: any; err?: grpc.ServiceError }>((resolve) =>
      chat.CreateChatCompletion({ body: chatBody("groq/m") }, bearer(key), (err: grpc.ServiceError | null, res: unknown) => resolve(err ? { err } : { res })),
    );

  it("a key of the credential's workspace is served with it; a key of another workspace of the same organization is not", async () => {
    const served = await post(other.apiKey);
    expect(served.status).toBe(200);
    expect(upstream.requests.at(-1)!.headers.authorization).toBe("Bearer gsk-second-ws");
    const { res } = await unary(other.apiKey);
    expect(JSON.stringify(res)).toContain("Hello, world");

    const refused = await post(h.tenant.apiKey);
    expect(refused.status).toBe(400);
    expect(refused.json.error.metadata.reason).toBe("no_credential");
    const { err } = await unary(h.tenant.apiKey);
    expect(err?.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(upstream.requests.length).toBe(2);
  });
});
