/**
 * Stream taps: how a stage observes (and may rewrite) a streamed answer's events without adding an iterator
 * layer per stage. A stage that needs the events or the end of the stream calls `tapEvents(events, tap)`; when
 * `events` is already a tapped stream not yet read, the tap joins it, so the stages around `execute` (limits,
 * cost, record) share one iterator: one `then` and one result object per chunk instead of an `await` per stage.
 *
 * The execute stage's answer is itself a tapped stream with no tap yet, whose source is the adapter's iterator
 * and whose {@link EventRelay} turns each item into the event passed on (key guard, usage, stamp) and a broken
 * source into an in-band error chunk: the execute relay and the taps are one iterator, not a generator and a
 * layer around it. The chat handler's message map may join as the last step ({@link TappedEvents.output}).
 *
 * Order: taps run in the order they were added, which is innermost stage first (a stage taps the events its
 * `next()` returned), exactly as nested wrappers would see them: a tap's `map` sees what the taps inside it made,
 * and at the end the inner stages' `end` run before the outer ones'.
 */
import type { StreamEvent } from "../model.js";
import { PULL, pulledAsPromise, type Pullable, type Pulled } from "../../../lib/pull.js";

/** How a stream ended, as a tap sees it. */
export type TapEnd =
  /** The source ended after its last event. */
  | { how: "done" }
  /** The source failed: `error` is what it threw (thrown on to the reader after every tap's `end`). */
  | { how: "failed"; error: unknown }
  /** The reader stopped reading (`return()`, e.g. a client that went away); the source was closed first. */
  | { how: "closed" };

export interface EventTap {
  /** Each event in order; returns the event to pass on (the same object, or a new one). */
  map?(event: StreamEvent): StreamEvent;
  /** Called once, whichever way the stream ends. */
  end?(end: TapEnd): void;
}

/**
 * What turns a source's items into the stream's events (the execute stage's relay of an attempt): the taps
 * of a {@link TappedEvents} run after it, in the same step.
 */
export interface EventRelay<S> {
  /** The events handed out before the source is read (made when the stream is first read), and whether the source already ended. */
  first(): { events: StreamEvent[]; done: boolean };
  /** The source's item as the event passed on. */
  event(item: S): StreamEvent;
  /** The source failed: the event that ends the stream in band, or undefined to fail the stream with `error`. */
  failed(error: unknown): StreamEvent | undefined;
  /** Closes the source: once the stream ended (before the taps' `end`), or when the reader stops. */
  close(): Promise<unknown>;
}

/** `events` with `tap` applied: the same object with one more tap when it is a tapped stream nobody has read yet. */
export function tapEvents(events: AsyncIterable<StreamEvent>, tap: EventTap): AsyncIterable<StreamEvent> {
  if (events instanceof TappedEvents && !events.started) {
    events.taps.push(tap);
    return events;
  }
  return new TappedEvents(events, [tap]);
}

/** A relayed source (`relay` makes its events) as a tapped stream that has no tap yet: taps join it until it is read. */
export function relayedEvents<S>(source: AsyncIterator<S>, relay: EventRelay<S>): TappedEvents {
  return new TappedEvents(source, [], relay);
}

const DONE: IteratorResult<never> = { done: true, value: undefined };

/**
 * A hand-written iterator (one `then` per event read from the source, no `async` method): the events of `source`
 * (through `relay` when given) with every tap's `map` applied in order, and every tap's `end` once.
 */
export class TappedEvents implements AsyncIterableIterator<StreamEvent> {
  /** Read (or asked for its iterator): taps can no longer join. */
  started = false;
  private maps: Array<(event: StreamEvent) => StreamEvent> = [];
  /** The last step (the reader's own map, {@link output}): an error of it closes the stream and is thrown. */
  private out: ((event: StreamEvent) => unknown) | undefined;
  private it: AsyncIterator<unknown> | undefined;
  /** The events made before the source is read (a relay's) and how many were handed out. */
  private ready: StreamEvent[] | undefined;
  private at = 0;
  /** Nothing more to read from the source (it ended, or failed in band). */
  private drained = false;
  /** Ended: every tap's `end` ran (or is running). */
  private ended = false;

  constructor(
    private readonly source: AsyncIterable<unknown> | AsyncIterator<unknown>,
    readonly taps: EventTap[],
    private readonly relay?: EventRelay<unknown>,
  ) {}

  [Symbol.asyncIterator](): this {
    this.start();
    return this;
  }

