/**
 * Bounds on one key and one request (issue 26, "One key, one request, unbounded work"), on the real stack over
 * HTTP and gRPC (grpc-js) against fake upstreams:
 * - a `models` or `provider.order/only/ignore` list past its cap is a 400 naming the field, with a small body
 *   (95,000 entries used to be de-duplicated quadratically and echoed back whole);
 * - the attempts of one request are bounded (PORTICO_CHAT_MAX_ATTEMPTS): the failing upstreams see exactly the
 *   bound, and the 502 lists what was tried (no key) and how many planned attempts were cut;
 * - at most PORTICO_CHAT_MAX_CONCURRENT_PER_KEY chat completions in flight per key: one more is a 429
 *   `rate_limited` with `Retry-After`, recorded; another key is served meanwhile; the slot comes back when a
 *   stream ends, errors, or its client leaves (before or after the first chunk), and when a non-streamed
 *   request answers or fails.
 * On SQLite and PostgreSQL, and with the slots in the real Redis (REDIS_URL).
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashSecret } from "../../../src/core/identity/keys.js";
import { bearer, grpcClient } from "../../helpers/grpc.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import { defaultScript, type FakeUpstream } from "../../helpers/fake-upstreams/server.js";

const MAX_ATTEMPTS = 3;
const MAX_CONCURRENT = 2;
const hi = [{ role: "user", content: "hi" }];

/** google.protobuf.Struct as proto-loader represents it. */
const value = (v: unknown): unknown =>
  typeof v === "string" ? { stringValue: v }
  : typeof v === "number" ? { numberValue: v }
  : typeof v === "boolean" ? { boolValue: v }
  : Array.isArray(v) ? { listValue: { values: v.map(value) } }
  : { structValue: struct(v as Record<string, unknown>) };
const struct = (o: Record<string, unknown>) => ({ fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, value(v)])) });

/** SQLite and PostgreSQL with slots counted in this process; SQLite again with them in the real Redis (REDIS_URL). */
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const variants = [
  { name: "sqlite", provider: "sqlite", redis: false },
  { name: "postgresql", provider: "postgresql", redis: false },
  { name: "sqlite, slots in Redis", provider: "sqlite", redis: true },
] as const;

