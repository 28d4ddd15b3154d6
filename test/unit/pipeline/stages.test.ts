/**
 * The chat pipeline's stages, each without a server (src/core/chat/pipeline): the chain's order, the attempt
 * loop (streaming and not), the record written once per request, validation and planning.
 */
import { describe, expect, it } from "vitest";
import pino from "pino";
import { ConnectError } from "@connectrpc/connect";
import { compose, newCall, type Attempt, type ChatCall, type ChatOutcome, type ChatStage } from "../../../src/core/chat/pipeline/stage.js";
import { createExecuteStage } from "../../../src/core/chat/pipeline/execute.js";
import { createRecordStage } from "../../../src/core/chat/pipeline/record.js";
import { createValidateStage } from "../../../src/core/chat/pipeline/validate.js";
import { createPlanStage } from "../../../src/core/chat/pipeline/plan.js";
import { createCatalog } from "../../../src/core/catalog/catalog.js";
import { BUILTIN_CATALOG } from "../../../src/core/catalog/builtin-catalog.js";
import { ProviderRegistry, UpstreamError, type ChatChunk, type ChatCompletion, type ProviderAdapter, type UpstreamCall } from "../../../src/core/chat/providers/index.js";
import type { GenerationRecord } from "../../../src/core/chat/seams.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest, StreamEvent } from "../../../src/core/chat/model.js";
import { errorDetailOf } from "../../../src/lib/service-error.js";
import { createMemoryHealthMemory } from "../../../src/lib/health-memory.js";
import { credentialKey } from "../../../src/core/chat/routing/health.js";
import { createMemorySessionAffinity } from "../../../src/lib/session-affinity.js";

const caller: Caller = {
  keyId: "k1", keyHash: "h".repeat(64), keyLabel: "k", organizationId: "o1", workspaceId: "w1", userId: "u1",
  isManagement: false, internsProgramme: false,
};
const logger = pino({ level: "silent" });
const request = (over: Record<string, unknown> = {}) =>
  ({ model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }], ...over }) as unknown as CanonicalRequest;

type Behaviour = { fail?: UpstreamError; chunks?: ChatChunk[]; breakAfter?: number };

function fakeAdapter(behaviour: Behaviour, log: string[] = []): ProviderAdapter {
  return {
    format: "openai",
    upstreamBody: (call) => ({ model: call.model }),
    async complete(call): Promise<ChatCompletion> {
      log.push(`complete:${call.apiKey}`);
      if (behaviour.fail) throw behaviour.fail;
      return { id: "up", object: "chat.completion", created: 1, model: call.model, choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }], usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } };
    },
    async *stream(call): AsyncGenerator<ChatChunk> {
      log.push(`stream:${call.apiKey}`);
      try {
        if (behaviour.fail) throw behaviour.fail;
        let i = 0;
        for (const c of behaviour.chunks ?? []) {
          if (behaviour.breakAfter !== undefined && i++ === behaviour.breakAfter) throw new UpstreamError(0, "upstream stream broke: reset", true);
          yield c;
        }
      } finally {
        log.push(`closed:${call.apiKey}`);
      }
    },
  };
}

const chunk = (content: string, finish: ChatChunk["choices"][number]["finish_reason"] = null): ChatChunk => ({
  id: "up", object: "chat.completion.chunk", created: 1, model: "gpt-4o",
  choices: [{ index: 0, delta: { content }, finish_reason: finish }],
});

function attempt(adapter: ProviderAdapter, key: string, signal: AbortSignal, body = request()): Attempt {
  const call: UpstreamCall = { model: "gpt-4o", body, baseUrl: "http://127.0.0.1:1", apiKey: key, signal };
  return { provider: "openai", requestedModel: "openai/gpt-4o", credentialId: `cred-${key}`, credentialSource: "byok", adapter, call };
}

/** A stage that puts the given attempts on the call (in place of the plan stage). */
const given = (make: (call: ChatCall) => Attempt[]): ChatStage => ({
  name: "given",
  run(call, next) {
    call.attempts = make(call);
    return next();
  },
});

function chain(make: (call: ChatCall) => Attempt[]) {
  const records: GenerationRecord[] = [];
  const run = compose([createRecordStage({ generations: { record: (r) => records.push(r) } }), given(make), createExecuteStage({ logger })]);
  return { run, records };
}

async function* none(): AsyncGenerator<StreamEvent> {}

