/**
 * Results at hand without a promise (src/lib/pull.ts): every layer that offers `[PULL]()` gives, read that way, the
 * same items, errors, ends and side effects as read with `next()`, and a burst of events already parsed goes
 * through the whole chain (SSE reader → adapter's opened stream → execute's relay and the taps → the chat handler's
 * map) without a promise.
 */
import { describe, expect, it } from "vitest";
import type { StreamEvent } from "../../../src/core/chat/model.js";
import { thenEvents } from "../../../src/core/chat/pipeline/keepalive.js";
import { relayedEvents, tapEvents, type EventRelay } from "../../../src/core/chat/pipeline/tap.js";
import { openedStream, sseMap, SSE_END, type UpstreamResponse } from "../../../src/core/chat/providers/http.js";
import { UpstreamError } from "../../../src/core/chat/providers/types.js";
import { isPullable, pull, type Pulled } from "../../../src/lib/pull.js";

/** A body of the given reads; each read's later pieces are queued behind it (taken without waiting). */
function bodyOf(reads: Buffer[][]) {
  const calls = { cancel: 0, release: 0 };
  let queued: Buffer[] = [];
  const res: UpstreamResponse = {
    status: 200,
    ok: true,
    headers: {},
    text: async () => "",
    chunks: async function* () {
      for (const read of reads) {
        queued = read.slice(1);
        yield read[0]!;
      }
    },
    takeQueued: () => queued.shift(),
    cancel: () => void calls.cancel++,
    release: () => void calls.release++,
  };
  return { res, calls };
}

/** A seeded generator (the same streams on every run). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** An SSE body of `n` events in varied forms: LF, CRLF or CR line ends, comments, multi-line data, `event:` and `id:` lines, empty data. */
function sseText(rnd: () => number, n: number, end: "done" | "none"): string {
  let text = "";
  for (let i = 0; i < n; i++) {
    const nl = ["\n", "\r\n", "\r"][Math.floor(rnd() * 3)]!;
    if (rnd() < 0.15) text += `: keepalive ${i}${nl}`;
    if (rnd() < 0.1) text += `event: message${nl}id: ${i}${nl}`;
    if (rnd() < 0.1) text += `data: line ${i}${nl}data:second ${i}${nl}${nl}`;
    else if (rnd() < 0.05) text += `data:${nl}${nl}`;
    else text += `data: {"i":${i},"t":"h\u00e9 \u{1F600} ${i}"}${nl}${nl}`;
  }
  if (end === "done") text += "data: [DONE]\n\n";
  return text;
}

/** `text` as reads of one to three pieces each, cut at random bytes (inside characters and lines too). */
function splitReads(rnd: () => number, text: string): Buffer[][] {
  const bytes = Buffer.from(text, "utf8");
  const cuts = new Set<number>();
  const pieces = 1 + Math.floor(rnd() * 40);
  for (let i = 0; i < pieces; i++) cuts.add(1 + Math.floor(rnd() * (bytes.length - 1)));
  const at = [0, ...[...cuts].sort((a, b) => a - b), bytes.length];
  const parts: Buffer[] = [];
  for (let i = 1; i < at.length; i++) if (at[i]! > at[i - 1]!) parts.push(bytes.subarray(at[i - 1], at[i]));
  const reads: Buffer[][] = [];
  while (parts.length > 0) reads.push(parts.splice(0, 1 + Math.floor(rnd() * 3)));
  return reads;
}

type Step = { value: unknown } | { error: string } | "done";

/** Reads `it` to its end with `next()` or with `pull()`, noting each step and how many results came without a promise. */
async function readAll(it: AsyncIterator<unknown>, how: "next" | "pull"): Promise<{ steps: Step[]; atHand: number }> {
  const steps: Step[] = [];
  let atHand = 0;
  for (let i = 0; i < 10_000; i++) {
    let r: IteratorResult<unknown>;
    try {
      let p: Pulled<unknown>;
      if (how === "next") p = it.next();
      else {
        p = pull(it);
        if (!(p instanceof Promise)) atHand++;
      }
      r = p instanceof Promise ? await p : p;
    } catch (err) {
      steps.push({ error: (err as Error).message });
      continue;
    }
    if (r.done) {
      steps.push("done");
      return { steps, atHand };
    }
    steps.push({ value: r.value });
  }
  throw new Error("no end");
}

