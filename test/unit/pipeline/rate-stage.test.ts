/**
 * Stage "rate" without a server (src/core/chat/pipeline/rate.ts), with the in-process limiter
 * (src/lib/chat-rate-limiter.ts): requests and tokens per minute of a key and of its workspace. Over a bound the
 * request is refused with rate_limited, Retry-After and a message naming the bound, before the rest of the chain;
 * an answer's tokens count once known (a completion, a failure, a stream's end, a consumer that stops reading).
 */
import { afterEach, describe, expect, it } from "vitest";
import { ConnectError, Code } from "@connectrpc/connect";
import { compose, newCall, type ChatCall, type ChatOutcome, type ChatStage } from "../../../src/core/chat/pipeline/stage.js";
import { createRateStage } from "../../../src/core/chat/pipeline/rate.js";
import { createChatRateLimiter, type ChatRateLimiter } from "../../../src/lib/chat-rate-limiter.js";
import { errorDetailOf } from "../../../src/lib/service-error.js";
import type { Caller, CallerLimits } from "../../../src/core/auth.js";
import type { CanonicalRequest, StreamEvent } from "../../../src/core/chat/model.js";

const request = { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }] } as unknown as CanonicalRequest;
const event = { id: "g", object: "chat.completion.chunk", created: 1, model: "m", choices: [] } as unknown as StreamEvent;
const none: CallerLimits = { keySpend: false, workspaceSpend: false, keyRpm: null, keyTpm: null, workspaceRpm: null, workspaceTpm: null };

async function* events(n: number): AsyncGenerator<StreamEvent> {
  for (let i = 0; i < n; i++) yield event;
}

describe("rate stage", () => {
  let limiter: ChatRateLimiter;
  afterEach(async () => limiter?.close());

  /**
   * The stage over a rest of the chain that answers with `answer` and sets the usage to `tokens`. `admits` counts
   * the limiter's admissions (the stage asked it), `ran` the requests the rest of the chain got.
   */
  function setup(answer: (call: ChatCall) => Promise<ChatOutcome> = async () => ({ kind: "completion", completion: {} as never }), tokens = 0) {
    limiter = createChatRateLimiter({});
    let admits = 0;
    const counting: ChatRateLimiter = { ...limiter, admit: (b) => (admits++, limiter.admit(b)) };
    let ran = 0;
    const rest: ChatStage = {
      name: "rest",
      run(call) {
        ran++;
        call.track.usage = { prompt_tokens: tokens - 1, completion_tokens: 1, total_tokens: tokens };
        return answer(call);
      },
    };
    const chain = compose([createRateStage({ limiter: counting }), rest]);
    const run = (limits: Partial<CallerLimits> | undefined, keyId = "k1", workspaceId = "w1") => {
      const caller: Caller = {
        keyId, keyHash: keyId, keyLabel: "k", organizationId: "o1", workspaceId, userId: "u1", isManagement: false, internsProgramme: false,
        ...(limits ? { limits: { ...none, ...limits } } : {}),
      };
      return chain(newCall(caller, new AbortController().signal, false, request));
    };
    return { run, ran: () => ran, admits: () => admits };
  }
  const refusal = async (p: Promise<unknown>) => {
    const err = await p.then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.ResourceExhausted);
    return { message: (err as ConnectError).rawMessage, detail: errorDetailOf(err as ConnectError) };
  };

  it("a caller without bounds is passed on without asking the limiter", async () => {
    const s = setup();
    await s.run(undefined);
    await s.run({ keySpend: true });
    expect(s.ran()).toBe(2);
    expect(s.admits()).toBe(0);
  });

  it("requests per minute of a key: past the bound, rate_limited with Retry-After naming the bound; another key is served", async () => {
    const s = setup();
    await s.run({ keyRpm: 2 });
    await s.run({ keyRpm: 2 });
    const r = await refusal(s.run({ keyRpm: 2 }));
    expect(r.message).toMatch(/^Request rate limit of this API key reached \(2 requests per minute\); retry after \d+ s$/);
    expect(r.detail).toMatchObject({ reason: "rate_limited", retryable: true });
    expect(r.detail!.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(r.detail!.retryAfterSeconds).toBeLessThanOrEqual(60);
    expect(s.ran()).toBe(2);
    await s.run({ keyRpm: 2 }, "k2");
    expect(s.ran()).toBe(3);
  });

  it("requests per minute of a workspace are shared by its keys and name the workspace", async () => {
    const s = setup();
    await s.run({ workspaceRpm: 1 }, "k1", "w1");
    const r = await refusal(s.run({ workspaceRpm: 1 }, "k2", "w1"));
    expect(r.message).toMatch(/^Request rate limit of this workspace reached \(1 requests per minute\)/);
    await s.run({ workspaceRpm: 1 }, "k3", "w2");
    expect(s.ran()).toBe(2);
  });

  it("tokens per minute: a completion's tokens count, and the next request is refused once the bound is reached", async () => {
    const s = setup(undefined, 60);
    await s.run({ keyTpm: 100 });
    await s.run({ keyTpm: 100 }); // 60 tokens so far: under the bound
    const r = await refusal(s.run({ keyTpm: 100 }));
    expect(r.message).toMatch(/^Token rate limit of this API key reached \(100 tokens per minute\)/);
    expect(s.ran()).toBe(2);
  });

  it("tokens per minute: a failed request's tokens count too, and the failure goes on unchanged", async () => {
    const s = setup(async () => {
      throw new Error("upstream broke");
    }, 100);
    await expect(s.run({ workspaceTpm: 100 })).rejects.toThrow("upstream broke");
    const r = await refusal(s.run({ workspaceTpm: 100 }, "k2"));
    expect(r.message).toMatch(/^Token rate limit of this workspace reached/);
  });

  it("tokens per minute of a stream: counted at its end, not before; and when the consumer stops reading", async () => {
    const s = setup(async () => ({ kind: "stream", events: events(3) }), 100);
    const out = (await s.run({ keyTpm: 100 })) as { kind: "stream"; events: AsyncIterable<StreamEvent> };
    expect(out.kind).toBe("stream");
    // Not yet counted while the stream is open: another request of the key is admitted.
    const open = (await s.run({ keyTpm: 100 })) as { events: AsyncIterable<StreamEvent> };
    let n = 0;
    for await (const _ of out.events) n++;
    expect(n).toBe(3);
    await refusal(s.run({ keyTpm: 100 }));

    // A consumer that stops after the first event: its tokens count too (the second key's bucket).
    const other = (await s.run({ keyTpm: 100 }, "k2")) as { events: AsyncIterable<StreamEvent> };
    for await (const _ of other.events) break;
    await refusal(s.run({ keyTpm: 100 }, "k2"));
    for await (const _ of open.events) void _;
  });
});
