/**
 * The attempt loop's retries and fallback (src/core/chat/pipeline/execute.ts; docs/operations.md, "Retries and
 * fallback"): which failures move on to the next candidate, the backoff before the same candidate is tried
 * again (a controlled random source and sleep, no wall clock), the stall and slow-stream probes before the first
 * byte, never a switch after it, and the attempts log the generation records.
 */
import { describe, expect, it } from "vitest";
import pino from "pino";
import { ConnectError } from "@connectrpc/connect";
import { compose, newCall, type Attempt, type AttemptLogEntry, type ChatCall, type ChatOutcome, type ChatStage } from "../../../src/core/chat/pipeline/stage.js";
import { backoffMs, createExecuteStage, DEFAULT_CHAT_TIMEOUTS, type ChatTimeouts } from "../../../src/core/chat/pipeline/execute.js";
import { createRecordStage } from "../../../src/core/chat/pipeline/record.js";
import { classifyFailure, UpstreamError, type ChatChunk, type ChatCompletion, type ProviderAdapter, type UpstreamCall } from "../../../src/core/chat/providers/index.js";
import type { GenerationRecord } from "../../../src/core/chat/seams.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest, StreamEvent } from "../../../src/core/chat/model.js";
import { errorDetailOf } from "../../../src/lib/service-error.js";
import { createMemoryHealthMemory } from "../../../src/lib/health-memory.js";

const caller: Caller = {
  keyId: "k1", keyHash: "h".repeat(64), keyLabel: "k", organizationId: "o1", workspaceId: "w1", userId: "u1",
  isManagement: false, internsProgramme: false,
};
const logger = pino({ level: "silent" });
const request = () => ({ model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }] }) as unknown as CanonicalRequest;

const chunk = (content: string, finish: ChatChunk["choices"][number]["finish_reason"] = null): ChatChunk => ({
  id: "up", object: "chat.completion.chunk", created: 1, model: "gpt-4o",
  choices: [{ index: 0, delta: { content }, finish_reason: finish }],
});

/** Resolves when the call's signal aborts (a provider that never sends the next event). */
const stall = (signal: AbortSignal) =>
  new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));

type Step = UpstreamError | "ok" | "stall" | { chunks: ChatChunk[]; stallAfter?: number; breakAfter?: number };

/** An adapter whose n-th call does `steps[n]` (the last step repeats). */
function adapter(steps: Step[], log: string[]): ProviderAdapter {
  let n = 0;
  const step = () => steps[Math.min(n++, steps.length - 1)]!;
  return {
    format: "openai",
    upstreamBody: (call) => ({ model: call.model }),
    async complete(call): Promise<ChatCompletion> {
      log.push(call.apiKey);
      const s = step();
      if (s instanceof UpstreamError) throw s;
      if (s === "stall") return stall(call.signal);
      return { id: "up", object: "chat.completion", created: 1, model: call.model, choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }] };
    },
    async *stream(call: UpstreamCall): AsyncGenerator<ChatChunk> {
      log.push(call.apiKey);
      const s = step();
      if (s instanceof UpstreamError) throw s;
      if (s === "stall") return yield* [await stall(call.signal)];
      if (s === "ok") {
        yield chunk("ok", "stop");
        return;
      }
      let i = 0;
      for (const c of s.chunks) {
        if (s.stallAfter !== undefined && i === s.stallAfter) await stall(call.signal);
        if (s.breakAfter !== undefined && i === s.breakAfter) throw new UpstreamError(0, "upstream stream broke: reset", true);
        i++;
        yield c;
      }
    },
  };
}

function attempt(a: ProviderAdapter, key: string, signal: AbortSignal, provider = "openai"): Attempt {
  const call: UpstreamCall = { model: "gpt-4o", body: request(), baseUrl: "http://127.0.0.1:1", apiKey: key, signal };
  return { provider, requestedModel: `${provider}/gpt-4o`, credentialId: `cred-${key}`, credentialSource: key.startsWith("s") ? "shared" : "byok", adapter: a, call };
}

const given = (make: (call: ChatCall) => Attempt[]): ChatStage => ({
  name: "given",
  run(call, next) {
    call.attempts = make(call);
    return next();
  },
});

interface Setup {
  timeouts?: Partial<ChatTimeouts>;
  random?: () => number;
  budgetMs?: number;
  streamed?: boolean;
}