  /**
   * The stream with `fn` applied to each event after the taps (no layer of its own; before it is read). An error
   * of `fn` closes the stream (the source, then the taps' `end` with "closed") and is thrown to the reader.
   */
  output<M>(fn: (event: StreamEvent) => M): AsyncIterableIterator<M> {
    this.out = fn;
    this.start();
    return this as unknown as AsyncIterableIterator<M>;
  }

  /** `[PULL]()` as a promise. */
  next(): Promise<IteratorResult<StreamEvent>> {
    return pulledAsPromise(this);
  }

  /**
   * `next()` without a promise when the source has its item at hand (its own `[PULL]()`, src/lib/pull.ts): the
   * relay, the taps and the reader's map run at once on it. Throws where `next()` would reject.
   */
  [PULL](): Pulled<StreamEvent> {
    if (this.ended) return DONE;
    this.start();
    const relay = this.relay;
    if (relay !== undefined) {
      if (this.ready === undefined) {
        let first: { events: StreamEvent[]; done: boolean };
        try {
          first = relay.first();
        } catch (err) {
          return this.onError(err);
        }
        this.ready = first.events;
        this.drained = first.done;
      }
      if (this.at < this.ready.length) return this.passed(this.ready[this.at++]!);
    }
    if (this.drained) return this.finish();
    let r: Pulled<unknown>;
    try {
      const it = this.it!;
      const p = (it as Partial<Pullable<unknown>>)[PULL];
      r = p !== undefined ? p.call(it) : it.next();
    } catch (err) {
      return this.onError(err);
    }
    return r instanceof Promise ? r.then(this.onResult, this.onError) : this.onResult(r);
  }

  async return(): Promise<IteratorResult<StreamEvent>> {
    this.start();
    if (!this.ended) {
      this.ended = true;
      try {
        await this.closeSource();
      } finally {
        this.end({ how: "closed" });
      }
    }
    return DONE;
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    for (const t of this.taps) if (t.map) this.maps.push(t.map.bind(t));
    const source = this.source;
    this.it = Symbol.asyncIterator in source ? source[Symbol.asyncIterator]() : source;
  }

  private readonly onResult = (r: IteratorResult<unknown>): IteratorResult<StreamEvent> | Promise<IteratorResult<StreamEvent>> => {
    if (this.ended) return DONE;
    if (r.done) {
      this.drained = true;
      return this.finish();
    }
    return this.passed(this.relay !== undefined ? this.relay.event(r.value) : (r.value as StreamEvent));
  };

  private readonly onError = (error: unknown): IteratorResult<StreamEvent> | Promise<IteratorResult<StreamEvent>> => {
    if (this.relay !== undefined && !this.ended) {
      const inBand = this.relay.failed(error);
      if (inBand !== undefined) {
        this.drained = true;
        return this.passed(inBand);
      }
      // The source is closed before the taps hear of the failure (as a generator's `finally` would).
      return this.relay.close().then(
        () => this.fail(error),
        (err: unknown) => this.fail(err),
      );
    }
    return this.fail(error);
  };

  /** `event` through every tap's `map`, then the reader's own. */
  private passed(event: StreamEvent): IteratorResult<StreamEvent> | Promise<IteratorResult<StreamEvent>> {
    let value = event;
    const maps = this.maps;
    for (let i = 0; i < maps.length; i++) value = maps[i]!(value);
    if (this.out === undefined) return { done: false, value };
    let message: unknown;
    try {
      message = this.out(value);
    } catch (err) {
      const rethrow = (): never => {
        throw err;
      };
      return this.return().then(rethrow, rethrow);
    }
    return { done: false, value: message as StreamEvent };
  }

  /** The source ended: closed (a relay's), then every tap's `end` with "done". */
  private finish(): IteratorResult<StreamEvent> | Promise<IteratorResult<StreamEvent>> {
    if (this.relay === undefined) return this.done();
    return this.relay.close().then(
      () => this.done(),
      (err: unknown) => this.fail(err),
    );
  }

  private done(): IteratorResult<StreamEvent> {
    if (!this.ended) {
      this.ended = true;
      this.end({ how: "done" });
    }
    return DONE;
  }

  private fail(error: unknown): never {
    if (!this.ended) {
      this.ended = true;
      this.end({ how: "failed", error });
    }
    throw error;
  }

  private closeSource(): Promise<unknown> | undefined {
    return this.relay !== undefined ? this.relay.close() : this.it?.return?.();
  }

  /** Every tap's `end`; the first error one throws is thrown after all ran. */
  private end(e: TapEnd): void {
    let first: { error: unknown } | undefined;
    for (const t of this.taps) {
      try {
        t.end?.(e);
      } catch (error) {
        first ??= { error };
      }
    }
    if (first) throw first.error;
  }
}
