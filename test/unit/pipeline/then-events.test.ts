/**
 * `thenEvents` (src/core/chat/pipeline/keepalive.ts): the chat handler's streamed messages, the keepalives of a
 * head generator, then the answer's events mapped by a hand-written iterator, ending as the `for await` … `yield`
 * generator it replaces did.
 */
import { describe, expect, it } from "vitest";
import { thenEvents } from "../../../src/core/chat/pipeline/keepalive.js";

/** An event source that records how it was closed. */
function source(values: number[], failAt?: number) {
  const log: string[] = [];
  let i = 0;
  const it: AsyncIterableIterator<number> = {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      if (failAt !== undefined && i === failAt) throw new Error("source broke");
      return i < values.length ? { done: false, value: values[i++]! } : { done: true, value: undefined };
    },
    async return() {
      log.push("events closed");
      return { done: true, value: undefined };
    },
  };
  return { it, log };
}

async function* head(log: string[], keepalives: number, events: AsyncIterable<number>): AsyncGenerator<string, AsyncIterable<number>> {
  try {
    for (let k = 0; k < keepalives; k++) yield "keepalive";
    return events;
  } finally {
    log.push("head finished");
  }
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const v of it) out.push(v);
  return out;
}

describe("thenEvents", () => {
  it("yields the head's messages, then each event mapped, then ends", async () => {
    const { it: events, log } = source([1, 2, 3]);
    expect(await collect(thenEvents(head(log, 2, events), (n) => n * 10))).toEqual(["keepalive", "keepalive", 10, 20, 30]);
    expect(log).toEqual(["head finished"]);
  });

  it("does not start the head before the first read", async () => {
    let started = false;
    const empty = source([]).it;
    const h = (async function* (): AsyncGenerator<never, AsyncIterable<number>> {
      started = true;
      return empty;
    })();
    const it = thenEvents(h, (n: number) => n);
    expect(started).toBe(false);
    expect(await it.next()).toEqual({ done: true, value: undefined });
    expect(started).toBe(true);
  });

  it("an error of the events ends the messages with it (nothing closed: the source failed)", async () => {
    const { it: events, log } = source([1, 2], 1);
    const it = thenEvents(head(log, 0, events), (n) => n);
    expect(await it.next()).toEqual({ done: false, value: 1 });
    await expect(it.next()).rejects.toThrow("source broke");
    expect(await it.next()).toEqual({ done: true, value: undefined });
    expect(log).toEqual(["head finished"]);
  });

  it("an error of the map closes the events first", async () => {
    const { it: events, log } = source([1, 2]);
    const it = thenEvents(head(log, 0, events), (n) => {
      if (n === 2) throw new Error("map failed");
      return n;
    });
    expect(await it.next()).toEqual({ done: false, value: 1 });
    await expect(it.next()).rejects.toThrow("map failed");
    expect(log).toEqual(["head finished", "events closed"]);
  });

  it("a reader that stops closes the events, or the head while it still waits", async () => {
    const during = source([1, 2]);
    const a = thenEvents(head(during.log, 0, during.it), (n) => n);
    await a.next();
    await a.return!();
    expect(during.log).toEqual(["head finished", "events closed"]);
    expect(await a.next()).toEqual({ done: true, value: undefined });

    const before = source([1]);
    const b = thenEvents(head(before.log, 3, before.it), (n) => n);
    expect(await b.next()).toEqual({ done: false, value: "keepalive" });
    await b.return!();
    expect(before.log).toEqual(["head finished"]);
  });
});
