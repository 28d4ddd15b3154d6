/**
 * The response cache without a server (docs/operations.md, "Response cache"): the key, the database store's expiry
 * with a controlled clock (on a real SQLite database), and the stage: a streamed answer reassembled and replayed,
 * what is not stored.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pino from "pino";
import { cacheKeyOf, createCacheStage } from "../../../src/core/chat/pipeline/cache.js";
import { createDatabaseResponseCache, type ResponseCacheStore } from "../../../src/core/chat/response-cache.js";
import { newCall, type ChatOutcome } from "../../../src/core/chat/pipeline/stage.js";
import { createCatalog } from "../../../src/core/catalog/catalog.js";
import { BUILTIN_CATALOG } from "../../../src/core/catalog/builtin-catalog.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest, StreamEvent } from "../../../src/core/chat/model.js";
import type { DatabaseHandle } from "../../../src/db/client.js";
import { freshSqlite } from "../../helpers/db.js";

const caller = { keyId: "k", keyHash: "h".repeat(64), keyLabel: "k", organizationId: "o", workspaceId: "w", userId: "u", isManagement: false, internsProgramme: false } as Caller;
const scope = { organizationId: "o", workspaceId: "w" };

describe("cache key", () => {
  const body = { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }], temperature: 0 };
  const key = cacheKeyOf(caller, body);
  it("is SHA-256 hex, independent of key order and of the fields that cannot change the answer", () => {
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(cacheKeyOf(caller, { temperature: 0, messages: [{ content: "hi", role: "user" }], model: "openai/gpt-4o" })).toBe(key);
    expect(cacheKeyOf(caller, { ...body, user: "u", trace: { trace_id: "t" }, metadata: { a: "b" }, session_id: "s", stream: true, stream_options: { include_usage: true }, cache: { ttl_seconds: 5 } })).toBe(key);
  });
  it("covers the organization, the workspace, the model and every other field", () => {
    expect(cacheKeyOf({ ...caller, organizationId: "o2" }, body)).not.toBe(key);
    expect(cacheKeyOf({ ...caller, workspaceId: "w2" }, body)).not.toBe(key);
    expect(cacheKeyOf(caller, { ...body, model: "openai/gpt-4o-mini" })).not.toBe(key);
    expect(cacheKeyOf(caller, { ...body, temperature: 0.1 })).not.toBe(key);
    expect(cacheKeyOf(caller, { ...body, tools: [] })).not.toBe(key);
    expect(cacheKeyOf(caller, { ...body, response_format: { type: "json_object" } })).not.toBe(key);
  });
});

describe("database store with a controlled clock", () => {
  let database: DatabaseHandle;
  let t = 1_000_000;
  let store: ResponseCacheStore;
  beforeAll(async () => {
    database = await freshSqlite();
    store = createDatabaseResponseCache({ db: database.db, now: () => t });
  });
  afterAll(async () => {
    await store?.close();
    await database?.close();
  });

  it("serves an entry until its expiry, then deletes it when read", async () => {
    await store.set("a", "v1", 1_000, scope);
    t += 999;
    expect(await store.get("a")).toBe("v1");
    t += 1;
    expect(await store.get("a")).toBeNull();
    expect(await database.db.cacheEntry.count({ where: { key: "a" } })).toBe(0);
  });

  it("a write replaces the entry and its expiry; a sweep started by a write removes expired rows", async () => {
    await store.set("b", "old", 10_000, scope);
    await store.set("b", "new", 100_000, scope);
    expect(await store.get("b")).toBe("new");
    await store.set("c", "short", 1_000, scope);
    t += 61_000;
    await store.set("d", "fresh", 1_000, scope);
    await store.close(); // waits for the sweep the write started
    const keys = (await database.db.cacheEntry.findMany({ select: { key: true }, orderBy: { key: "asc" } })).map((r) => r.key);
    expect(keys).toEqual(["b", "d"]);
  });
});

describe("cache stage", () => {
  let database: DatabaseHandle;
  let store: ResponseCacheStore;
  const catalog = createCatalog(BUILTIN_CATALOG);
  beforeAll(async () => {
    database = await freshSqlite();
    store = createDatabaseResponseCache({ db: database.db });
  });
  afterAll(async () => {
    await store?.close();
    await database?.close();
  });

  const stage = () => createCacheStage({ store, catalog, logger: pino({ level: "silent" }) });
  const request = (content: string) => ({ model: "x/y", messages: [{ role: "user", content }], cache: { ttl_seconds: 60 } }) as unknown as CanonicalRequest;
  const chunk = (delta: Record<string, unknown>, finish: string | null = null, extra: Partial<StreamEvent> = {}): StreamEvent =>
    ({ id: "g", object: "chat.completion.chunk", created: 1, model: "x/y", choices: [{ index: 0, delta, finish_reason: finish }], ...extra }) as StreamEvent;
  const usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 };
  async function drain(out: ChatOutcome): Promise<StreamEvent[]> {
    if (out.kind !== "stream") throw new Error("not a stream");
    const seen: StreamEvent[] = [];
    for await (const e of out.events) seen.push(e);
    return seen;
  }
  const upstreamStream = (events: StreamEvent[]) => async (): Promise<ChatOutcome> => ({
    kind: "stream",
    events: (async function* () {
      yield* events;
    })(),
  });
  const refuse = async (): Promise<ChatOutcome> => {
    throw new Error("the provider must not be called");
  };

  it("a streamed answer is reassembled (content, reasoning pieces by index) and served whole and as a stream", async () => {
    const events = [
      chunk({ role: "assistant", content: "" }),
      chunk({ reasoning: "Let me ", reasoning_details: [{ type: "reasoning.text", text: "Let me ", index: 0 }] }),
      chunk({ reasoning: "think", reasoning_details: [{ type: "reasoning.text", text: "think", signature: "sig", index: 0 }] }),
      chunk({ content: "Hel" }),
      chunk({ content: "lo" }),
      chunk({}, "stop"),
      { ...chunk({}), choices: [], usage },
    ];
    const miss = newCall(caller, new AbortController().signal, true, request("r1"));
    await drain(await stage().run(miss, upstreamStream(events)));
    expect(miss.track.cache).toBe("miss");
    expect(miss.request.cache).toBeUndefined(); // never sent upstream

    const whole = newCall(caller, new AbortController().signal, false, request("r1"));
    const out = await stage().run(whole, refuse);
    expect(whole.track).toMatchObject({ cache: "hit", status: "success", finishReason: "stop", usage, attempts: 0 });
    expect(out.kind === "completion" && out.completion).toMatchObject({
      id: whole.track.id,
      choices: [{ message: { role: "assistant", content: "Hello", reasoning: "Let me think", reasoning_details: [{ type: "reasoning.text", text: "Let me think", signature: "sig", index: 0 }] }, finish_reason: "stop" }],
      usage,
    });

    const streamed = newCall(caller, new AbortController().signal, true, request("r1"));
    const replay = await drain(await stage().run(streamed, refuse));
    expect(replay.map((e) => e.choices[0]?.delta ?? null)).toEqual([
      { role: "assistant", content: "" },
      { reasoning: "Let me think", reasoning_details: [{ type: "reasoning.text", text: "Let me think", signature: "sig", index: 0 }] },
      { content: "Hello" },
      {},
      null,
    ]);
    expect(replay.at(-2)!.choices[0]!.finish_reason).toBe("stop");
    expect(replay.at(-1)!.usage).toEqual(usage);
    expect(replay.every((e) => e.id === streamed.track.id)).toBe(true);
  });

  it("stores nothing from a stream that broke, was left early, ended without a finish reason or carried log probabilities", async () => {
    const broke = [chunk({ content: "Hel" }), { ...chunk({}, "error"), error: { reason: 0, code: 502, message: "x" } } as unknown as StreamEvent];
    await drain(await stage().run(newCall(caller, new AbortController().signal, true, request("r2")), upstreamStream(broke)));
    await drain(await stage().run(newCall(caller, new AbortController().signal, true, request("r3")), upstreamStream([chunk({ content: "Hel" })])));
    const left = await stage().run(newCall(caller, new AbortController().signal, true, request("r4")), upstreamStream([chunk({ content: "a" }), chunk({}, "stop")]));
    if (left.kind === "stream") {
      const it = left.events[Symbol.asyncIterator]();
      await it.next();
      await it.return?.();
    }
    const withLogprobs = [{ ...chunk({ content: "a" }), choices: [{ index: 0, delta: { content: "a" }, finish_reason: null, logprobs: { content: [] } }] } as unknown as StreamEvent, chunk({}, "stop")];
    await drain(await stage().run(newCall(caller, new AbortController().signal, true, request("r5")), upstreamStream(withLogprobs)));
    for (const r of ["r2", "r3", "r4", "r5"]) {
      const call = newCall(caller, new AbortController().signal, false, request(r));
      let called = false;
      await stage().run(call, async () => {
        called = true;
        return { kind: "completion", completion: { id: "g", object: "chat.completion", created: 1, model: "x/y", choices: [] } };
      });
      expect(called, r).toBe(true);
    }
  });

  it("without `cache` (or with ttl_seconds 0) the stage only passes the request on", async () => {
    for (const cache of [undefined, { ttl_seconds: 0 }]) {
      const call = newCall(caller, new AbortController().signal, false, { model: "x/y", messages: [], ...(cache ? { cache } : {}) } as unknown as CanonicalRequest);
      let called = 0;
      await stage().run(call, async () => {
        called++;
        return { kind: "completion", completion: { id: "g", object: "chat.completion", created: 1, model: "x/y", choices: [] } };
      });
      expect(called).toBe(1);
      expect(call.track.cache).toBeNull();
      expect(call.request.cache).toBeUndefined();
    }
  });
});