describe("the SSE reader read with [PULL]() against next()", () => {
  it("the same events, errors, end and body handling for generated streams split across reads", async () => {
    const rnd = random(24);
    let atHandTotal = 0;
    for (let round = 0; round < 300; round++) {
      const end = rnd() < 0.8 ? "done" : "none";
      const text = sseText(rnd, 1 + Math.floor(rnd() * 30), end);
      const reads = splitReads(rnd, text);
      const rejectAt = rnd() < 0.2 ? Math.floor(rnd() * 10) : -1;
      const stopEarly = rnd() < 0.1;
      // The third run reads the same text delivered in one piece: what the split reads must come to.
      const runs = await Promise.all(
        (["next", "pull", "whole"] as const).map(async (mode) => {
          const how = mode === "pull" ? "pull" : "next";
          const { res, calls } = bodyOf(mode === "whole" ? [[Buffer.from(text, "utf8")]] : reads);
          const controller = new AbortController();
          let seen = 0;
          const it = sseMap(
            res,
            controller,
            (e) => {
              if (e.data === "[DONE]") return SSE_END;
              if (seen++ === rejectAt) throw new UpstreamError(502, `rejected ${e.data}`, true);
              if (e.data === "") return undefined;
              return `${e.event ?? ""}|${e.id ?? ""}|${e.data}`;
            },
            (e) => e.data === "[DONE]",
            undefined,
            () => {
              throw new UpstreamError(0, "ended without [DONE]", true);
            },
          );
          let out: { steps: Step[]; atHand: number };
          if (stopEarly) {
            const first = how === "next" ? await it.next() : await pull(it);
            await it.return!();
            out = { steps: [{ value: first.value }], atHand: 0 };
          } else out = await readAll(it, how);
          return { ...out, calls, aborted: controller.signal.aborted };
        }),
      );
      const [byNext, byPull, whole] = runs;
      expect(byNext!.steps).toEqual(whole!.steps);
      expect(byPull!.steps).toEqual(byNext!.steps);
      expect(byPull!.calls).toEqual(byNext!.calls);
      expect(byPull!.aborted).toBe(byNext!.aborted);
      atHandTotal += byPull!.atHand;
    }
    // Most events came out of reads that delivered several: handed out without a promise.
    expect(atHandTotal).toBeGreaterThan(500);
  });
});

const ev = (n: number) =>
  ({ id: "g", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta: { content: String(n) }, finish_reason: null }] }) as unknown as StreamEvent;
const content = (e: StreamEvent) => (e.choices[0] as unknown as { delta: { content: string } }).delta.content;

/**
 * The chain of a streamed chat answer over an SSE body: the adapter's opened stream over the SSE reader, the execute
 * stage's relay with taps, the chat handler's map as the last step; `log` notes closes and the taps' ends.
 */
function chain(body: string, opts: { inBand?: boolean; mapThrowsAt?: string; tapThrowsAt?: string } = {}) {
  const log: string[] = [];
  const { res, calls } = bodyOf([[Buffer.from(body)]]);
  const controller = new AbortController();
  const source = openedStream(async () =>
    sseMap(
      res,
      controller,
      (e) => {
        if (e.data === "[DONE]") return SSE_END;
        if (e.data === "bad") throw new UpstreamError(502, "bad event", true);
        return Number(e.data);
      },
      (e) => e.data === "[DONE]",
    ),
  );
  const it = source[Symbol.asyncIterator]();
  const relay: EventRelay<number> = {
    first: () => ({ events: [], done: false }),
    event: (n) => ev(n),
    failed: (err) => (opts.inBand ? ({ ...ev(-1), error: { message: (err as Error).message } } as unknown as StreamEvent) : undefined),
    close: () => {
      log.push("close");
      return it.return!();
    },
  };
  const events = relayedEvents(it, relay);
  tapEvents(events, {
    map: (e) => {
      if (content(e) === opts.tapThrowsAt) throw new Error("tap failed");
      return e;
    },
    end: (x) => log.push(`tap ${x.how}`),
  });
  const messages = thenEvents(
    (async function* (): AsyncGenerator<string, AsyncIterable<StreamEvent>> {
      return events;
    })(),
    (e) => {
      if (content(e) === opts.mapThrowsAt) throw new Error("map failed");
      const error = (e as unknown as { error?: { message: string } }).error;
      return error ? `error ${error.message}` : `message ${content(e)}`;
    },
  );
  return { messages, log, calls };
}

describe("the streamed chat answer's chain read with [PULL]() against next()", () => {
  const cases: Array<[string, string, Parameters<typeof chain>[1]]> = [
    ["a whole stream", "data: 1\n\ndata: 2\n\ndata: 3\n\ndata: [DONE]\n\n", {}],
    ["a body that ends without [DONE]", "data: 1\n\ndata: 2\n\n", {}],
    ["an event the adapter rejects, ended in band", "data: 1\n\ndata: bad\n\ndata: 3\n\n", { inBand: true }],
    ["an event the adapter rejects, not ended in band", "data: 1\n\ndata: bad\n\ndata: 3\n\n", {}],
    ["a map that throws", "data: 1\n\ndata: 2\n\ndata: 3\n\ndata: [DONE]\n\n", { mapThrowsAt: "2" }],
    ["a tap that throws", "data: 1\n\ndata: 2\n\ndata: 3\n\ndata: [DONE]\n\n", { tapThrowsAt: "2" }],
  ];
  for (const [name, body, opts] of cases) {
    it(`${name}: the same messages, errors, closes and ends`, async () => {
      const byNext = chain(body, opts);
      const a = await readAll(byNext.messages, "next");
      const byPull = chain(body, opts);
      const b = await readAll(byPull.messages, "pull");
      expect(b.steps).toEqual(a.steps);
      expect(byPull.log).toEqual(byNext.log);
      expect(byPull.calls).toEqual(byNext.calls);
    });
  }

  it("is pullable end to end: after the first read, the events of one upstream read come without a promise", async () => {
    const { messages } = chain("data: 1\n\ndata: 2\n\ndata: 3\n\ndata: [DONE]\n\n");
    expect(isPullable(messages)).toBe(true);
    const first = pull(messages);
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toEqual({ done: false, value: "message 1" });
    expect(pull(messages)).toEqual({ done: false, value: "message 2" });
    expect(pull(messages)).toEqual({ done: false, value: "message 3" });
    // The end closes the source first (a promise, as with next()).
    expect(await pull(messages)).toEqual({ done: true, value: undefined });
  });
});
