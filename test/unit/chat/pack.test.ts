/**
 * Packing the items at hand into one stream message (src/core/chat/pack.ts), on a source whose items come in reads
 * the test releases one at a time: every item comes out once and in order; a message holds only what was at hand
 * (the first read's items come out before the second read arrives); no message goes over the bound unless its
 * first item alone does; keepalives pass as they are; an error met while gathering comes after the items before it;
 * `return()` closes the source, also with a read under way.
 */
import { describe, expect, it } from "vitest";
import { PACK_MAX_CHARS, PACK_MAX_ITEMS, PackedItems, packChunks, sizeOfText } from "../../../src/core/chat/pack.js";
import { PULL, type Pulled } from "../../../src/lib/pull.js";

/** A source of items in reads: the items of a read are at hand together; the next read waits for `release()`. */
function source<T>(reads: Array<Array<T | Error>>) {
  let read = 0;
  let at = 0;
  let waiting: (() => void) | undefined;
  let released = 1; // the first read is there
  const state = { returned: false, pulls: 0 };
  const it = {
    [Symbol.asyncIterator]() {
      return it;
    },
    [PULL](): Pulled<T> {
      state.pulls++;
      if (state.returned) return { done: true, value: undefined };
      if (read >= reads.length) return { done: true, value: undefined };
      if (read < released) {
        const v = reads[read]![at++]!;
        if (at >= reads[read]!.length) {
          read++;
          at = 0;
        }
        if (v instanceof Error) throw v;
        return { done: false, value: v };
      }
      return new Promise<void>((resolve) => (waiting = resolve)).then(() => it[PULL]() as IteratorResult<T>);
    },
    next(): Promise<IteratorResult<T>> {
      try {
        return Promise.resolve(it[PULL]());
      } catch (e) {
        return Promise.reject(e);
      }
    },
    async return(): Promise<IteratorResult<T>> {
      state.returned = true;
      return { done: true, value: undefined };
    },
  };
  return {
    it,
    state,
    release() {
      released++;
      const w = waiting;
      waiting = undefined;
      w?.();
    },
  };
}

/** A small deterministic PRNG (mulberry32). */
function rng(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("packChunks (chat completions' pack_chunks)", () => {
  it("packs only what is at hand, in order, within the bound unless one chunk alone is over it", async () => {
    for (let seed = 1; seed <= 40; seed++) {
      const r = rng(seed);
      const reads = Array.from({ length: 1 + Math.floor(r() * 6) }, () =>
        Array.from({ length: 1 + Math.floor(r() * 400) }, () => "c".repeat(r() < 0.02 ? PACK_MAX_CHARS + 10 : Math.floor(r() * 3000))),
      );
      let n = 0;
      reads.forEach((read) => read.forEach((_, i) => (read[i] = `${n++}:${read[i]}`)));
      const src = source<{ keepalive: true } | string>([[{ keepalive: true }], ...reads]);
      const packed = packChunks(src.it, (first, more) => [first, ...more]);
      const out: string[] = [];
      // The keepalive first, alone.
      expect((await packed.next()).value).toEqual({ keepalive: true });
      for (let read = 0; read < reads.length; read++) {
        src.release();
        const want = reads[read]!;
        const got: string[] = [];
        while (got.length < want.length) {
          const m = (await packed.next()).value as string[];
          const size = m.reduce((s, c) => s + c.length, 0);
          expect(m.length).toBeLessThanOrEqual(PACK_MAX_ITEMS);
          if (m.length > 1) expect(size, `seed ${seed}`).toBeLessThanOrEqual(PACK_MAX_CHARS);
          got.push(...m);
        }
        // What one read brought came out before the next read was released: nothing waited for more.
        expect(got, `seed ${seed} read ${read}`).toEqual(want);
        out.push(...got);
      }
      expect((await packed.next()).done).toBe(true);
      expect(out.length).toBe(n);
    }
  });

  it("an error met while gathering comes after the chunks before it; return() closes the source with a read under way", async () => {
    const failing = source<string>([["a", "b", new Error("broke"), "c"]]);
    const p = packChunks(failing.it, (first, more) => [first, ...more]);
    expect((await p.next()).value).toEqual(["a", "b"]);
    await expect(p.next()).rejects.toThrow("broke");

    const slow = source<string>([["a", "b"], ["c"]]);
    const q = packChunks(slow.it, (first, more) => [first, ...more]);
    expect((await q.next()).value).toEqual(["a", "b"]); // the look for a third started the second read
    await q.return!();
    expect(slow.state.returned).toBe(true);
    slow.release(); // the read under way ends without anyone to hear it
    expect((await q.next()).done).toBe(true);
  });
});

describe("PackedItems (the dialects' events)", () => {
  it("packs the items of the events at hand, the closing ones after the last, within the bound", async () => {
    for (let seed = 1; seed <= 30; seed++) {
      const r = rng(seed);
      let n = 0;
      const reads = Array.from({ length: 1 + Math.floor(r() * 5) }, () =>
        Array.from({ length: 1 + Math.floor(r() * 300) }, () => ({ id: n++, items: Math.floor(r() * 3), size: Math.floor(r() * 2000) })),
      );
      const src = source(reads);
      const encode = (e: { id: number; items: number; size: number }) => Array.from({ length: e.items }, (_, k) => `${e.id}.${k}:${"x".repeat(e.size)}`);
      const packed = new PackedItems(src.it, encode, sizeOfText, () => ["end"]);
      const got: string[] = [];
      for (let read = 0; ; ) {
        const m = await packed.next();
        if (m === undefined) break;
        const size = m.reduce((s, c) => s + c.length, 0);
        expect(m.length).toBeLessThanOrEqual(PACK_MAX_ITEMS);
        if (size > PACK_MAX_CHARS) expect(m.length, `seed ${seed}`).toBeLessThanOrEqual(2); // one event's items alone
        got.push(...m);
        const wanted = reads.slice(0, read + 1).flat().flatMap(encode);
        if (got.length === wanted.length && read < reads.length - 1) {
          read++;
          src.release();
        }
      }
      expect(got).toEqual([...reads.flat().flatMap(encode), "end"]);
      await packed.close();
      expect(src.state.returned).toBe(false); // it ended: nothing to close
    }
  });
});
