/**
 * Packing a stream's events already at hand into one stream message (the split hop: bench/README.md, "Packing the
 * events at hand into one stream message").
 *
 * Over the split hop each stream message costs a protobuf encode, an HTTP/2 DATA frame, a decode and a gateway
 * write, whatever it carries; an upstream read often brings dozens of events, which the SSE reader parses at once
 * and offers without a promise (`[PULL]()`, src/lib/pull.ts). The streaming handlers gather those into one message:
 * after a message's first item (read as before, awaited when it is not at hand, so it is never delayed), every next
 * item that is at hand right now joins it, until the next one would have to be waited for, the stream ended, or the
 * message is full: {@link PACK_MAX_CHARS} characters of JSON text or {@link PACK_MAX_ITEMS} items. An item that
 * would overflow a message opens the next one (a message goes over the bound only when its first item alone does).
 * A read started to look for more and found waiting is kept for the next message; an error met while gathering is
 * thrown at the next read, after the items gathered before it went out. Order, errors and ends are those of the
 * source.
 */
import { PULL, type Pullable, type Pulled } from "../../lib/pull.js";

/** At most this many characters (UTF-16 code units) of JSON text in one packed message, unless its first item alone is longer. */
export const PACK_MAX_CHARS = 65_536;
/** At most this many items (chunks, events) in one packed message. */
export const PACK_MAX_ITEMS = 256;

const DONE: IteratorResult<never> = { done: true, value: undefined };
const ignore = (): void => undefined;

/** A source read one result at a time, with a look at whether the next one is at hand. */
export class AtHand<T> {
  /** A read `atHand` started that was not at hand: the next `next()` returns it. */
  private pending: Promise<IteratorResult<T>> | undefined;
  /** An error `atHand` met: the next `next()` throws it. */
  private error: { err: unknown } | undefined;

  constructor(private readonly it: AsyncIterator<T>) {}

  /** The next result (at hand as it is, else a promise); throws where the source's `next()` would reject. */
  next(): Pulled<T> {
    const pending = this.pending;
    if (pending !== undefined) {
      this.pending = undefined;
      return pending;
    }
    const error = this.error;
    if (error !== undefined) {
      this.error = undefined;
      throw error.err;
    }
    const it = this.it;
    const p = (it as Partial<Pullable<T>>)[PULL];
    return p !== undefined ? p.call(it) : it.next();
  }

  /**
   * The next result when it is at hand now; undefined when it is not (the read it started is kept for `next()`),
   * or when an error came instead (kept for `next()`), or a read or an error is already kept.
   */
  atHand(): IteratorResult<T> | undefined {
    if (this.pending !== undefined || this.error !== undefined) return undefined;
    const it = this.it;
    const p = (it as Partial<Pullable<T>>)[PULL];
    if (p === undefined) {
      // No result is ever at hand without `[PULL]`: its next() is the next message's first read.
      this.pending = it.next();
      return undefined;
    }
    let r: Pulled<T>;
    try {
      r = p.call(it);
    } catch (err) {
      this.error = { err };
      return undefined;
    }
    if (r instanceof Promise) {
      this.pending = r;
      return undefined;
    }
    return r;
  }

  /** Stops reading: a kept read's failure goes unheard; the source is closed unless `ended` (it ended or failed). */
  async close(ended: boolean): Promise<void> {
    this.pending?.catch(ignore);
    this.pending = undefined;
    if (!ended) await this.it.return?.();
  }
}

/** The size of a dialect's wire event (`{type, dataJson}`) for the bound: its name and its JSON text. */
export const sizeOfEvent = (e: { type: string; dataJson: string }): number => e.type.length + e.dataJson.length;
/** The size of an item of JSON text. */
export const sizeOfText = (s: string): number => s.length;

const NO_MORE: string[] = Object.freeze([]) as unknown as string[];

/**
 * The chat handler's messages with `pack_chunks`: `source` yields keepalives (objects, passed on as they are) and
 * chunks as JSON text; each message is made by `make` from a chunk and the chunks at hand after it (`more`: a
 * shared empty array when none, not to be changed).
 */
export function packChunks<K extends object, M>(source: AsyncIterator<K | string>, make: (first: string, more: string[]) => M): AsyncIterableIterator<K | M> {
  return new PackedChunks(source, make);
}

class PackedChunks<K extends object, M> implements AsyncIterableIterator<K | M> {
  private readonly src: AtHand<K | string>;
  /** A result read while gathering that did not fit (or the end): the next message's first. */
  private held: IteratorResult<K | string> | undefined;
  private ended = false;

