/**
 * Waiting for a streaming request's outcome with keepalives, for every dialect's streaming RPC: until the chain
 * answers (a stream that has its first event, or an error), `keepalive` is yielded after FIRST_KEEPALIVE_MS (or the
 * operator's interval when shorter) and then every `keepaliveMs`, so the gateway and gRPC clients see the stream is
 * alive while attempts are planned and providers think. The outcome is the generator's return value
 * (`const outcome = yield* untilOutcome(…)`). When the consumer leaves during a keepalive, a stream that opens later
 * is started and returned unread, so its cleanup (record, upstream close) still runs.
 */
import type { ChatOutcome } from "./stage.js";

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