/** The record and execute stages over the given adapters (keys in order); the sleeps the backoff asked for. */
function run(adapters: Array<[string, ProviderAdapter]>, setup: Setup = {}) {
  const records: GenerationRecord[] = [];
  const slept: number[] = [];
  const stages = compose([
    createRecordStage({ generations: { record: (r) => records.push(r) } }),
    given((call) => adapters.map(([key, a]) => attempt(a, key, call.signal, key.includes("anthropic") ? "anthropic" : "openai"))),
    createExecuteStage({
      logger,
      health: createMemoryHealthMemory(),
      timeouts: { ...DEFAULT_CHAT_TIMEOUTS, ...setup.timeouts },
      random: setup.random ?? (() => 0.5),
      sleep: async (ms) => {
        slept.push(ms);
      },
    }),
  ]);
  const result = stages(newCall(caller, new AbortController().signal, setup.streamed ?? false, request(), setup.budgetMs)).catch((e: unknown) => e as ConnectError);
  return { result, records, slept };
}

async function collect(outcome: ChatOutcome | ConnectError): Promise<StreamEvent[]> {
  if (outcome instanceof Error || outcome.kind !== "stream") throw outcome instanceof Error ? outcome : new Error("expected a stream");
  const out: StreamEvent[] = [];
  for await (const e of outcome.events) out.push(e);
  return out;
}

const logOf = (r: GenerationRecord): AttemptLogEntry[] => JSON.parse(r.attemptsLog ?? "[]") as AttemptLogEntry[];
const reasons = (r: GenerationRecord) => logOf(r).map((e) => `${e.provider}:${e.reason}`);