async function collect(outcome: ChatOutcome): Promise<StreamEvent[]> {
  if (outcome.kind !== "stream") throw new Error("expected a stream");
  const out: StreamEvent[] = [];
  for await (const e of outcome.events) out.push(e);
  return out;
}

describe("compose", () => {
  it("runs the stages in order, each around the rest of the chain", async () => {
    const seen: string[] = [];
    const stage = (name: string): ChatStage => ({
      name,
      async run(_call, next) {
        seen.push(`>${name}`);
        const out = await next();
        seen.push(`<${name}`);
        return out;
      },
    });
    const answer: ChatStage = {
      name: "answer",
      run: async () => {
        seen.push("answer");
        return { kind: "stream", events: none() };
      },
    };
    await compose([stage("a"), stage("b"), answer])(newCall(caller, new AbortController().signal, true, request()));
    expect(seen).toEqual([">a", ">b", "answer", "<b", "<a"]);
  });

  it("a chain whose last stage calls next() fails instead of hanging", async () => {
    const pass: ChatStage = { name: "pass", run: (_c, next) => next() };
    await expect(compose([pass])(newCall(caller, new AbortController().signal, false, request()))).rejects.toThrow(/without an answer/);
  });
});

describe("execute + record, non-streaming", () => {
  it("moves on after a retryable failure, stamps the generation id and provider, records once", async () => {
    const log: string[] = [];
    const { run, records } = chain((call) => [
      attempt(fakeAdapter({ fail: new UpstreamError(503, "upstream returned 503: busy", true) }, log), "k-a", call.signal),
      attempt(fakeAdapter({}, log), "k-b", call.signal),
    ]);
    const call = newCall(caller, new AbortController().signal, false, request());
    const outcome = await run(call);
    expect(outcome.kind).toBe("completion");
    if (outcome.kind !== "completion") return;
    expect(outcome.completion.id).toBe(call.track.id);
    expect(outcome.completion.provider).toBe("openai");
    expect(log).toEqual(["complete:k-a", "complete:k-b"]);
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ status: "success", attempts: 2, credentialId: "cred-k-b", totalTokens: 3, streamed: false });
  });

  it("stops at a non-retryable failure and records the error", async () => {
    const log: string[] = [];
    const { run, records } = chain((call) => [
      attempt(fakeAdapter({ fail: new UpstreamError(400, "upstream returned 400: bad", false) }, log), "k-a", call.signal),
      attempt(fakeAdapter({}, log), "k-b", call.signal),
    ]);
    const err = await run(newCall(caller, new AbortController().signal, false, request())).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect(errorDetailOf(err as ConnectError)?.reason).toBe("upstream_failed");
    expect(log).toEqual(["complete:k-a"]);
    expect(records).toMatchObject([{ status: "error", errorCode: 502, attempts: 1 }]);
  });
});

describe("execute + the health memory", () => {
  it("a 429 without a wait cools the credential for 1 s (the next request skips it: 429 with Retry-After 1); a success resets", async () => {
    let clock = Date.now();
    const health = createMemoryHealthMemory({ now: () => clock });
    const log: string[] = [];
    const limited = { fail: new UpstreamError(429, "upstream returned 429: slow down", true) as UpstreamError | undefined };
    const run = compose([given((call) => [attempt(fakeAdapter(limited, log), "k-a", call.signal)]), createExecuteStage({ logger, health })]);
    const ask = () => run(newCall(caller, new AbortController().signal, false, request())).catch((e: unknown) => e as ConnectError);
    const first = await ask();
    expect(errorDetailOf(first as ConnectError)).toMatchObject({ reason: "rate_limited", retryAfterSeconds: 1 });
    const end = health.coolingUntil(credentialKey("cred-k-a"))!;
    expect(end - clock).toBe(1_000);
    const second = await ask(); // inside the cool-down: not called
    expect(errorDetailOf(second as ConnectError)).toMatchObject({ reason: "rate_limited", retryAfterSeconds: 1 });
    expect(log).toEqual(["complete:k-a"]);
    // Once it ended, the next call is made; its success forgets the failure (the next 429 would cool 1 s again, not 2 s).
    limited.fail = undefined;
    clock = end;
    expect((await ask()) as ChatOutcome).toMatchObject({ kind: "completion" });
    expect(health.size).toBe(0);
    expect(log).toEqual(["complete:k-a", "complete:k-a"]);
  });

  it("a 5xx cools the endpoint, not the credential: the next request still calls it", async () => {
    const health = createMemoryHealthMemory();
    const log: string[] = [];
    const run = compose([
      given((call) => [{ ...attempt(fakeAdapter({ fail: new UpstreamError(502, "upstream returned 502", true) }, log), "k-a", call.signal), healthKey: "endpoint:openai:gpt-4o" }]),
      createExecuteStage({ logger, health }),
    ]);
    for (let i = 0; i < 2; i++) await run(newCall(caller, new AbortController().signal, false, request())).catch(() => undefined);
    expect(log).toEqual(["complete:k-a", "complete:k-a"]);
    expect(health.coolingUntil("endpoint:openai:gpt-4o")).toBeDefined();
    expect(health.coolingUntil(credentialKey("cred-k-a"))).toBeUndefined();
  });
});

