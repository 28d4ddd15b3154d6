/**
 * Stage "limits": at most `maxConcurrentPerKey` chat completions in flight per API key (PORTICO_CHAT_MAX_CONCURRENT_PER_KEY;
 * docs/chat.md "Limits"). One more is refused with 429 `rate_limited` and `Retry-After: 1` before any other work
 * (validation, presets, credentials, upstream), so a key that floods the service spends its own budget and
 * nobody else's: each key has its own slots. It runs inside "record", so a refused request is still recorded.
 *
 * A slot is held from here until the answer is complete: for a non-streamed request until the completion or
 * the error (a caller that leaves aborts the upstream call, which ends it); for a stream until its last event, an
 * error, the consumer leaving (`return()` on the events), or the caller's signal aborting (the client left, even
 * before the stream was read). Releasing is idempotent.
 * The count is shared by every process that counts with the same limiter (src/lib/concurrency-limiter.ts).
 */
import { Reason, serviceError } from "../../errors.js";
import type { ConcurrencyLimiter, Slot } from "../../../lib/concurrency-limiter.js";
import type { StreamEvent } from "../model.js";
import type { ChatCall, ChatOutcome, ChatStage, Next } from "./stage.js";
import { tapEvents } from "./tap.js";

export interface LimitsDeps {
  limiter: ConcurrencyLimiter;
  /** 0: no bound. */
  maxConcurrentPerKey: number;
}

export function createLimitsStage(deps: LimitsDeps): ChatStage {
  const max = deps.maxConcurrentPerKey;
  return {
    name: "limits",
    run(call, next) {
      return max <= 0 ? next() : held(call, next);
    },
  };

  async function held(call: ChatCall, next: Next): Promise<ChatOutcome> {
    const slot = await deps.limiter.acquire(call.caller.keyHash, max);
    if (!slot) {
      throw serviceError(
        Reason.RATE_LIMITED,
        `Too many chat completions in flight for this API key (at most ${max} at once); retry when one has finished`,
        { retryAfterSeconds: 1 },
      );
    }
    // A non-streamed request holds its slot until its answer or error (the caller leaving aborts the upstream
    // call, which ends it); a stream also until the caller leaves, even if it is never read: only a stream
    // listens to the signal (a listener added and removed costs more than the rest of this stage).
    let release = () => slot.release();
    if (call.streamed) {
      const onAbort = () => slot.release();
      release = () => {
        call.signal.removeEventListener("abort", onAbort);
        slot.release();
      };
      if (call.signal.aborted) release();
      else call.signal.addEventListener("abort", onAbort, { once: true });
    }
    let outcome;
    try {
      outcome = await next();
    } catch (err) {
      release();
      throw err;
    }
    if (outcome.kind === "completion") {
      release();
      return outcome;
    }
    return { kind: "stream", events: releasing(outcome.events, { release }) };
  }
}

/** `events` unchanged, with `slot` released when they end, fail or are closed by the consumer: a tap, no iterator layer of its own. */
function releasing(events: AsyncIterable<StreamEvent>, slot: Slot): AsyncIterable<StreamEvent> {
  return tapEvents(events, { end: () => slot.release() });
}
