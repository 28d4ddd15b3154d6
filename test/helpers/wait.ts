/**
 * The one polling helper of the tests: waits for a condition that an event outside the test's reach
 * (another process, a database row, a log line) makes true, with a deadline and a message naming what
 * was awaited. Prefer waiting on the event itself (a promise, a stream chunk, an "exit") when the test
 * holds it; poll only what cannot be observed otherwise.
 */

export interface WaitOptions {
  /** Give up after this long (default 10 s; a loaded 2-core machine needs headroom). */
  timeoutMs?: number;
  /** Pause between probes (default 25 ms). */
  intervalMs?: number;
  /**
   * Judge the deadline by when a probe started, not by when it answered (default false): a probe that started
   * in time and answers "not yet" after the deadline earns one more probe. For a bound under test (refused
   * within N ms): a probe reads the state of the moment it started, so a slow answer on a loaded machine does
   * not count against the bound.
   */
  byProbeStart?: boolean;
}

/** A probe's "not yet": undefined, null or false. Any other value (0 and "" included) ends the wait. */
type Found<T> = Exclude<T, undefined | null | false>;

/**
 * Calls `probe` until it returns something other than undefined, null or false, and resolves with that
 * value. A probe that throws counts as "not yet" (so `expect` inside a probe reads as "eventually");
 * after `timeoutMs` the wait rejects with `timed out after N ms waiting for <what>` (a function is called
 * then, to describe the state at that moment) and the last value or error the probe gave.
 */
export async function waitFor<T>(what: string | (() => string), probe: () => T | PromiseLike<T>, opts: WaitOptions = {}): Promise<Found<T>> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const intervalMs = opts.intervalMs ?? 25;
  const deadline = Date.now() + timeoutMs;
  let last: { value: unknown } | { error: unknown } | undefined;
  for (;;) {
    const started = Date.now();
    try {
      const value = await probe();
      if (value !== undefined && value !== null && value !== false) return value as Found<T>;
      last = { value };
    } catch (error) {
      last = { error };
    }
    if ((opts.byProbeStart ? started : Date.now()) >= deadline) {
      const tail =
        last && "error" in last
          ? `; the probe last threw: ${last.error instanceof Error ? last.error.message : String(last.error)}`
          : `; the probe last gave ${String((last as { value: unknown } | undefined)?.value)}`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === "function" ? what() : what}${tail}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
