import { describe, expect, it } from "vitest";
import type { StreamEvent } from "../../../src/core/chat/model.js";
import { relayedEvents, tapEvents, type EventRelay, type TapEnd } from "../../../src/core/chat/pipeline/tap.js";
import { thenEvents } from "../../../src/core/chat/pipeline/keepalive.js";

const ev = (n: number) =>
  ({ id: "g", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta: { content: String(n) }, finish_reason: null }] }) as unknown as StreamEvent;

/** A source of `n` events that fails after them when `fail` is given, and records whether it was closed. */
function source(n: number, fail?: Error) {
  const state = { closed: false, read: 0 };
  const events: AsyncIterable<StreamEvent> = {
    [Symbol.asyncIterator]() {
      return {
        async next() {
          if (state.closed) return { done: true, value: undefined };
          if (state.read < n) return { done: false, value: ev(state.read++) };
          if (fail) throw fail;
          return { done: true, value: undefined };
        },
        async return() {
          state.closed = true;
          return { done: true, value: undefined };
        },
      };
    },
  };
  return { events, state };
}

const content = (e: StreamEvent) => (e.choices[0] as unknown as { delta: { content: string } }).delta.content;
const suffixed = (e: StreamEvent, s: string) => ({ ...e, choices: [{ ...e.choices[0]!, delta: { content: content(e) + s } }] }) as unknown as StreamEvent;

describe("tapEvents", () => {
  it("joins taps into one layer; maps run innermost first; each tap's end runs once, innermost first", async () => {
    const { events } = source(3);
    const ends: string[] = [];
    const inner = tapEvents(events, { map: (e) => suffixed(e, "a"), end: (x) => ends.push(`inner ${x.how}`) });
    const outer = tapEvents(inner, { map: (e) => suffixed(e, "b"), end: (x) => ends.push(`outer ${x.how}`) });
    expect(outer).toBe(inner);
    const seen: string[] = [];
    for await (const e of outer) seen.push(content(e));
    expect(seen).toEqual(["0ab", "1ab", "2ab"]);
    expect(ends).toEqual(["inner done", "outer done"]);
  });

  it("a failing source: every tap sees the error once, and the reader gets it", async () => {
    const boom = new Error("upstream broke");
    const ends: TapEnd[] = [];
    const tapped = tapEvents(tapEvents(source(1, boom).events, { end: (x) => ends.push(x) }), { end: (x) => ends.push(x) });
    const it = tapped[Symbol.asyncIterator]();
    expect((await it.next()).done).toBe(false);
    await expect(it.next()).rejects.toBe(boom);
    expect(ends).toEqual([
      { how: "failed", error: boom },
      { how: "failed", error: boom },
    ]);
    expect(await it.next()).toEqual({ done: true, value: undefined });
    expect(ends).toHaveLength(2);
  });

  it("a reader that stops (even before its first read) closes the source, then the taps see `closed` once", async () => {
    const { events, state } = source(5);
    const ends: string[] = [];
    const tapped = tapEvents(events, { end: (x) => ends.push(`${x.how} after close: ${state.closed}`) });
    const it = tapped[Symbol.asyncIterator]();
    await it.return!();
    await it.return!();
    expect(state.closed).toBe(true);
    expect(ends).toEqual(["closed after close: true"]);
    expect(await it.next()).toEqual({ done: true, value: undefined });
  });

  it("a tapped stream already being read is wrapped, not joined (its reader's taps are fixed)", async () => {
    const { events } = source(2);
    const ends: string[] = [];
    const first = tapEvents(events, { end: () => ends.push("first") });
    const it = first[Symbol.asyncIterator]();
    const second = tapEvents(first, { end: () => ends.push("second") });
    expect(second).not.toBe(first);
    await it.return!();
    expect(ends).toEqual(["first"]);
  });
});