describe("execute + record, streaming", () => {
  it("falls back before the first byte, relays every event stamped, and records after the last one", async () => {
    const log: string[] = [];
    const { run, records } = chain((call) => [
      attempt(fakeAdapter({ fail: new UpstreamError(429, "upstream returned 429: slow down", true) }, log), "k-a", call.signal),
      attempt(fakeAdapter({ chunks: [chunk("a"), chunk("b", "stop")] }, log), "k-b", call.signal),
    ]);
    const call = newCall(caller, new AbortController().signal, true, request());
    const outcome = await run(call);
    expect(records).toHaveLength(0); // not before the stream ends
    const events = await collect(outcome);
    expect(events.map((e) => [e.id, e.provider, e.choices[0]?.delta.content])).toEqual([[call.track.id, "openai", "a"], [call.track.id, "openai", "b"]]);
    expect(records).toMatchObject([{ status: "success", attempts: 2, finishReason: "stop", streamed: true }]);
    expect(records[0]!.timeToFirstTokenMs).not.toBeNull();
  });

  it("an error after the first event ends the stream with an error chunk", async () => {
    const { run, records } = chain((call) => [attempt(fakeAdapter({ chunks: [chunk("a"), chunk("b")], breakAfter: 1 }), "k-a", call.signal)]);
    const events = await collect(await run(newCall(caller, new AbortController().signal, true, request())));
    expect(events).toHaveLength(2);
    expect(events[1]).toMatchObject({ choices: [{ finish_reason: "error" }], error: { code: 502 } });
    expect(records).toMatchObject([{ status: "error", errorCode: 502, finishReason: "error" }]);
  });

  it("a consumer that stops reading closes the upstream stream and records cancelled", async () => {
    const log: string[] = [];
    const { run, records } = chain((call) => [attempt(fakeAdapter({ chunks: [chunk("a"), chunk("b"), chunk("c", "stop")] }, log), "k-a", call.signal)]);
    const outcome = await run(newCall(caller, new AbortController().signal, true, request()));
    if (outcome.kind !== "stream") throw new Error("expected a stream");
    for await (const e of outcome.events) {
      expect(e.choices[0]?.delta.content).toBe("a");
      break;
    }
    expect(log).toEqual(["stream:k-a", "closed:k-a"]);
    expect(records).toMatchObject([{ status: "cancelled" }]);
  });

  it("an error before any stage answers is recorded with its status and rethrown", async () => {
    const records: GenerationRecord[] = [];
    const run = compose([createRecordStage({ generations: { record: (r) => records.push(r) } }), createValidateStage({ brand: "service" }), createExecuteStage({ logger })]);
    const err = await run(newCall(caller, new AbortController().signal, true, request({ temperature: "hot" }))).catch((e: unknown) => e);
    expect(errorDetailOf(err as ConnectError)).toMatchObject({ reason: "bad_request", field: "temperature" });
    expect(records).toMatchObject([{ status: "error", errorCode: 400 }]);
  });
});

