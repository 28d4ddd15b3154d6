/**
 * Stream taps: how a stage observes (and may rewrite) a streamed answer's events without adding an iterator
 * layer per stage. A stage that needs the events or the end of the stream calls `tapEvents(events, tap)`; when
 * `events` is already a tapped stream not yet read, the tap joins it, so the stages around `execute` (limits,
 * cost, record) share one iterator: one `await` and one result object per chunk instead of one per stage.
 *
 * Order: taps run in the order they were added, which is innermost stage first (a stage taps the events its
 * `next()` returned), exactly as nested wrappers would see them: a tap's `map` sees what the taps inside it made,
 * and at the end the inner stages' `end` run before the outer ones'.
 */
import type { StreamEvent } from "../model.js";

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

/** `events` with `tap` applied: the same object with one more tap when it is a tapped stream nobody has read yet. */
export function tapEvents(events: AsyncIterable<StreamEvent>, tap: EventTap): AsyncIterable<StreamEvent> {
  if (events instanceof TappedEvents && !events.started) {
    events.taps.push(tap);
    return events;
  }
  return new TappedEvents(events, [tap]);
}

class TappedEvents implements AsyncIterable<StreamEvent> {
  started = false;
  constructor(
    readonly source: AsyncIterable<StreamEvent>,
    readonly taps: EventTap[],
  ) {}

  [Symbol.asyncIterator](): AsyncIterator<StreamEvent> {
    this.started = true;
    const taps = this.taps.slice();
    const maps = taps.flatMap((t) => (t.map ? [t.map.bind(t)] : []));
    const it = this.source[Symbol.asyncIterator]();
    let ended = false;
    const end = (e: TapEnd) => {
      let first: { error: unknown } | undefined;
      for (const t of taps) {
        try {
          t.end?.(e);
        } catch (error) {
          first ??= { error };
        }
      }
      if (first) throw first.error;
    };
    return {
      async next(): Promise<IteratorResult<StreamEvent>> {
        if (ended) return { done: true, value: undefined };
        let r: IteratorResult<StreamEvent>;
        try {
          r = await it.next();
        } catch (error) {
          if (!ended) {
            ended = true;
            end({ how: "failed", error });
          }
          throw error;
        }
        if (r.done) {
          ended = true;
          end({ how: "done" });
          return r;
        }
        if (maps.length === 0) return r;
        let value = r.value;
        for (const map of maps) value = map(value);
        return { done: false, value };
      },
      async return(): Promise<IteratorResult<StreamEvent>> {
        if (!ended) {
          ended = true;
          try {
            await it.return?.();
          } finally {
            end({ how: "closed" });
          }
        }
        return { done: true, value: undefined };
      },
    };
  }
}
