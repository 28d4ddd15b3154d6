/**
 * Waiting for a streaming request's outcome with keepalives, for every dialect's streaming RPC: until the chain
 * answers (a stream that has its first event, or an error), `keepalive` is yielded after FIRST_KEEPALIVE_MS (or the
 * operator's interval when shorter) and then every `keepaliveMs`, so the gateway and gRPC clients see the stream is
 * alive while attempts are planned and providers think. The outcome is the generator's return value
 * (`const outcome = yield* untilOutcome(…)`). When the consumer leaves during a keepalive, a stream that opens later
 * is started and returned unread, so its cleanup (record, upstream close) still runs.
 */
import type { StreamEvent } from "../model.js";
import type { ChatOutcome } from "./stage.js";
import { TappedEvents } from "./tap.js";
import { PULL, type Pullable, type Pulled } from "../../../lib/pull.js";

/** The first keepalive of a stream that has no chunk yet goes out after at most this long (as the gateway opens its SSE response). */
export const FIRST_KEEPALIVE_MS = 1_000;

export async function* untilOutcome<K>(pending: Promise<ChatOutcome>, keepaliveMs: number, keepalive: K): AsyncGenerator<K, ChatOutcome> {
  let outcome: ChatOutcome | undefined;
  let waitMs = Math.min(FIRST_KEEPALIVE_MS, keepaliveMs);
  try {
    while (outcome === undefined) {
      let timer: NodeJS.Timeout | undefined;
      const tick = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, waitMs, undefined)));
      try {
        outcome = await Promise.race([pending, tick]);
      } finally {
        clearTimeout(timer);
      }
      if (outcome === undefined) {
        yield keepalive;
        waitMs = keepaliveMs;
      }
    }
  } finally {
    if (outcome === undefined) void pending.then((o) => (o.kind === "stream" ? drop(o.events) : undefined), () => undefined);
  }
  return outcome;
}

/** Reads a stream nobody will consume to its end of life: starting and returning it runs its cleanup (record, upstream close). */
async function drop(events: AsyncIterable<unknown>): Promise<void> {
  const it = events[Symbol.asyncIterator]();
  try {
    await it.next();
  } catch {
    /* nobody to tell */
  } finally {
    await it.return?.(undefined);
  }
}

const ITERATION_DONE: IteratorResult<never> = { done: true, value: undefined };

/**
 * The messages of a streamed answer: those `head` yields (the keepalives of {@link untilOutcome} until the
 * answer begins), then each event of the stream `head` returns through `map`. The events' part is a hand-written
 * iterator, not a `for await` … `yield` in the handler's generator: one generator layer less per chunk (a
 * resumption and its promises; bench/README.md, "CPU per relayed chunk, the writes and the reader"). As with that
 * generator: an error of the events ends the messages with it; an error of `map` closes the events first; a
 * reader that stops (`return()`) closes the events, or `head` before them (whose `finally` drops the stream).
 */
export function thenEvents<K, E, M>(head: AsyncGenerator<K, AsyncIterable<E>>, map: (event: E) => M): AsyncIterableIterator<K | M> & Pullable<K | M> {
  let events: AsyncIterator<E> | undefined;
  let done = false;
  const failed = (err: unknown): never => {
    done = true;
    throw err;
  };
  const mapped = (r: IteratorResult<E>): IteratorResult<M> | Promise<IteratorResult<M>> => {
    if (r.done) {
      done = true;
      return ITERATION_DONE;
    }
    let value: M;
    try {
      value = map(r.value);
    } catch (err) {
      done = true;
      const rethrow = (): never => {
        throw err;
      };
      return Promise.resolve(events!.return?.()).then(rethrow, rethrow);
    }
    return { done: false, value };
  };
  // A tapped stream nobody has read yet (the pipeline's answer) takes `map` as its last step: its `next()` is
  // handed on as is, no `then` of this iterator's per event.
  let direct: AsyncIterator<M> | undefined;
  const fromHead = (r: IteratorResult<K, AsyncIterable<E>>): IteratorResult<K | M> | Promise<IteratorResult<K | M>> => {
    if (!r.done) return r;
    const source = r.value;
    if (source instanceof TappedEvents && !source.started) {
      direct = source.output(map as unknown as (event: StreamEvent) => M);
      events = direct as unknown as AsyncIterator<E>;
      return direct.next();
    }
    events = source[Symbol.asyncIterator]();
    return events.next().then(mapped, failed);
  };
  const close = async (): Promise<void> => {
    if (done) return;
    done = true;
    if (events) await events.return?.();
    else await head.return(undefined as never);
  };
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    next() {
      if (done) return Promise.resolve(ITERATION_DONE);
      if (direct) return direct.next();
      return events ? events.next().then(mapped, failed) : head.next().then(fromHead, failed);
    },
    // Once the tapped stream is the last step, its own `[PULL]()` (src/lib/pull.ts); `next()` otherwise.
    [PULL](): Pulled<K | M> {
      if (done) return ITERATION_DONE;
      if (direct) return (direct as unknown as TappedEvents)[PULL]() as Pulled<K | M>;
      return this.next();
    },
    async return() {
      await close();
      return ITERATION_DONE;
    },
    async throw(err?: unknown) {
      await close();
      throw err;
    },
  };
}
