/**
 * The exact-match response cache (docs/operations.md, "Response cache"), end to end with the `openai` and
 * `@anthropic-ai/sdk` clients against a fake OpenAI-compatible upstream whose calls are counted: off by default;
 * `cache: {ttl_seconds}` (or a preset's) answers an identical request from the cache — non-streamed and streamed
 * from one entry, `x-portico-cache: hit|miss`, cost 0 with the cached answer's token counts, `cache_hit` on the
 * generation — and never across organizations; the entry expires with its time to live; tool-call answers are not
 * stored. In the database (SQLite, PostgreSQL) and in Redis.
 */
import Anthropic from "@anthropic-ai/sdk";
import { Redis } from "ioredis";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness, type Tenant } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";
import { cacheKeyOf } from "../../../src/core/chat/pipeline/cache.js";
import { bearer, grpcClient } from "../../helpers/grpc.js";

/** A JSON value as google.protobuf.Value (proto-loader's object form). */
const value = (v: unknown): unknown =>
  v === null ? { nullValue: 0 }
  : typeof v === "string" ? { stringValue: v }
  : typeof v === "number" ? { numberValue: v }
  : typeof v === "boolean" ? { boolValue: v }
  : Array.isArray(v) ? { listValue: { values: v.map(value) } }
  : { structValue: struct(v as Record<string, unknown>) };
const struct = (o: Record<string, unknown>): unknown => ({ fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, value(v)])) });

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

const variants = [
  { name: "sqlite, database store", provider: "sqlite", redis: false },
  { name: "postgresql, database store", provider: "postgresql", redis: false },
  { name: "sqlite, Redis store", provider: "sqlite", redis: true },
] as const;

interface PricedUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost?: number | null;
}

