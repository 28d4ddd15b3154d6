import { describe, expect, it } from "vitest";
import type { StreamEvent } from "../../../src/core/chat/model.js";
import { tapEvents, type TapEnd } from "../../../src/core/chat/pipeline/tap.js";

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
