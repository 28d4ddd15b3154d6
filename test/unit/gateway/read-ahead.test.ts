/**
 * The read-ahead queue both gRPC clients of the split gateway share (src/gateway/read-ahead.ts), without a server:
 * the calls its two kinds of source get (a pausing HTTP/2 stream, grpc-js's one message per `startRead()`), the
 * order the reader sees (messages, then the outcome), `return()` and `opening()`.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { READ_AHEAD, ReadAhead } from "../../../src/gateway/read-ahead.js";

/** A source recording the calls it gets, in order. */
function source(pausing: boolean) {
  const calls: string[] = [];
  const src = {
    more: () => void calls.push("more"),
    cancel: () => void calls.push("cancel"),
    ended: () => void calls.push("ended"),
    ...(pausing ? { pause: () => void calls.push("pause") } : {}),
  };
  return { calls, messages: new ReadAhead<number>(src) };
}

const count = (calls: string[], name: string) => calls.filter((c) => c === name).length;

describe("ReadAhead", () => {
  it("gives messages pushed before next() from the queue and ones pushed after it to the waiting next()", async () => {
    const { messages } = source(true);
    messages.push(1);
    messages.push(2);
    expect(await messages.next()).toEqual({ done: false, value: 1 });
    expect(await messages.next()).toEqual({ done: false, value: 2 });
    const waiting = messages.next();
    messages.push(3);
    expect(await waiting).toEqual({ done: false, value: 3 });
    const last = messages.next();
    messages.finish(null);
    expect(await last).toEqual({ done: true, value: undefined });
    expect(await messages.next()).toEqual({ done: true, value: undefined });
  });

  it("is its own async iterable (for await reads every message, then ends)", async () => {
    const { messages } = source(true);
    for (let i = 0; i < 3; i++) messages.push(i);
    messages.finish(null);
    const seen: number[] = [];
    for await (const m of messages) seen.push(m);
    expect(seen).toEqual([0, 1, 2]);
  });

  it("pauses a pausing source when READ_AHEAD messages wait and resumes it as the reader takes one", async () => {
    const { calls, messages } = source(true);
    messages.pull(); // flowing from the start: nothing to ask
    for (let i = 0; i < READ_AHEAD - 1; i++) messages.push(i);
    expect(calls).toEqual([]);
    messages.push(READ_AHEAD - 1);
    expect(calls).toEqual(["pause"]);
    // Delivered while pausing (bytes already read): queued, no second pause.
    messages.push(READ_AHEAD);
    expect(calls).toEqual(["pause"]);
    // READ_AHEAD + 1 wait: the first take leaves READ_AHEAD, still full.
    expect(await messages.next()).toEqual({ done: false, value: 0 });
    expect(calls).toEqual(["pause"]);
    expect(await messages.next()).toEqual({ done: false, value: 1 });
    expect(calls).toEqual(["pause", "more"]);
    // Flowing again: taking more does not resume it twice.
    expect(await messages.next()).toEqual({ done: false, value: 2 });
    expect(calls).toEqual(["pause", "more"]);
    // Filled again: paused again.
    messages.push(100);
    messages.push(101);
    expect(calls).toEqual(["pause", "more", "pause"]);
    for (let i = 3; i <= READ_AHEAD; i++) expect((await messages.next()).value).toBe(i);
    expect(calls).toEqual(["pause", "more", "pause", "more"]);
    expect((await messages.next()).value).toBe(100);
    expect((await messages.next()).value).toBe(101);
    // A message given straight to a waiting next() is never queued: no pause however many pass that way.
    for (let i = 0; i < READ_AHEAD + 2; i++) {
      const waiting = messages.next();
      messages.push(i);
      expect((await waiting).value).toBe(i);
    }
    expect(calls).toEqual(["pause", "more", "pause", "more"]);
  });

  it("asks a one-at-a-time source for one message at a time, up to READ_AHEAD waiting, then one per message taken", async () => {
    const { calls, messages } = source(false);
    expect(calls).toEqual([]);
    messages.pull();
    expect(calls).toEqual(["more"]);
    messages.pull(); // already asked
    expect(calls).toEqual(["more"]);
    for (let i = 0; i < READ_AHEAD - 1; i++) messages.push(i);
    expect(count(calls, "more")).toBe(READ_AHEAD);
    messages.push(READ_AHEAD - 1);
    // READ_AHEAD wait: not asked again, never paused.
    expect(count(calls, "more")).toBe(READ_AHEAD);
    expect(count(calls, "pause")).toBe(0);
    expect(await messages.next()).toEqual({ done: false, value: 0 });
    expect(count(calls, "more")).toBe(READ_AHEAD + 1);
    // Asked, not answered yet: taking another does not ask twice.
    expect(await messages.next()).toEqual({ done: false, value: 1 });
    expect(count(calls, "more")).toBe(READ_AHEAD + 1);
    messages.push(READ_AHEAD);
    expect(count(calls, "more")).toBe(READ_AHEAD + 2);
    // After the end nothing is asked for.
    messages.finish(null);
    for (let i = 2; i <= READ_AHEAD; i++) expect((await messages.next()).value).toBe(i);
    expect(await messages.next()).toEqual({ done: true, value: undefined });
    expect(count(calls, "more")).toBe(READ_AHEAD + 2);
  });

  it("gives the queued messages first, then the error the call ended with (to every later next())", async () => {
    const { calls, messages } = source(true);
    messages.push(1);
    messages.push(2);
    const err = new ConnectError("the core failed", Code.Unavailable);
    messages.finish(err);
    expect(messages.done).toBe(true);
    // The first outcome counts; what comes after the end is dropped.
    messages.finish(null);
    messages.push(3);
    expect(await messages.next()).toEqual({ done: false, value: 1 });
    expect(await messages.next()).toEqual({ done: false, value: 2 });
    await expect(messages.next()).rejects.toBe(err);
    await expect(messages.next()).rejects.toBe(err);
    expect(calls).toEqual(["ended"]);
  });

  it("rejects a waiting next() with the error when nothing is queued", async () => {
    const { messages } = source(false);
    const waiting = messages.next();
    const err = new ConnectError("deadline", Code.DeadlineExceeded);
    messages.finish(err);
    await expect(waiting).rejects.toBe(err);
  });

  it("refuses a second next() while one waits, and the first still gets the next message", async () => {
    const { messages } = source(true);
    const first = messages.next();
    const second = messages.next();
    await expect(second).rejects.toMatchObject({ code: Code.Internal, rawMessage: "concurrent next() on a stream" });
    messages.push(7);
    expect(await first).toEqual({ done: false, value: 7 });
  });

  it("return() cancels an open call once, drops the queue and ends the reader", async () => {
    const { calls, messages } = source(true);
    messages.push(1);
    messages.push(2);
    expect(await messages.return()).toEqual({ done: true, value: undefined });
    expect(calls).toEqual(["cancel", "ended"]);
    expect(await messages.next()).toEqual({ done: true, value: undefined });
    expect(await messages.return()).toEqual({ done: true, value: undefined });
    expect(calls).toEqual(["cancel", "ended"]);
  });

  it("return() resolves a waiting next() as done", async () => {
    const { calls, messages } = source(false);
    const waiting = messages.next();
    await messages.return();
    expect(await waiting).toEqual({ done: true, value: undefined });
    expect(count(calls, "cancel")).toBe(1);
  });

  it("return() after the call ended cancels nothing and drops what is still queued", async () => {
    const { calls, messages } = source(true);
    messages.push(1);
    messages.finish(new ConnectError("failed", Code.Internal));
    await messages.return();
    expect(calls).toEqual(["ended"]);
    // The queue is gone: the reader sees the end (the error) at once.
    await expect(messages.next()).rejects.toMatchObject({ code: Code.Internal });
  });

  it("a cancel that ends the call itself (synchronously) keeps its outcome over return()'s", async () => {
    const err = new ConnectError("Cancelled on client", Code.Canceled);
    const messages: ReadAhead<number> = new ReadAhead<number>({ more() {}, cancel: () => messages.finish(err) });
    await messages.return();
    await expect(messages.next()).rejects.toBe(err);
  });

  it("opening() runs start at once and resolves when the call is answered; messages before the reader wait for it", async () => {
    const { calls, messages } = source(true);
    let started = false;
    const opening = messages.opening(() => {
      started = true;
    });
    expect(started).toBe(true);
    messages.opened();
    messages.push(1);
    messages.opened(); // once
    await opening;
    expect(await messages.next()).toEqual({ done: false, value: 1 });
    // Once answered, an error is the reader's (next()), not opening()'s.
    const err = new ConnectError("failed", Code.Internal);
    messages.finish(err);
    await expect(messages.next()).rejects.toBe(err);
    expect(calls).toEqual(["ended"]);
  });

  it("opening() rejects when the call ends with an error before it is answered, and resolves when it ends well", async () => {
    const failed = source(true).messages;
    const err = new ConnectError("unreachable", Code.Unavailable);
    const opening = failed.opening(() => {});
    failed.finish(err);
    await expect(opening).rejects.toBe(err);
    await expect(failed.next()).rejects.toBe(err);

    const empty = source(true).messages;
    const ok = empty.opening(() => {});
    empty.finish(null);
    await expect(ok).resolves.toBeUndefined();
    expect(await empty.next()).toEqual({ done: true, value: undefined });
  });

  it("opening() rejects with what start throws", async () => {
    const { messages } = source(true);
    await expect(
      messages.opening(() => {
        throw new ConnectError("no connection", Code.Unavailable);
      }),
    ).rejects.toMatchObject({ code: Code.Unavailable });
  });
});