describe("plan", () => {
  const store = (keys: Record<string, string[]>) => ({
    forProvider: async (_w: string, provider: string) =>
      (keys[provider] ?? []).map((apiKey, i) => ({
        id: `${provider}-${i}`, provider, disabled: false, allowedModels: null, allowedApiKeyHashes: null, allowedUserIds: null,
        isRequired: false, isFallback: false, isByokOnly: false, sortOrder: i, createdAt: new Date(2026, 0, 1), apiKey,
      })),
    listAll: async () => [],
  });

  it("plans model then fallbacks, each with the workspace's credentials in order", async () => {
    const plan = createPlanStage({ credentials: store({ openai: ["o1", "o2"], anthropic: ["a1"] }), providers: new ProviderRegistry(), maxAttempts: 10, catalog: createCatalog(BUILTIN_CATALOG) });
    const call = newCall(caller, new AbortController().signal, false, request({ models: ["anthropic/claude-sonnet-4", "openai/gpt-4o"] }));
    await plan.run(call, async () => ({ kind: "stream", events: none() }));
    expect(call.attempts.map((a) => [a.requestedModel, a.call.apiKey, a.call.model])).toEqual([
      ["openai/gpt-4o", "o1", "gpt-4o"],
      ["openai/gpt-4o", "o2", "gpt-4o"],
      // A canonical slug: the catalog endpoint's own model id goes upstream.
      ["anthropic/claude-sonnet-4", "a1", "claude-sonnet-4-20250514"],
    ]);
    expect(call.track.requestedModel).toBe("openai/gpt-4o");
  });

  it("no usable credential is no_credential", async () => {
    const plan = createPlanStage({ credentials: store({}), providers: new ProviderRegistry(), maxAttempts: 10, catalog: createCatalog(BUILTIN_CATALOG) });
    const err = await plan.run(newCall(caller, new AbortController().signal, false, request()), async () => ({ kind: "stream", events: none() })).catch((e: unknown) => e);
    expect(errorDetailOf(err as ConnectError)?.reason).toBe("no_credential");
  });
});

describe("plan: sticky sessions", () => {
  const store = (keys: string[]) => ({
    forProvider: async (_w: string, provider: string) =>
      keys.map((apiKey, i) => ({
        id: `${provider}-${i}`, provider, disabled: false, allowedModels: null, allowedApiKeyHashes: null, allowedUserIds: null,
        isRequired: false, isFallback: false, isByokOnly: false, sortOrder: i, createdAt: new Date(2026, 0, 1), apiKey,
      })),
    listAll: async () => [],
  });

  it("a session's pin goes first while healthy; a cooling endpoint breaks it and what serves is pinned", async () => {
    const health = createMemoryHealthMemory();
    const affinity = createMemorySessionAffinity({ ttlMs: 60_000 });
    const plan = createPlanStage({ credentials: store(["o1", "o2", "o3"]), providers: new ProviderRegistry(), maxAttempts: 2, catalog: createCatalog(BUILTIN_CATALOG), health, affinity });
    const serve = (call: ChatCall, index: number) => async () => {
      const a = call.attempts[index]!;
      Object.assign(call.track, { provider: a.provider, model: a.requestedModel, credentialId: a.credentialId });
      return { kind: "stream", events: none() } as ChatOutcome;
    };
    const session = (id: string) => newCall(caller, new AbortController().signal, false, request({ model: "openai/gpt-4o" }), undefined, id);
    // First request: served by its second attempt (o2), which is pinned.
    const first = session("s-1");
    await plan.run(first, serve(first, 1));
    expect(first.attempts.map((a) => a.call.apiKey)).toEqual(["o1", "o2"]);
    const again = session("s-1");
    await plan.run(again, serve(again, 0));
    expect(again.attempts.map((a) => a.call.apiKey)).toEqual(["o2", "o1"]);
    // The pin beyond maxAttempts still goes first: pin o3 through a session whose pin is set directly.
    affinity.set(`${caller.organizationId}\u0000openai/gpt-4o`, "s-2", { provider: "openai", model: "gpt-4o", credentialId: "openai-2" });
    const far = session("s-2");
    await plan.run(far, serve(far, 0));
    expect(far.attempts.map((a) => a.call.apiKey)).toEqual(["o3", "o1"]);
    expect(far.attemptsNotTried).toBe(1);
    // Another session and another organization's same session id are not pinned.
    const fresh = session("s-3");
    await plan.run(fresh, serve(fresh, 0));
    expect(fresh.attempts[0]!.call.apiKey).toBe("o1");
    // The endpoint cools: the pin no longer holds; the request is routed afresh and what serves is pinned.
    health.failed("endpoint:openai:gpt-4o");
    const cooled = session("s-1");
    await plan.run(cooled, serve(cooled, 0));
    expect(cooled.attempts.map((a) => a.call.apiKey)).toEqual(["o1", "o2"]);
    health.succeeded("endpoint:openai:gpt-4o");
    const after = session("s-1");
    await plan.run(after, serve(after, 1));
    expect(after.attempts.map((a) => a.call.apiKey)).toEqual(["o1", "o2"]);
  });
});