/** A source of numbers (failing after them with `fail`) and a relay turning each into an event, logging what it does. */
function relayed(values: number[], opts: { fail?: Error; inBand?: boolean; first?: number[] } = {}) {
  const log: string[] = [];
  let i = 0;
  const it: AsyncIterator<number> = {
    async next() {
      if (i < values.length) return { done: false, value: values[i++]! };
      if (opts.fail) throw opts.fail;
      return { done: true, value: undefined };
    },
    async return() {
      log.push("source closed");
      return { done: true, value: undefined };
    },
  };
  const relay: EventRelay<number> = {
    first: () => {
      log.push("first");
      return { events: (opts.first ?? []).map(ev), done: false };
    },
    event: (n) => ev(n),
    failed: (err) => (opts.inBand ? { ...ev(-1), error: { message: (err as Error).message } } as unknown as StreamEvent : undefined),
    close: () => {
      log.push("close");
      return it.return!();
    },
  };
  return { events: relayedEvents(it, relay), log };
}

describe("relayedEvents (the execute stage's relay and the taps as one iterator)", () => {
  it("hands out the relay's first events (made at the first read), then the source's; taps join; closed before the taps end", async () => {
    const { events, log } = relayed([2, 3], { first: [0, 1] });
    const tapped = tapEvents(events, { map: (e) => suffixed(e, "a"), end: (x) => log.push(`tap ${x.how}`) });
    expect(tapped).toBe(events);
    expect(log).toEqual([]);
    const seen: string[] = [];
    for await (const e of tapped) seen.push(content(e));
    expect(seen).toEqual(["0a", "1a", "2a", "3a"]);
    expect(log).toEqual(["first", "close", "source closed", "tap done"]);
  });

  it("a source that breaks after its first event: the relay's in-band event, then the end", async () => {
    const { events, log } = relayed([1], { fail: new Error("broke"), inBand: true });
    const ends: TapEnd[] = [];
    const it = tapEvents(events, { end: (x) => ends.push(x) })[Symbol.asyncIterator]();
    expect(content((await it.next()).value)).toBe("1");
    const last = await it.next();
    expect((last.value as unknown as { error: { message: string } }).error.message).toBe("broke");
    expect(await it.next()).toEqual({ done: true, value: undefined });
    expect(ends).toEqual([{ how: "done" }]);
    expect(log).toEqual(["first", "close", "source closed"]);
  });

  it("a failure the relay does not end in band: the source is closed, the taps see it, the reader gets it", async () => {
    const boom = new Error("aborted");
    const { events, log } = relayed([], { fail: boom });
    const it = tapEvents(events, { end: (x) => log.push(`tap ${x.how}`) })[Symbol.asyncIterator]();
    await expect(it.next()).rejects.toBe(boom);
    expect(log).toEqual(["first", "close", "source closed", "tap failed"]);
    expect(await it.next()).toEqual({ done: true, value: undefined });
  });

  it("a reader that stops closes the source once, then the taps see `closed`", async () => {
    const { events, log } = relayed([1, 2, 3]);
    const it = tapEvents(events, { end: (x) => log.push(`tap ${x.how}`) })[Symbol.asyncIterator]();
    await it.next();
    await it.return!();
    await it.return!();
    expect(log).toEqual(["first", "close", "source closed", "tap closed"]);
  });

  it("as the chat handler's answer (thenEvents): its map is the last step; an error of it closes the stream first", async () => {
    const { events, log } = relayed([1, 2, 3]);
    tapEvents(events, { end: (x) => log.push(`tap ${x.how}`) });
    const messages = thenEvents(
      (async function* (): AsyncGenerator<string, AsyncIterable<StreamEvent>> {
        yield "keepalive";
        return events;
      })(),
      (e) => {
        if (content(e) === "2") throw new Error("map failed");
        return `message ${content(e)}`;
      },
    );
    expect(await messages.next()).toEqual({ done: false, value: "keepalive" });
    expect(await messages.next()).toEqual({ done: false, value: "message 1" });
    await expect(messages.next()).rejects.toThrow("map failed");
    expect(log).toEqual(["first", "close", "source closed", "tap closed"]);
    expect(await messages.next()).toEqual({ done: true, value: undefined });
  });
});
