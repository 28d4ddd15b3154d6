/** Behaviour every adapter shares (errors, redaction, abort), run against that adapter's fake upstream. */
import { afterEach, expect, it } from "vitest";
import { UpstreamError, type ChatChunk, type ProviderAdapter, type UpstreamCall } from "../../../../src/core/chat/providers/types.js";
import type { FakeUpstream, Knobs, Script } from "../../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../../helpers/wait.js";

export const KEY = "sk-test-secret-0123456789";

export async function collect(iterable: AsyncIterable<ChatChunk>): Promise<ChatChunk[]> {
  const out: ChatChunk[] = [];
  for await (const c of iterable) out.push(c);
  return out;
}

export interface ContractSetup {
  adapter: ProviderAdapter;
  start: (script?: Script, knobs?: Knobs) => Promise<FakeUpstream>;
  call: (fake: FakeUpstream, body?: Record<string, unknown>, signal?: AbortSignal) => UpstreamCall;
  longScript: Script;
  /** Statuses the provider uses and whether each is retryable. */
  statuses: Array<[number, boolean]>;
}

export function adapterContract(s: ContractSetup): void {
  const open: FakeUpstream[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((f) => f.close()));
  });
  const start = async (script?: Script, knobs?: Knobs) => {
    const f = await s.start(script, knobs);
    open.push(f);
    return f;
  };

  it.each(s.statuses)("status %i before the first byte is an UpstreamError (retryable %s) without the key", async (status, retryable) => {
    const fake = await start(undefined, { failStatus: status, failMessage: `bad key ${KEY}` });
    for (const run of [() => s.adapter.complete(s.call(fake)), () => collect(s.adapter.stream(s.call(fake, { stream: true })))]) {
      const err = (await run().catch((e: unknown) => e)) as UpstreamError;
      expect(err).toBeInstanceOf(UpstreamError);
      expect(err.status).toBe(status);
      expect(err.retryable).toBe(retryable);
      expect(err.message).toContain("[redacted]");
      expect(err.message).not.toContain(KEY);
      expect(JSON.stringify(err.providerBody)).not.toContain(KEY);
    }
  });

  it("a connect error is status 0 and retryable", async () => {
    const fake = await s.start();
    await fake.close();
    const err = await s.adapter.complete(s.call(fake)).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: "UpstreamError", status: 0, retryable: true });
  });

  it("an error event mid-stream throws after the chunks already relayed", async () => {
    const fake = await start(s.longScript, { failAfterChunks: 3 });
    const seen: ChatChunk[] = [];
    const err = await (async () => {
      for await (const c of s.adapter.stream(s.call(fake, { stream: true }))) seen.push(c);
    })().catch((e: unknown) => e);
    expect(seen.length).toBeGreaterThan(0);
    expect(err).toBeInstanceOf(UpstreamError);
    expect((err as UpstreamError).status).toBeGreaterThanOrEqual(400);
  });

  it("a connection dropped mid-stream throws an UpstreamError", async () => {
    const fake = await start(s.longScript, { dropAfterChunks: 2 });
    const err = await collect(s.adapter.stream(s.call(fake, { stream: true }))).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: "UpstreamError", status: 0 });
  });

  it("a stream that ends cleanly before its end marker throws an UpstreamError", async () => {
    const fake = await start(s.longScript, { endAfterChunks: 4 });
    const err = await collect(s.adapter.stream(s.call(fake, { stream: true }))).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: "UpstreamError", status: 0, retryable: true });
  });

  it("stopping early and the caller's signal both abort the upstream request", async () => {
    const first = await start(s.longScript, { chunkDelayMs: 20 });
    for await (const _ of s.adapter.stream(s.call(first, { stream: true }))) break;
    await first.clientAborted();

    const second = await start(s.longScript, { chunkDelayMs: 20 });
    const ac = new AbortController();
    const err = await (async () => {
      for await (const _ of s.adapter.stream(s.call(second, { stream: true }, ac.signal))) ac.abort(new Error("client went away"));
    })().catch((e: unknown) => e);
    expect((err as Error).message).toBe("client went away");
    await second.clientAborted();
  });

  it("aborting while waiting for the response headers rejects at once and closes the upstream request", async () => {
    const fake = await start(undefined, { headerDelayMs: 60_000 });
    const runs = [(signal: AbortSignal) => s.adapter.complete(s.call(fake, {}, signal)), (signal: AbortSignal) => collect(s.adapter.stream(s.call(fake, { stream: true }, signal)))];
    for (const [i, run] of runs.entries()) {
      const ac = new AbortController();
      const pending = run(ac.signal).catch((e: unknown) => e);
      await waitFor("the upstream request", () => fake.requests.length > 0, { intervalMs: 5 });
      fake.requests.length = 0;
      ac.abort(new Error("client went away"));
      expect(((await pending) as Error).message).toBe("client went away");
      await fake.clientAborted(i + 1);
    }
  });

  it("finished streams and completions leave the connection open for the next request (keep-alive)", async () => {
    const fake = await start();
    for (let i = 0; i < 3; i++) {
      await collect(s.adapter.stream(s.call(fake, { stream: true })));
      await s.adapter.complete(s.call(fake));
    }
    expect(fake.requests).toHaveLength(6);
    // The pool may open a second socket while the first is being released; after that, no new ones.
    expect(fake.connections).toBeLessThanOrEqual(2);
  });

  it("a caller's signal that aborts after the response ends leaves the pooled connection working", async () => {
    const fake = await start();
    for (let i = 0; i < 3; i++) {
      const done = new AbortController();
      await s.adapter.complete(s.call(fake, undefined, done.signal));
      done.abort(new Error("the call is over"));
      const streamDone = new AbortController();
      await collect(s.adapter.stream(s.call(fake, { stream: true }, streamDone.signal)));
      streamDone.abort(new Error("the call is over"));
    }
    // The connection the aborted calls used serves the next request.
    expect((await s.adapter.complete(s.call(fake))).choices.length).toBeGreaterThan(0);
    expect(fake.requests).toHaveLength(7);
    expect(fake.connections).toBeLessThanOrEqual(2);
  });

  it("the upstream body never holds the key", async () => {
    const fake = await start();
    expect(JSON.stringify(s.adapter.upstreamBody(s.call(fake, { stream: true })))).not.toContain(KEY);
  });
}