describe("classifyFailure: each adapter's error shapes", () => {
  it("reads context length, content filter and model unavailable; a plain 400 is a client error", () => {
    // OpenAI-compatible
    expect(classifyFailure(400, { error: { message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.", type: "invalid_request_error", param: "messages", code: "context_length_exceeded" } }, "")).toBe("context_length");
    expect(classifyFailure(400, { error: { message: "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.", code: "content_filter" } }, "")).toBe("content_filter");
    expect(classifyFailure(400, { error: { message: "Your request was rejected as a result of our safety system.", code: "content_policy_violation" } }, "")).toBe("content_filter");
    expect(classifyFailure(404, { error: { message: "The model `gpt-9` does not exist or you do not have access to it.", code: "model_not_found" } }, "")).toBe("model_unavailable");
    expect(classifyFailure(400, { error: { message: "'messages' must contain at least one message", type: "invalid_request_error", code: null } }, "")).toBe("client_error");
    // Anthropic
    expect(classifyFailure(400, { type: "error", error: { type: "invalid_request_error", message: "prompt is too long: 208310 tokens > 200000 maximum" } }, "")).toBe("context_length");
    expect(classifyFailure(404, { type: "error", error: { type: "not_found_error", message: "model: claude-9" } }, "")).toBe("model_unavailable");
    expect(classifyFailure(400, { type: "error", error: { type: "invalid_request_error", message: "max_tokens: Field required" } }, "")).toBe("client_error");
    expect(classifyFailure(413, { type: "error", error: { type: "request_too_large", message: "Request exceeds the maximum allowed number of bytes." } }, "")).toBe("context_length");
    // Gemini
    expect(classifyFailure(400, { error: { code: 400, message: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", status: "INVALID_ARGUMENT" } }, "")).toBe("context_length");
    expect(classifyFailure(404, { error: { code: 404, message: "models/gemini-9 is not found for API version v1beta", status: "NOT_FOUND" } }, "")).toBe("model_unavailable");
    expect(classifyFailure(400, { error: { code: 400, message: "Invalid JSON payload received.", status: "INVALID_ARGUMENT" } }, "")).toBe("client_error");
    // Status alone
    expect(classifyFailure(429, undefined, "")).toBe("rate_limited");
    expect(classifyFailure(503, undefined, "")).toBe("outage");
    expect(classifyFailure(0, undefined, "upstream connection failed: ECONNREFUSED")).toBe("outage");
    expect(classifyFailure(0, undefined, "", true)).toBe("timeout");
    expect(classifyFailure(401, { error: { message: "Incorrect API key provided" } }, "")).toBe("auth_failed");
  });

  it("a fallback reason moves on although the status is not retryable", () => {
    const ctx = new UpstreamError(400, "upstream returned 400: prompt is too long", false, { type: "error", error: { type: "invalid_request_error", message: "prompt is too long: 3 tokens > 2 maximum" } });
    expect([ctx.retryable, ctx.reason, ctx.fallback]).toEqual([false, "context_length", true]);
    const bad = new UpstreamError(400, "upstream returned 400: bad", false, { error: { message: "bad" } });
    expect([bad.reason, bad.fallback]).toEqual(["client_error", false]);
  });
});

describe("fallback and the attempts log", () => {
  it("moves on at once past a 429 with Retry-After, a context-length error and a missing model, and records every attempt", async () => {
    const log: string[] = [];
    const { result, records, slept } = run([
      ["k-a", adapter([new UpstreamError(429, "upstream returned 429: slow down", true, undefined, { retryAfterMs: 7_000 })], log)],
      ["k-b", adapter([new UpstreamError(400, "upstream returned 400", false, { error: { code: "context_length_exceeded", message: "maximum context length" } })], log)],
      ["s-anthropic", adapter([new UpstreamError(404, "upstream returned 404", false, { type: "error", error: { type: "not_found_error", message: "model: x" } })], log)],
      ["k-d", adapter(["ok"], log)],
    ]);
    expect(await result).toMatchObject({ kind: "completion" });
    expect(log).toEqual(["k-a", "k-b", "s-anthropic", "k-d"]);
    expect(slept).toEqual([]); // the next candidate at once
    const entries = logOf(records[0]!);
    expect(entries.map((e) => [e.provider, e.credential_source, e.status, e.reason])).toEqual([
      ["openai", "byok", 429, "rate_limited"],
      ["openai", "byok", 400, "context_length"],
      ["anthropic", "shared", 404, "model_unavailable"],
      ["openai", "byok", 200, "served"],
    ]);
    expect(entries[0]!.retry_after_ms).toBe(7_000);
    for (const e of entries) expect(Number.isInteger(e.duration_ms)).toBe(true);
    expect(records[0]!.attemptsLog).not.toContain("cred-"); // the credential's kind, never its id
  });

  it("a plain 400 ends the loop: the next candidate is not tried", async () => {
    const log: string[] = [];
    const { result, records } = run([
      ["k-a", adapter([new UpstreamError(400, "upstream returned 400: bad", false, { error: { message: "'temperature' must be at most 2" } })], log)],
      ["k-b", adapter(["ok"], log)],
    ]);
    expect(errorDetailOf((await result) as ConnectError)).toMatchObject({ reason: "upstream_failed" });
    expect(log).toEqual(["k-a"]);
    expect(reasons(records[0]!)).toEqual(["openai:client_error"]);
  });
});

describe("retrying the same candidate", () => {
  it("after every candidate failed with an outage, tries them again after a full-jitter backoff (growing per round)", async () => {
    const log: string[] = [];
    const { result, records, slept } = run(
      [
        ["k-a", adapter([new UpstreamError(502, "upstream returned 502", true), new UpstreamError(503, "upstream returned 503", true), "ok"], log)],
        ["k-b", adapter([new UpstreamError(0, "upstream sent no response within 1 s", true, undefined, { timedOut: true })], log)],
      ],
      { timeouts: { retries: 2, retryBaseMs: 100, retryMaxMs: 1_000 }, random: () => 0.5 },
    );
    expect(await result).toMatchObject({ kind: "completion" });
    expect(log).toEqual(["k-a", "k-b", "k-a", "k-b", "k-a"]);
    expect(slept).toEqual([50, 100]); // 0.5 × 100 · 2⁰, then 0.5 × 100 · 2¹
    expect(logOf(records[0]!).map((e) => [e.reason, e.backoff_ms ?? null])).toEqual([
      ["outage", null], ["timeout", null], ["outage", 50], ["timeout", null], ["served", 100],
    ]);
  });

  it("bounds the backoff by min(max, base · 2^round), never beyond", () => {
    const top = () => 0.999999;
    expect(backoffMs(0, 250, 4_000, top)).toBeLessThan(250);
    expect(backoffMs(3, 250, 4_000, top)).toBeLessThan(2_000);
    expect(backoffMs(10, 250, 4_000, top)).toBeLessThan(4_000);
    expect(backoffMs(10, 250, 4_000, () => 0)).toBe(0);
  });

  it("does not retry a rate-limited or content-filtered candidate, and not at all with retries 0", async () => {
    const log: string[] = [];
    const { result, slept } = run(
      [
        ["k-a", adapter([new UpstreamError(429, "upstream returned 429", true)], log)],
        ["k-b", adapter([new UpstreamError(400, "upstream returned 400", false, { error: { code: "content_filter", message: "filtered" } })], log)],
      ],
      { timeouts: { retries: 3 } },
    );
    expect(errorDetailOf((await result) as ConnectError)).toBeDefined();
    expect(log).toEqual(["k-a", "k-b"]);
    expect(slept).toEqual([]);
    const none: string[] = [];
    const zero = run([["k-a", adapter([new UpstreamError(502, "upstream returned 502", true), "ok"], none)]]);
    expect(errorDetailOf((await zero.result) as ConnectError)).toMatchObject({ reason: "upstream_failed" });
    expect(none).toEqual(["k-a"]);
  });

  it("skips a backoff that would end past the request's budget", async () => {
    const log: string[] = [];
    const { result, slept } = run([["k-a", adapter([new UpstreamError(502, "upstream returned 502", true), "ok"], log)]], {
      timeouts: { retries: 1, retryBaseMs: 60_000, retryMaxMs: 60_000 },
      random: () => 0.99,
      budgetMs: 5_000,
    });
    expect(errorDetailOf((await result) as ConnectError)).toMatchObject({ reason: "upstream_failed" });
    expect(log).toEqual(["k-a"]);
    expect(slept).toEqual([]);
  });
});

describe("stream safety", () => {
  it("abandons a provider that sent its headers but no event within the first-byte limit", async () => {
    const log: string[] = [];
    const { result, records } = run([["k-a", adapter(["stall"], log)], ["k-b", adapter(["ok"], log)]], { streamed: true, timeouts: { firstByteMs: 50 } });
    const events = await collect(await result);
    expect(events.map((e) => (e as ChatChunk).choices[0]?.delta.content)).toEqual(["ok"]);
    expect(events.every((e) => (e as { provider?: string }).provider === "openai")).toBe(true);
    expect(log).toEqual(["k-a", "k-b"]);
    expect(reasons(records[0]!)).toEqual(["openai:timeout", "openai:served"]);
  });

  it("abandons a stream below the bytes-per-second floor over the probe; the caller sees only the next one", async () => {
    const log: string[] = [];
    const { result, records } = run(
      [
        ["k-a", adapter([{ chunks: [chunk("a"), chunk("b"), chunk("c", "stop")], stallAfter: 1 }], log)],
        ["k-b", adapter([{ chunks: [chunk("0123456789"), chunk("more", "stop")] }], log)],
      ],
      { streamed: true, timeouts: { streamFloorBytesPerSecond: 50, streamProbeMs: 100 } }, // 5 bytes within 100 ms
    );
    const events = await collect(await result);
    expect(events.map((e) => (e as ChatChunk).choices[0]?.delta.content)).toEqual(["0123456789", "more"]);
    expect(log).toEqual(["k-a", "k-b"]);
    expect(reasons(records[0]!)).toEqual(["openai:slow_stream", "openai:served"]);
  });

  it("relays a stream that reaches the floor or ends during the probe, events in order", async () => {
    const log: string[] = [];
    const { result } = run([["k-a", adapter([{ chunks: [chunk("a"), chunk("b"), chunk("c", "stop")] }], log)]], {
      streamed: true,
      timeouts: { streamFloorBytesPerSecond: 1_000_000, streamProbeMs: 5_000 },
    });
    const events = await collect(await result);
    expect(events.map((e) => (e as ChatChunk).choices[0]?.delta.content)).toEqual(["a", "b", "c"]);
  });

  it("never switches after the first byte was sent: a break ends the stream with an error chunk", async () => {
    const log: string[] = [];
    const { result, records } = run(
      [["k-a", adapter([{ chunks: [chunk("a"), chunk("b")], breakAfter: 1 }], log)], ["k-b", adapter(["ok"], log)]],
      { streamed: true, timeouts: { retries: 2 } },
    );
    const events = await collect(await result);
    expect(events.map((e) => (e as ChatChunk).choices[0]?.finish_reason)).toEqual([null, "error"]);
    expect(log).toEqual(["k-a"]);
    expect(reasons(records[0]!)).toEqual(["openai:served"]);
    expect(records[0]!.status).toBe("error");
  });
});
