/**
 * A stream's next item without a promise when it is already at hand (issue 24, "CPU per relayed chunk").
 *
 * A streamed chat answer crosses several iterators between the upstream socket and the SSE response: the SSE
 * reader, the pipeline's tapped stream, the error boundary, the in-process transport, the gateway's relay loop.
 * Each `next()` hands out a promise and each layer adds a `then` to it: per relayed chunk, four or five promises,
 * their reactions and microtask turns, and the result objects between them, even when the chunk was parsed out of
 * an upstream read that delivered dozens of events at once.
 *
 * An iterator may also offer `[PULL]()`: the same as `next()`, except that it returns the result itself when it is
 * at hand (no promise) and may throw where `next()` would reject. A layer that has it pulls from its source with
 * {@link pull} (the source's `[PULL]()`, or its `next()` when it has none), passes a result at hand on at once and a
 * promise on through its `then` as before. The reader at the end (the gateway's relay) awaits only a promise, so a
 * burst of events already parsed goes from the reader to the response in one run of plain calls. `next()` of each
 * layer keeps its contract, and only a reader that pulls sees results without a promise. The SSE reader and the
 * tapped stream implement `next()` as their `[PULL]()` wrapped in a promise, so they have one read path. The order
 * of items, errors, ends and every side effect is that of `next()`; only the microtask turns between them go.
 */
export const PULL: unique symbol = Symbol("pull");

/** The next result of an iterator: at hand, or a promise of it. */
export type Pulled<T> = IteratorResult<T> | Promise<IteratorResult<T>>;

export interface Pullable<T> {
  /** `next()` without a promise when the result is at hand; throws where `next()` would reject. */
  [PULL](): Pulled<T>;
}

/**
 * The next result of `it`: its `[PULL]()` when it has one, else its `next()`. May throw (a rejection of `next()`).
 * For tests and cold paths: a layer on the hot path reads its source's `[PULL]` at its own site (one class of
 * iterator there), not through this function, whose property load would see every layer's iterator classes.
 */
export function pull<T>(it: AsyncIterator<T>): Pulled<T> {
  const p = (it as Partial<Pullable<T>>)[PULL];
  return p !== undefined ? p.call(it) : it.next();
}

/** Whether `it` offers `[PULL]()`. */
export function isPullable<T>(it: object): it is Pullable<T> {
  return typeof (it as Partial<Pullable<T>>)[PULL] === "function";
}

/** `it[PULL]()` as `next()` gives it: a result at hand resolved, a throw rejected (for iterators whose `next()` is their `[PULL]()`). */
export function pulledAsPromise<T>(it: Pullable<T>): Promise<IteratorResult<T>> {
  let r: Pulled<T>;
  try {
    r = it[PULL]();
  } catch (err) {
    return Promise.reject(err);
  }
  return r instanceof Promise ? r : Promise.resolve(r);
}