  constructor(
    private readonly source: AsyncIterator<K | string>,
    private readonly make: (first: string, more: string[]) => M,
  ) {
    this.src = new AtHand(source);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<K | M>> {
    if (this.ended) return Promise.resolve(DONE);
    const held = this.held;
    if (held !== undefined) {
      this.held = undefined;
      return Promise.resolve(this.pack(held));
    }
    let r: Pulled<K | string>;
    try {
      r = this.src.next();
    } catch (err) {
      this.ended = true;
      return Promise.reject(err);
    }
    return r instanceof Promise ? r.then(this.pack, this.failed) : Promise.resolve(this.pack(r));
  }

  async return(): Promise<IteratorResult<K | M>> {
    if (!this.ended) {
      this.ended = true;
      await this.src.close(false);
    }
    return DONE;
  }

  async throw(err?: unknown): Promise<IteratorResult<K | M>> {
    await this.return();
    throw err;
  }

  private readonly failed = (err: unknown): never => {
    this.ended = true;
    throw err;
  };

  private readonly pack = (r: IteratorResult<K | string>): IteratorResult<K | M> => {
    if (r.done) {
      this.ended = true;
      return DONE;
    }
    const first = r.value;
    if (typeof first !== "string") return r as IteratorResult<K>;
    let more = NO_MORE;
    let size = first.length;
    const src = this.src;
    while (more.length < PACK_MAX_ITEMS - 1) {
      const n = src.atHand();
      if (n === undefined) break;
      const v = n.value;
      if (n.done || typeof v !== "string" || size + v.length > PACK_MAX_CHARS) {
        this.held = n;
        break;
      }
      if (more === NO_MORE) more = [];
      more.push(v);
      size += v.length;
    }
    return { done: false, value: this.make(first, more) };
  };
}

/**
 * The dialects' packing (Messages, Responses, Gemini): each canonical event of `source` becomes zero or more wire
 * items (`encode`, a new array each time: a message's first is filled with the items after it), and `end` gives the
 * closing ones after the last; `next()` gives the items of one message, or
 * undefined after the last message. Used by an async generator: `for (let b; (b = await p.next()); ) yield …`,
 * and `close()` in its `finally`.
 */
export class PackedItems<E, W> {
  private readonly src: AtHand<E>;
  /** Items that did not fit the last message: the next one's first. */
  private carry: W[] | undefined;
  /** The source ended (and `end` was asked), or failed. */
  private ended = false;

  constructor(
    source: AsyncIterator<E>,
    private readonly encode: (event: E) => W[],
    private readonly sizeOf: (item: W) => number,
    private readonly end: () => W[],
  ) {
    this.src = new AtHand(source);
  }

  /** The next message's items; undefined when there are no more. Throws (or rejects) with the source's error. */
  next(): W[] | undefined | Promise<W[] | undefined> {
    const carry = this.carry;
    if (carry !== undefined) {
      this.carry = undefined;
      return this.gather(carry);
    }
    return this.read();
  }

  /** Stops: a read kept for later goes unheard; the source is closed unless it ended or failed. */
  close(): Promise<void> {
    const ended = this.ended;
    this.ended = true;
    return this.src.close(ended);
  }

  private readonly read = (): W[] | undefined | Promise<W[] | undefined> => {
    for (;;) {
      if (this.ended) return undefined;
      let r: Pulled<E>;
      try {
        r = this.src.next();
      } catch (err) {
        this.ended = true;
        throw err;
      }
      if (r instanceof Promise) return r.then(this.first, this.failed);
      const items = this.itemsOf(r);
      if (items.length > 0) return this.gather(items);
    }
  };

  private readonly failed = (err: unknown): never => {
    this.ended = true;
    throw err;
  };

  private readonly first = (r: IteratorResult<E>): W[] | undefined | Promise<W[] | undefined> => {
    const items = this.itemsOf(r);
    return items.length > 0 ? this.gather(items) : this.read();
  };

  /** The items of one result: an event's, or at the end the closing ones. */
  private itemsOf(r: IteratorResult<E>): W[] {
    if (!r.done) return this.encode(r.value);
    this.ended = true;
    return this.end();
  }

  private gather(batch: W[]): W[] {
    const sizeOf = this.sizeOf;
    let size = 0;
    for (let i = 0; i < batch.length; i++) size += sizeOf(batch[i]!);
    const src = this.src;
    while (!this.ended && batch.length < PACK_MAX_ITEMS && size < PACK_MAX_CHARS) {
      const r = src.atHand();
      if (r === undefined) break;
      const more = this.itemsOf(r);
      if (more.length === 0) continue;
      let add = 0;
      for (let i = 0; i < more.length; i++) add += sizeOf(more[i]!);
      if (size + add > PACK_MAX_CHARS || batch.length + more.length > PACK_MAX_ITEMS) {
        this.carry = more;
        break;
      }
      for (let i = 0; i < more.length; i++) batch.push(more[i]!);
      size += add;
    }
    return batch;
  }
}

/**
 * A dialect stream's messages: each one `make` of the items `packed` gathered, the first with the stream's `first`
 * fields (its timing) spread after them, the rest without. `packed` is closed however the reader stops.
 */
export async function* packedMessages<E, W, M extends object>(packed: PackedItems<E, W>, first: object, make: (items: W[]) => M): AsyncGenerator<M> {
  let extra: object | undefined = first;
  try {
    for (let items; (items = await packed.next()) !== undefined; ) {
      yield extra === undefined ? make(items) : { ...make(items), ...extra };
      extra = undefined;
    }
  } finally {
    await packed.close();
  }
}