describe.each(variants)("response cache ($name)", ({ provider, redis }) => {
  let h: Harness;
  let upstream: FakeUpstream;
  let client: OpenAI;
  let redisClient: Redis | undefined;
  const prefix = `portico-cache-test-${process.pid}-${Math.random().toString(36).slice(2)}:`;
  let n = 0;
  /** A conversation no other test sends. */
  const fresh = () => [{ role: "user" as const, content: `question ${++n} of ${prefix}` }];
  const calls = () => upstream.requests.filter((r) => r.url.includes("/chat/completions")).length;
  const model = "ollama/tiny";

  beforeAll(async () => {
    upstream = await startFakeOpenAI({ text: ["Hel", "lo"], finish: "stop", usage: { input: 20, output: 5 } });
    h = await startHarness({
      provider,
      env: {
        PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `ollama=${upstream.url}/v1`,
        PORTICO_KEYLESS_PROVIDERS: "ollama",
        ...(redis ? { REDIS_URL, PORTICO_REDIS_PREFIX: prefix } : {}),
      },
    });
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
    if (redis) redisClient = new Redis(REDIS_URL);
  });
  afterAll(async () => {
    if (redisClient) {
      const keys = await redisClient.keys(`${prefix}*`);
      if (keys.length > 0) await redisClient.del(...keys);
      redisClient.disconnect();
    }
    await h?.close();
    await upstream?.close();
  });

  /** A non-streamed completion with its cache header. */
  async function complete(body: Record<string, unknown>, c: OpenAI = client) {
    const { data, response } = await c.chat.completions.create({ model, max_tokens: 50, ...body } as never).withResponse();
    const completion = data as unknown as OpenAI.Chat.Completions.ChatCompletion;
    return { completion, usage: completion.usage as unknown as PricedUsage, cache: response.headers.get("x-portico-cache") };
  }

  /** A streamed completion: its text, finish reason, usage, chunk count and cache header. */
  async function streamed(body: Record<string, unknown>) {
    const { data, response } = await client.chat.completions
      .create({ model, max_tokens: 50, ...body, stream: true, stream_options: { include_usage: true } } as never)
      .withResponse();
    let text = "";
    let finish: string | null = null;
    let usage: PricedUsage | undefined;
    let id = "";
    let role: string | undefined;
    for await (const chunk of data as unknown as AsyncIterable<OpenAI.Chat.Completions.ChatCompletionChunk>) {
      id = chunk.id;
      role ??= chunk.choices[0]?.delta.role;
      text += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage as unknown as PricedUsage;
    }
    return { id, text, finish, usage, role, cache: response.headers.get("x-portico-cache") };
  }

  async function generation(id: string, key = h.tenant.apiKey): Promise<Record<string, unknown>> {
    return waitFor(`generation ${id}`, async () => {
      const got = await api(h, "GET", `/generation?id=${id}`, { key });
      return got.status === 200 ? (got.json.data as Record<string, unknown>) : undefined;
    });
  }

  it("is off by default: identical requests both reach the provider, no cache header", async () => {
    const messages = fresh();
    const before = calls();
    const a = await complete({ messages });
    const b = await complete({ messages });
    expect(calls() - before).toBe(2);
    expect(a.cache).toBeNull();
    expect(b.cache).toBeNull();
    expect((await generation(b.completion.id)).cache_hit).toBe(false);
  });

  it("a miss, then a non-streamed hit and a streamed hit from the same entry: no provider call, cost 0, the cached usage", async () => {
    const messages = fresh();
    const cache = { ttl_seconds: 60 };
    const before = calls();
    const miss = await complete({ messages, cache });
    expect(miss.cache).toBe("miss");
    expect(calls() - before).toBe(1);
    // `cache` is Portico's own: never sent upstream.
    expect(upstream.requests.at(-1)!.body.cache).toBeUndefined();

    const hit = await complete({ messages, cache });
    expect(hit.cache).toBe("hit");
    expect(calls() - before).toBe(1);
    expect(hit.completion.id).not.toBe(miss.completion.id);
    expect(hit.completion.choices[0]!.message.content).toBe("Hello");
    expect(hit.completion.choices[0]!.finish_reason).toBe("stop");
    expect((hit.completion as unknown as { provider: string }).provider).toBe("ollama");
    expect(hit.usage).toMatchObject({ prompt_tokens: 20, completion_tokens: 5, total_tokens: 25, cost: 0 });

    const s = await streamed({ messages, cache });
    expect(s.cache).toBe("hit");
    expect(calls() - before).toBe(1);
    expect(s).toMatchObject({ text: "Hello", finish: "stop", role: "assistant" });
    expect(s.usage).toMatchObject({ prompt_tokens: 20, completion_tokens: 5, cost: 0 });

    const missRecord = await generation(miss.completion.id);
    expect(missRecord).toMatchObject({ cache_hit: false, provider: "ollama", attempts: 1 });
    for (const id of [hit.completion.id, s.id]) {
      expect(await generation(id)).toMatchObject({ cache_hit: true, provider: "ollama", total_cost: 0, prompt_tokens: 20, completion_tokens: 5, attempts: 0 });
    }
    // The request log's cache_hit filter applies to the column.
    const hits = await api(h, "GET", "/generations?cache_hit=true&limit=100", { key: h.tenant.managementKey });
    expect(hits.status, hits.text).toBe(200);
    const ids = (hits.json.data as Array<{ id: string; cache_hit: boolean }>).map((g) => g.id);
    expect(ids).toEqual(expect.arrayContaining([hit.completion.id, s.id]));
    expect(ids).not.toContain(miss.completion.id);
  });

  it("a streamed miss is stored once the stream ended, and serves a non-streamed hit", async () => {
    const messages = fresh();
    const cache = { ttl_seconds: 60 };
    const before = calls();
    const s = await streamed({ messages, cache });
    expect(s).toMatchObject({ cache: "miss", text: "Hello", finish: "stop" });
    const hit = await complete({ messages, cache });
    expect(hit.cache).toBe("hit");
    expect(hit.completion.choices[0]!.message.content).toBe("Hello");
    expect(hit.usage).toMatchObject({ prompt_tokens: 20, completion_tokens: 5, cost: 0 });
    expect(calls() - before).toBe(1);
  });

  it("the key: fields that cannot change the answer are left out, sampling fields and the model are in", async () => {
    const messages = fresh();
    const cache = { ttl_seconds: 60 };
    const before = calls();
    expect((await complete({ messages, cache, temperature: 0 })).cache).toBe("miss");
    // user, metadata, session_id, trace: the same answer.
    const same = await complete({ messages, cache, temperature: 0, user: "someone", metadata: { a: "b" }, session_id: "s-1", trace: { trace_id: "t" } });
    expect(same.cache).toBe("hit");
    expect(calls() - before).toBe(1);
    // A different sampling parameter, max_tokens or response format: another answer.
    expect((await complete({ messages, cache, temperature: 0.5 })).cache).toBe("miss");
    expect((await complete({ messages, cache, temperature: 0, max_tokens: 7 })).cache).toBe("miss");
    expect((await complete({ messages, cache, temperature: 0, response_format: { type: "json_object" } })).cache).toBe("miss");
    expect(calls() - before).toBe(4);
  });

  it("never crosses organizations: another organization's identical request is a miss, then its own hit", async () => {
    const other: Tenant = await h.createTenant();
    const otherClient = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: other.apiKey, maxRetries: 0 });
    const messages = fresh();
    const cache = { ttl_seconds: 60 };
    const before = calls();
    expect((await complete({ messages, cache })).cache).toBe("miss");
    expect((await complete({ messages, cache })).cache).toBe("hit");
    const theirs = await complete({ messages, cache }, otherClient);
    expect(theirs.cache).toBe("miss");
    expect(calls() - before).toBe(2);
    const theirHit = await complete({ messages, cache }, otherClient);
    expect(theirHit.cache).toBe("hit");
    expect(calls() - before).toBe(2);
    expect((await generation(theirHit.completion.id, other.apiKey)).cache_hit).toBe(true);
  });

  it("is shared by two instances on the same database (or Redis): one instance's answer is the other's hit", async () => {
    const second = await startHarness({
      sameDatabaseAs: h,
      env: {
        PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `ollama=${upstream.url}/v1`,
        PORTICO_KEYLESS_PROVIDERS: "ollama",
        ...(redis ? { REDIS_URL, PORTICO_REDIS_PREFIX: prefix } : {}),
      },
    });
    try {
      const other = new OpenAI({ baseURL: `${second.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
      const messages = fresh();
      const cache = { ttl_seconds: 60 };
      const before = calls();
      expect((await complete({ messages, cache })).cache).toBe("miss");
      expect((await complete({ messages, cache }, other)).cache).toBe("hit");
      expect(calls() - before).toBe(1);
    } finally {
      await second.close();
    }
  });

  it("expires with its time to live: after the entry is gone (awaited in the store), the request reaches the provider again", async () => {
    const messages = fresh();
    const cache = { ttl_seconds: 1 };
    const before = calls();
    expect((await complete({ messages, cache })).cache).toBe("miss");
    // Within the second the entry lives: a hit (the fake answers in milliseconds).
    const second = await complete({ messages, cache });
    expect(["hit", "miss"]).toContain(second.cache);
    const afterSecond = calls();
    expect(afterSecond - before).toBe(second.cache === "hit" ? 1 : 2);
    // The entry of this request (its key computed as the stage does), awaited in the store until it is gone or expired.
    const key = cacheKeyOf(h.tenant, { model, max_tokens: 50, messages });
    if (redisClient) {
      expect(await redisClient.exists(`${prefix}response-cache:${key}`)).toBe(1);
      await waitFor("the Redis entry to expire", async () => (await redisClient!.exists(`${prefix}response-cache:${key}`)) === 0, { timeoutMs: 5_000 });
    } else {
      const row = await h.database.db.cacheEntry.findUnique({ where: { key } });
      expect(row).not.toBeNull();
      await waitFor("the database entry to expire", () => Date.now() > row!.expiresAt.getTime(), { timeoutMs: 5_000 });
    }
    const third = await complete({ messages, cache });
    expect(third.cache).toBe("miss");
    expect(calls() - afterSecond).toBe(1);
    if (!redisClient) {
      // The expired row was replaced by the new answer's.
      const row = await h.database.db.cacheEntry.findUnique({ where: { key } });
      expect(row!.expiresAt.getTime()).toBeGreaterThan(Date.now() - 1_000);
    }
  });

  it("a preset switches it on; a request's ttl_seconds 0 switches it off", async () => {
    const slug = `cached-${n}`;
    const created = await api(h, "POST", `/presets/${slug}/chat/completions`, {
      key: h.tenant.managementKey,
      body: { model, messages: [{ role: "user", content: "x" }], cache: { ttl_seconds: 120 } },
    });
    expect(created.status, created.text).toBeLessThan(300);
    const messages = fresh();
    const before = calls();
    expect((await complete({ model: `@preset/${slug}`, messages })).cache).toBe("miss");
    expect((await complete({ model: `@preset/${slug}`, messages })).cache).toBe("hit");
    const off = await complete({ model: `@preset/${slug}`, messages, cache: { ttl_seconds: 0 } });
    expect(off.cache).toBeNull();
    expect(calls() - before).toBe(2);
  });

  it("tool-call answers are not stored", async () => {
    const script = upstream.script;
    upstream.script = { text: [], toolCalls: [{ id: "call_1", name: "lookup", arguments: "{}" }], finish: "tool_calls", usage: { input: 20, output: 5 } };
    try {
      const messages = fresh();
      const tools = [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }];
      const before = calls();
      expect((await complete({ messages, tools, cache: { ttl_seconds: 60 } })).cache).toBe("miss");
      expect((await complete({ messages, tools, cache: { ttl_seconds: 60 } })).cache).toBe("miss");
      expect(calls() - before).toBe(2);
    } finally {
      upstream.script = script;
    }
  });

  it("over gRPC (grpc-js ChatService): the response's and the stream's first message's `cache` field", async () => {
    const chat: any = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
    try {
      const body = struct({ model, max_tokens: 50, messages: fresh(), cache: { ttl_seconds: 60 } });
      const unaryCache = () =>
        new Promise<string>((resolve, reject) =>
          chat.CreateChatCompletion({ body }, bearer(h.tenant.apiKey), (err: Error | null, res: { cache: string }) => (err ? reject(err) : resolve(res.cache))),
        );
      expect(await unaryCache()).toBe("miss");
      expect(await unaryCache()).toBe("hit");
      const first = await new Promise<{ cache: string }>((resolve, reject) => {
        const call = chat.StreamChatCompletion({ body }, bearer(h.tenant.apiKey));
        let got: { cache: string } | undefined;
        // A keepalive message has no chunk; the first with one carries the timing fields and `cache`.
        call.on("data", (m: { cache: string; chunk?: unknown; chunk_json?: string }) => (got ??= m.chunk || m.chunk_json ? m : undefined));
        call.on("error", reject);
        call.on("end", () => (got ? resolve(got) : reject(new Error("no chunk"))));
      });
      expect(first.cache).toBe("hit");
    } finally {
      chat.close();
    }
  });

  it("refuses a time to live out of bounds, naming the field", async () => {
    const res = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model, messages: fresh(), cache: { ttl_seconds: 86_401 } } });
    expect(res.status).toBe(400);
    expect(res.json.error.metadata.field).toBe("cache.ttl_seconds");
  });

  it("the Anthropic Messages dialect goes through the same cache", async () => {
    const anthropic = new Anthropic({ baseURL: `${h.baseUrl}/api`, apiKey: h.tenant.apiKey, maxRetries: 0 });
    const body = { model, max_tokens: 50, messages: fresh(), cache: { ttl_seconds: 60 } } as never;
    const before = calls();
    const first = await anthropic.messages.create(body).withResponse();
    expect(first.response.headers.get("x-portico-cache")).toBe("miss");
    const second = await anthropic.messages.create(body).withResponse();
    expect(second.response.headers.get("x-portico-cache")).toBe("hit");
    expect(second.data.content).toEqual(first.data.content);
    expect(calls() - before).toBe(1);
  });

  it("the Responses dialect goes through the same cache, streamed and not", async () => {
    const body = { model, max_output_tokens: 50, input: `question ${++n} of ${prefix}`, cache: { ttl_seconds: 60 } } as never;
    const before = calls();
    const first = await client.responses.create(body).withResponse();
    expect(first.response.headers.get("x-portico-cache")).toBe("miss");
    const second = await client.responses.create(body).withResponse();
    expect(second.response.headers.get("x-portico-cache")).toBe("hit");
    expect(second.data.output_text).toBe(first.data.output_text);
    const stream = await client.responses.create({ ...(body as object), stream: true } as never).withResponse();
    expect(stream.response.headers.get("x-portico-cache")).toBe("hit");
    let text = "";
    for await (const event of stream.data as unknown as AsyncIterable<{ type: string; delta?: string }>) if (event.type === "response.output_text.delta") text += event.delta;
    expect(text).toBe(first.data.output_text);
    expect(calls() - before).toBe(1);
  });

  it("a workspace setting (management API) switches it on for requests without `cache`; `cache` still wins", async () => {
    const path = `/workspaces/${h.tenant.workspaceId}`;
    for (const bad of [0, 86_401, 1.5]) {
      const res = await api(h, "PATCH", path, { key: h.tenant.managementKey, body: { response_cache_ttl_seconds: bad } });
      expect(res.status, res.text).toBe(400);
      expect(res.json.error.metadata.field).toBe("response_cache_ttl_seconds");
    }
    const set = await api(h, "PATCH", path, { key: h.tenant.managementKey, body: { response_cache_ttl_seconds: 60 } });
    expect(set.status, set.text).toBe(200);
    expect(set.json.data?.response_cache_ttl_seconds ?? set.json.response_cache_ttl_seconds).toBe(60);
    try {
      const messages = fresh();
      const before = calls();
      // The key's cached standing is dropped on the change (invalidation bus): the next request sees the setting.
      expect((await complete({ messages })).cache).toBe("miss");
      expect((await complete({ messages })).cache).toBe("hit");
      expect((await complete({ messages, cache: { ttl_seconds: 0 } })).cache).toBeNull();
      expect(calls() - before).toBe(2);
    } finally {
      const off = await api(h, "PATCH", path, { key: h.tenant.managementKey, body: { response_cache_ttl_seconds: null } });
      expect(off.status, off.text).toBe(200);
    }
    const messages = fresh();
    expect((await complete({ messages })).cache).toBeNull();
  });
});