describe.each(variants)("chat limits ($name)", ({ provider, redis }) => {
  let h: Harness;
  let ok: FakeUpstream;
  let failing: FakeUpstream;
  let held: FakeUpstream;
  let slow: FakeUpstream;
  let broken: FakeUpstream;
  let chat: any;
  const prefix = `test-${randomUUID()}:`;
  /** Requests to `held` whose client left, so far (the fake counts them cumulatively). */
  let heldAborts = 0;
  /** Requests to `slow` whose client left, so far. */
  let slowAborts = 0;
  const secrets = ["sk-fail-openai", "sk-fail-mistral", "sk-fail-deepseek"];

  beforeAll(async () => {
    ok = await startFakeOpenAI();
    failing = await startFakeOpenAI(defaultScript(), { failStatus: 503, failMessage: "overloaded" });
    held = await startFakeOpenAI(defaultScript(), { headerDelayMs: 600_000 });
    slow = await startFakeOpenAI({ text: Array.from({ length: 400 }, (_, i) => `w${i} `), finish: "stop", usage: { input: 1, output: 400 } }, { chunkDelayMs: 50 });
    broken = await startFakeOpenAI(defaultScript(), { failAfterChunks: 1 });
    h = await startHarness({
      provider,
      env: {
        PORTICO_CHAT_MAX_ATTEMPTS: String(MAX_ATTEMPTS),
        PORTICO_CHAT_MAX_CONCURRENT_PER_KEY: String(MAX_CONCURRENT),
        PORTICO_PROVIDER_GROQ_BASE_URL: `${ok.url}/v1`,
        PORTICO_PROVIDER_OPENAI_BASE_URL: `${failing.url}/v1`,
        PORTICO_PROVIDER_MISTRAL_BASE_URL: `${failing.url}/v1`,
        PORTICO_PROVIDER_DEEPSEEK_BASE_URL: `${failing.url}/v1`,
        PORTICO_PROVIDER_TOGETHER_BASE_URL: `${held.url}/v1`,
        PORTICO_PROVIDER_FIREWORKS_BASE_URL: `${slow.url}/v1`,
        PORTICO_PROVIDER_XAI_BASE_URL: `${broken.url}/v1`,
        ...(redis ? { REDIS_URL: REDIS_URL, PORTICO_REDIS_PREFIX: prefix } : {}),
      },
    });
    const keys: [string, string][] = [
      ["groq", "gsk-ok"],
      ["openai", secrets[0]!],
      ["mistral", secrets[1]!],
      ["deepseek", secrets[2]!],
      ["together", "tg-held"],
      ["fireworks", "fw-slow"],
      ["xai", "xai-broken"],
    ];
    for (const [slug, key] of keys) {
      const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: slug, key } });
      expect(res.status).toBe(200);
    }
    chat = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([ok, failing, held, slow, broken].map((f) => f?.close()));
  });

  /** A fresh ordinary key in the bootstrapped workspace (its BYOK credentials apply), with slots of its own. */
  const newKey = async () =>
    (
      await h.identity.createApiKey({
        organizationId: h.tenant.organizationId,
        workspaceId: h.tenant.workspaceId,
        creatorUserId: h.tenant.userId,
        name: `k-${Math.random().toString(36).slice(2)}`,
        isManagement: false,
      })
    ).plaintext;

  const post = (key: string, body: Record<string, unknown>, signal?: AbortSignal) =>
    fetch(`${h.baseUrl}/api/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal,
    });

  const grpcUnary = (key: string, body: Record<string, unknown>) =>
    new Promise<{ err: any; res: any }>((resolve) =>
      chat.CreateChatCompletion({ body: struct(body) }, bearer(key), (err: unknown, res: unknown) => resolve({ err, res })),
    );

  describe("lists of the request", () => {
    /** 95,000 distinct entries in ~760 KB, under the 1 MiB body limit. */
    const many = Array.from({ length: 95_000 }, (_, i) => `p${i.toString(36)}`);

    it.each([
      ["models", { models: many }],
      ["provider.order", { provider: { order: many } }],
      ["provider.only", { provider: { only: many } }],
      ["provider.ignore", { provider: { ignore: many } }],
    ])("95,000 entries in %s: 400 naming the field, without the list (HTTP)", async (field, extra) => {
      const res = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "groq/llama", messages: hi, ...extra } });
      expect(res.status).toBe(400);
      expect(res.json.error.metadata).toMatchObject({ reason: "bad_request", field });
      expect(res.json.error.message).toMatch(/at most \d+ items/);
      expect(res.text.length).toBeLessThan(512);
      expect(res.text).not.toContain("p2ss");
    });

    it("95,000 entries in models: INVALID_ARGUMENT naming the field, without the list (gRPC)", async () => {
      const { err } = await grpcUnary(h.tenant.apiKey, { model: "groq/llama", messages: hi, models: many });
      expect(err?.code).toBe(3); // INVALID_ARGUMENT
      expect(err.details).toMatch(/models/);
      expect(err.details.length).toBeLessThan(512);
      expect(err.details).not.toContain("p2ss");
    });

    it("a list at its cap passes validation; no_credential names the first model, not the list", async () => {
      // anthropic is served here, but this workspace holds no credential for it.
      const models = Array.from({ length: 16 }, (_, i) => `anthropic/m-${i}`);
      const res = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "anthropic/first", messages: hi, models } });
      expect(res.status).toBe(400);
      expect(res.json.error.metadata.reason).toBe("no_credential");
      expect(res.json.error.message).toContain("anthropic/first or its 16 fallback models");
      expect(res.text).not.toContain("anthropic/m-1");
    });

    it("a model id is quoted at most 128 characters long in an error", async () => {
      const long = `x${"y".repeat(200_000)}`;
      const res = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: long, messages: hi } });
      expect(res.status).toBe(400);
      expect(res.json.error.metadata.field).toBe("model");
      expect(res.text.length).toBeLessThan(1024);
    });
  });

  describe("attempts of one request", () => {
    const models = Array.from({ length: 16 }, (_, i) => `openai/m-${i}`);
    /** 16 models × 3 providers (order mistral, deepseek, then the model's own openai) × 1 credential = 48 planned. */
    const body = { model: "openai/m-first", models, provider: { order: ["mistral", "deepseek"] }, messages: hi };
    const planned = 17 * 3;

    it("HTTP non-streaming: the upstreams see exactly the bound; the 502 lists what was tried, no key", async () => {
      const before = failing.requests.length;
      const res = await api(h, "POST", "/chat/completions", { key: await newKey(), body });
      expect(res.status).toBe(502);
      expect(failing.requests.length - before).toBe(MAX_ATTEMPTS);
      expect(res.json.error.metadata).toMatchObject({
        reason: "upstream_failed",
        retryable: true,
        attempts: [
          { provider: "mistral", model: "openai/m-first", status: 503, credential_source: "byok" },
          { provider: "deepseek", model: "openai/m-first", status: 503, credential_source: "byok" },
          { provider: "openai", model: "openai/m-first", status: 503, credential_source: "byok" },
        ],
        attempts_not_tried: planned - MAX_ATTEMPTS,
      });
      for (const s of secrets) expect(res.text).not.toContain(s);
    });

    it("HTTP streaming: the same bound before the first byte", async () => {
      const before = failing.requests.length;
      const res = await api(h, "POST", "/chat/completions", { key: await newKey(), body: { ...body, stream: true } });
      expect(failing.requests.length - before).toBe(MAX_ATTEMPTS);
      expect(res.status).toBe(502);
      expect(res.json.error.metadata.attempts).toHaveLength(MAX_ATTEMPTS);
      expect(res.json.error.metadata.attempts_not_tried).toBe(planned - MAX_ATTEMPTS);
    });

    it("gRPC unary and streaming: the same bound", async () => {
      let before = failing.requests.length;
      const { err } = await grpcUnary(await newKey(), body);
      expect(err?.code).toBe(14); // UNAVAILABLE
      expect(failing.requests.length - before).toBe(MAX_ATTEMPTS);
      before = failing.requests.length;
      const key = await newKey();
      const code = await new Promise<number>((resolve) => {
        const call = chat.StreamChatCompletion({ body: struct({ ...body, stream: true }) }, bearer(key));
        call.on("data", () => {});
        call.on("error", (e: any) => resolve(e.code));
        call.on("end", () => resolve(0));
      });
      expect(code).toBe(14);
      expect(failing.requests.length - before).toBe(MAX_ATTEMPTS);
    });
  });

  describe("concurrent chat completions per key", () => {
    /** Opens a stream to the provider that never answers and resolves once the provider has it. */
    async function hold(key: string): Promise<AbortController> {
      const ctl = new AbortController();
      const before = held.requests.length;
      void post(key, { model: "together/m", messages: hi, stream: true }, ctl.signal).catch(() => {});
      await expect.poll(() => held.requests.length, { timeout: 10_000, interval: 10 }).toBeGreaterThan(before);
      return ctl;
    }

    it("HTTP: the key's next request is a 429 with Retry-After, recorded; another key is served; slots come back when clients leave", async () => {
      const key = await newKey();
      const open = [await hold(key), await hold(key)];
      if (redis) {
        // The slots are the key's leases in Redis, not a count in this process.
        const raw = new Redis(REDIS_URL);
        try {
          expect(await raw.zcard(`${prefix}chat-slots:${hashSecret(key)}`)).toBe(2);
        } finally {
          raw.disconnect();
        }
      }
      const refused = await post(key, { model: "groq/llama", messages: hi });
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toBe("1");
      const env = (await refused.json()) as any;
      expect(env.error).toMatchObject({ code: 429, metadata: { reason: "rate_limited", retryable: true } });
      expect(env.error.message).toMatch(/at most 2 at once/);
      const refusedStream = await post(key, { model: "groq/llama", messages: hi, stream: true });
      expect(refusedStream.status).toBe(429);
      await refusedStream.text();

      // Another key of the same workspace is not held back by the first key's flood.
      const other = await post(await newKey(), { model: "groq/llama", messages: hi });
      expect(other.status).toBe(200);
      await other.text();

      // The refusals are recorded (the limits stage runs inside record).
      const keyHash = hashSecret(key);
      await expect
        .poll(async () => (await h.database.db.generation.findMany({ where: { keyHash, errorCode: 429 } })).length, { timeout: 10_000 })
        .toBe(2);

      // Clients leaving before the first byte give their slots back.
      for (const c of open) c.abort();
      heldAborts += open.length;
      await held.clientAborted(heldAborts);
      const again = await post(key, { model: "groq/llama", messages: hi });
      expect(again.status).toBe(200);
      await again.text();
    });

    it("HTTP: a slot comes back when a stream ends, when it errors after its first chunk, and when the client leaves mid-stream", async () => {
      const key = await newKey();
      // Ends: more sequential streams than slots, each read to [DONE].
      for (let i = 0; i < MAX_CONCURRENT + 2; i++) {
        const res = await post(key, { model: "groq/llama", messages: hi, stream: true });
        expect(res.status).toBe(200);
        expect(await res.text()).toContain("data: [DONE]");
      }
      // Errors after the first chunk (error chunk, then [DONE]).
      for (let i = 0; i < MAX_CONCURRENT + 1; i++) {
        const res = await post(key, { model: "xai/m", messages: hi, stream: true });
        expect(res.status).toBe(200);
        const text = await res.text();
        expect(text).toContain('"finish_reason":"error"');
      }
      // Non-streamed failures and answers.
      for (let i = 0; i < MAX_CONCURRENT + 1; i++) {
        expect((await post(key, { model: "openai/m", messages: hi })).status).toBe(502);
        expect((await post(key, { model: "groq/llama", messages: hi })).status).toBe(200);
      }
      // The client leaves after the first chunk, on both slots.
      const leftBefore = slow.requests.length;
      for (let i = 0; i < MAX_CONCURRENT; i++) {
        const ctl = new AbortController();
        const res = await post(key, { model: "fireworks/m", messages: hi, stream: true }, ctl.signal);
        const reader = res.body!.getReader();
        const first = await reader.read();
        expect(new TextDecoder().decode(first.value)).toContain("data: ");
        ctl.abort();
      }
      slowAborts += MAX_CONCURRENT;
      await slow.clientAborted(slowAborts);
      expect(slow.requests.length - leftBefore).toBe(MAX_CONCURRENT);
      await expect.poll(async () => (await post(key, { model: "groq/llama", messages: hi })).status, { timeout: 10_000, interval: 20 }).toBe(200);
    });

    it("gRPC: RESOURCE_EXHAUSTED past the bound; a cancelled call gives its slot back", async () => {
      const key = await newKey();
      const before = held.requests.length;
      const calls = [0, 1].map(() => {
        const call = chat.StreamChatCompletion({ body: struct({ model: "together/m", messages: hi, stream: true }) }, bearer(key));
        call.on("data", () => {});
        call.on("error", () => {});
        return call;
      });
      await expect.poll(() => held.requests.length, { timeout: 10_000, interval: 10 }).toBe(before + 2);
      const { err } = await grpcUnary(key, { model: "groq/llama", messages: hi });
      expect(err?.code).toBe(8); // RESOURCE_EXHAUSTED
      const streamed = await new Promise<number>((resolve) => {
        const call = chat.StreamChatCompletion({ body: struct({ model: "groq/llama", messages: hi, stream: true }) }, bearer(key));
        call.on("data", () => {});
        call.on("error", (e: any) => resolve(e.code));
        call.on("end", () => resolve(0));
      });
      expect(streamed).toBe(8);
      for (const c of calls) c.cancel();
      heldAborts += calls.length;
      await held.clientAborted(heldAborts);
      await expect.poll(async () => (await grpcUnary(key, { model: "groq/llama", messages: hi })).err?.code ?? 0, { timeout: 10_000, interval: 20 }).toBe(0);
    });

    it("split gateway (gRPC to the core): a client leaving before the first byte or mid-stream cancels the core's call and the upstream request", async () => {
      const { buildGateway } = await import("../../../src/gateway/app.js");
      const { createCoreTransport } = await import("../../../src/gateway/core-transport.js");
      const { createMetrics } = await import("../../../src/lib/metrics.js");
      const split = await buildGateway({ transport: createCoreTransport(h.coreUrl), coreOverTheWire: true, logger: h.gateway.log as never, metrics: createMetrics(), bodyLimitBytes: h.config.bodyLimitBytes, brand: h.config.brand });
      await split.listen({ host: "127.0.0.1", port: 0 });
      try {
        const url = `http://127.0.0.1:${(split.server.address() as { port: number }).port}/api/v1/chat/completions`;
        const key = await newKey();
        const send = (body: Record<string, unknown>, signal: AbortSignal) =>
          fetch(url, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(body), signal });
        // Before the first byte: a unary call and a stream, both held by the upstream.
        const before = held.requests.length;
        const open = [false, true].map((stream) => {
          const ctl = new AbortController();
          send({ model: "together/m", messages: hi, stream }, ctl.signal).catch(() => undefined);
          return ctl;
        });
        await expect.poll(() => held.requests.length, { timeout: 10_000, interval: 10 }).toBe(before + 2);
        for (const c of open) c.abort();
        heldAborts += open.length;
        await held.clientAborted(heldAborts);
        // Mid-stream: the client leaves after the first chunk.
        const ctl = new AbortController();
        const res = await send({ model: "fireworks/m", messages: hi, stream: true }, ctl.signal);
        expect(res.status).toBe(200);
        const first = await res.body!.getReader().read();
        expect(new TextDecoder().decode(first.value)).toContain("data: ");
        ctl.abort();
        slowAborts += 1;
        await slow.clientAborted(slowAborts);
        // The slots came back: the key is served again.
        await expect.poll(async () => (await send({ model: "groq/llama", messages: hi }, new AbortController().signal)).status, { timeout: 10_000, interval: 20 }).toBe(200);
      } finally {
        await split.close();
      }
    });
  });
});
