/**
 * Stage "limits" without a server: a key past its bound is refused with rate_limited and Retry-After before the
 * rest of the chain runs, other keys are not affected, and the slot comes back after a completion, an error, a
 * stream's end, a stream's error, a consumer that stops reading (even before the first event) and an abort.
 */
import { describe, expect, it } from "vitest";
import { ConnectError, Code } from "@connectrpc/connect";
import { compose, newCall, type ChatOutcome, type ChatStage } from "../../../src/core/chat/pipeline/stage.js";
import { createLimitsStage } from "../../../src/core/chat/pipeline/limits.js";
import { createMemoryConcurrencyLimiter } from "../../../src/lib/concurrency-limiter.js";
import { errorDetailOf } from "../../../src/lib/service-error.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest, StreamEvent } from "../../../src/core/chat/model.js";

const callerOf = (keyHash: string): Caller => ({
  keyId: keyHash, keyHash, keyLabel: "k", organizationId: "o1", workspaceId: "w1", userId: "u1", isManagement: false, internsProgramme: false,
});
const request = { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }] } as unknown as CanonicalRequest;
const event = { id: "g", object: "chat.completion.chunk", created: 1, model: "m", choices: [] } as unknown as StreamEvent;

function setup(answer: (streamed: boolean) => Promise<ChatOutcome>) {
  let ran = 0;
  const last: ChatStage = { name: "answer", run: (call) => (ran++, answer(call.streamed)) };
  const limiter = createMemoryConcurrencyLimiter();
  const chain = compose([createLimitsStage({ limiter, maxConcurrentPerKey: 1 }), last]);
  const run = (key = "a", streamed = false, signal = new AbortController().signal) => chain(newCall(callerOf(key), signal, streamed, request));
  /** Whether key `a` has a free slot now (takes and gives back a slot). */
  const free = async (key = "a") => {
    const slot = await limiter.acquire(key, 1);
    slot?.release();
    return slot !== null;
  };
  return { run, free, ran: () => ran };
}

async function* events(n: number, fail?: Error): AsyncGenerator<StreamEvent> {
  for (let i = 0; i < n; i++) yield event;
  if (fail) throw fail;
}

describe("limits stage", () => {
  it("refuses past the bound with rate_limited and Retry-After, before the rest of the chain; other keys are served", async () => {
    const holds: Array<() => void> = [];
    const s = setup(() => new Promise((resolve) => holds.push(() => resolve({ kind: "completion", completion: {} as never }))));
    const first = s.run("a");
    await expect.poll(() => s.ran(), { timeout: 10_000 }).toBe(1);
    const err = await s.run("a").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.ResourceExhausted);
    expect(errorDetailOf(err as ConnectError)).toMatchObject({ reason: "rate_limited", retryable: true, retryAfterSeconds: 1 });
    expect(s.ran()).toBe(1);
    const other = s.run("b");
    await expect.poll(() => s.ran(), { timeout: 10_000 }).toBe(2);
    for (const release of holds) release();
    await Promise.all([first, other]);
    expect(await s.free("a")).toBe(true);
  });

  it("releases after a completion and after an error", async () => {
    const ok = setup(async () => ({ kind: "completion", completion: {} as never }));
    await ok.run();
    expect(await ok.free()).toBe(true);
    const failing = setup(async () => {
      throw new Error("upstream");
    });
    await expect(failing.run()).rejects.toThrow("upstream");
    expect(await failing.free()).toBe(true);
  });

  it("streams: holds until the last event, and releases at the end, on an error, when the consumer stops, and before the first read", async () => {
    const s = setup(async () => ({ kind: "stream", events: events(2) }));
    const out = await s.run("a", true);
    expect(await s.free()).toBe(false);
    for await (const _ of (out as { events: AsyncIterable<StreamEvent> }).events) void _;
    expect(await s.free()).toBe(true);

    const broken = setup(async () => ({ kind: "stream", events: events(1, new Error("broke")) }));
    const b = (await broken.run("a", true)) as { events: AsyncIterable<StreamEvent> };
    await expect((async () => { for await (const _ of b.events) void _; })()).rejects.toThrow("broke");
    expect(await broken.free()).toBe(true);

    const stopped = setup(async () => ({ kind: "stream", events: events(5) }));
    const st = (await stopped.run("a", true)) as { events: AsyncIterable<StreamEvent> };
    for await (const _ of st.events) break;
    expect(await stopped.free()).toBe(true);

    const unread = setup(async () => ({ kind: "stream", events: events(5) }));
    const u = (await unread.run("a", true)) as { events: AsyncIterable<StreamEvent> };
    await u.events[Symbol.asyncIterator]().return!();
    expect(await unread.free()).toBe(true);
  });

  it("releases when the caller's signal aborts, even with the stream never read", async () => {
    const s = setup(async () => ({ kind: "stream", events: events(5) }));
    const ctl = new AbortController();
    await s.run("a", true, ctl.signal);
    expect(await s.free()).toBe(false);
    ctl.abort();
    expect(await s.free()).toBe(true);
  });

  it("0 means no bound", async () => {
    const chain = compose([
      createLimitsStage({ limiter: createMemoryConcurrencyLimiter(), maxConcurrentPerKey: 0 }),
      { name: "answer", run: () => new Promise<ChatOutcome>(() => {}) },
    ]);
    for (let i = 0; i < 100; i++) void chain(newCall(callerOf("a"), new AbortController().signal, false, request));
    const fast = compose([createLimitsStage({ limiter: createMemoryConcurrencyLimiter(), maxConcurrentPerKey: 0 }), { name: "answer", run: async () => ({ kind: "completion", completion: {} as never }) }]);
    await expect(fast(newCall(callerOf("a"), new AbortController().signal, false, request))).resolves.toMatchObject({ kind: "completion" });
  });
});
