/**
 * The adapters' HTTP client (src/core/chat/providers/http.ts): an upstream that stays silent past the idle
 * timeout fails the call with a retryable UpstreamError and its connection is closed, before the response
 * headers and in the middle of a stream alike.
 */
import { afterEach, describe, expect, it } from "vitest";
import { linkedController, postJson, sseEvents } from "../../../../src/core/chat/providers/http.js";
import { UpstreamError } from "../../../../src/core/chat/providers/types.js";
import { startFakeOpenAI } from "../../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../../helpers/fake-upstreams/server.js";

const open: FakeUpstream[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((f) => f.close()));
});

const post = (fake: FakeUpstream, body: Record<string, unknown>, signal: AbortSignal) =>
  postJson({
    url: `${fake.url}/v1/chat/completions`,
    headers: { authorization: "Bearer sk-test" },
    body: { model: "m", messages: [{ role: "user", content: "hi" }], ...body },
    signal,
    apiKey: "sk-test",
    errorMessage: () => undefined,
    idleTimeoutMs: 200,
  });

describe("upstream idle timeout", () => {
  it("no response headers in time: a retryable UpstreamError, and the upstream sees the request dropped", async () => {
    const fake = await startFakeOpenAI(undefined, { headerDelayMs: 60_000 });
    open.push(fake);
    const err = await post(fake, {}, new AbortController().signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err).toMatchObject({ status: 0, retryable: true });
    expect((err as Error).message).toContain("sent nothing");
    await fake.clientAborted();
  });

  it("a stream that stalls mid-body fails instead of hanging", async () => {
    const fake = await startFakeOpenAI({ text: ["a", "b", "c"], finish: "stop", usage: { input: 1, output: 3 } }, { chunkDelayMs: 60_000 });
    open.push(fake);
    const controller = linkedController(new AbortController().signal);
    const res = await post(fake, { stream: true }, controller.signal);
    const events: string[] = [];
    const err = await (async () => {
      for await (const e of sseEvents(res, controller)) events.push(e.data);
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err).toMatchObject({ status: 0, retryable: true });
    await fake.clientAborted();
  });
});
