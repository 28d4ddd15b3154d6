/**
 * `outcomeHead` (src/core/chat/pipeline/keepalive.ts): the chat handler's wait for the pipeline's answer, keepalives
 * until it comes, as the generator around `yield* untilOutcome(…)` it replaces did.
 */
import { describe, expect, it } from "vitest";
import { outcomeHead } from "../../../src/core/chat/pipeline/keepalive.js";
import type { ChatOutcome } from "../../../src/core/chat/pipeline/stage.js";

function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((a, b) => {
    resolve = a;
    reject = b;
  });
  return { promise, resolve, reject };
}

/** A stream outcome whose events record being read and closed. */
function streamOutcome(log: string[]): ChatOutcome {
  const events: AsyncIterableIterator<never> = {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      log.push("read");
      return { done: true, value: undefined };
    },
    async return() {
      log.push("closed");
      return { done: true, value: undefined };
    },
  };
  return { kind: "stream", events } as unknown as ChatOutcome;
}

describe("outcomeHead", () => {
  it("starts at the first read, answers keepalives while waiting, then ends with the outcome mapped", async () => {
    const d = deferred<ChatOutcome>();
    let started = 0;
    const log: string[] = [];
    const outcome = streamOutcome(log);
    const head = outcomeHead(() => (started++, d.promise), 1, "keepalive", (o) => ({ mapped: o }));
    expect(started).toBe(0);
    expect(await head.next()).toEqual({ done: false, value: "keepalive" });
    expect(await head.next()).toEqual({ done: false, value: "keepalive" });
    const third = head.next();
    d.resolve(outcome);
    expect(await third).toEqual({ done: true, value: { mapped: outcome } });
    expect(started).toBe(1);
    expect(await head.next()).toEqual({ done: true, value: undefined });
    expect(log).toEqual([]);
  });

  it("rejects the read with the chain's error, and with a throw of start or of the map", async () => {
    const failing = outcomeHead(() => Promise.reject(new Error("no provider")), 10_000, "k", (o) => o);
    await expect(failing.next()).rejects.toThrow("no provider");
    expect(await failing.next()).toEqual({ done: true, value: undefined });
    const throwing = outcomeHead(() => {
      throw new Error("bad request");
    }, 10_000, "k", (o) => o);
    await expect(throwing.next()).rejects.toThrow("bad request");
    const mapThrows = outcomeHead(() => Promise.resolve({ kind: "completion" } as unknown as ChatOutcome), 10_000, "k", () => {
      throw new Error("not a stream");
    });
    await expect(mapThrows.next()).rejects.toThrow("not a stream");
  });

  it("returned while waiting: the stream that opens later is started and closed (its cleanup runs)", async () => {
    const d = deferred<ChatOutcome>();
    const log: string[] = [];
    const head = outcomeHead(() => d.promise, 1, "keepalive", (o) => o);
    expect(await head.next()).toEqual({ done: false, value: "keepalive" });
    expect(await head.return(undefined as never)).toEqual({ done: true, value: undefined });
    d.resolve(streamOutcome(log));
    await expect.poll(() => log).toEqual(["read", "closed"]);
    expect(await head.next()).toEqual({ done: true, value: undefined });
  });

  it("returned before the first read: nothing is started", async () => {
    let started = false;
    const head = outcomeHead(() => ((started = true), new Promise<ChatOutcome>(() => undefined)), 1, "k", (o) => o);
    expect(await head.return(undefined as never)).toEqual({ done: true, value: undefined });
    expect(await head.next()).toEqual({ done: true, value: undefined });
    expect(started).toBe(false);
  });

  it("returned during a read that then ends with the outcome: the outcome is the read's, nothing dropped", async () => {
    const d = deferred<ChatOutcome>();
    const log: string[] = [];
    const outcome = streamOutcome(log);
    const head = outcomeHead(() => d.promise, 10_000, "k", (o) => o);
    const read = head.next();
    const returned = head.return(undefined as never);
    d.resolve(outcome);
    expect(await read).toEqual({ done: true, value: outcome });
    expect(await returned).toEqual({ done: true, value: undefined });
    expect(log).toEqual([]);
  });
});
