/**
 * Stage "rate" (beside "limits", inside "record" so a refused request is still recorded; docs/limits.md): the
 * requests-per-minute and tokens-per-minute bounds of the caller's key and of its workspace, set through the
 * management API. Over a bound: 429 `rate_limited` with `Retry-After` (seconds until the minute frees room) and a
 * message naming the bound. The answer's prompt + completion tokens are added to the tokens-per-minute buckets
 * once known (the completion, or the stream's end, failure or cancellation).
 */
import { Reason, serviceError } from "../../errors.js";
import type { ChatRateLimiter, RateBucket } from "../../../lib/chat-rate-limiter.js";
import type { StreamEvent } from "../model.js";
import type { CallerLimits } from "../../auth.js";
import type { ChatCall, ChatOutcome, ChatStage, Next } from "./stage.js";

export function createRateStage(deps: { limiter: ChatRateLimiter }): ChatStage {
  return {
    name: "rate",
    run(call, next) {
      const l = call.caller.limits;
      if (!l || (l.keyRpm === null && l.keyTpm === null && l.workspaceRpm === null && l.workspaceTpm === null)) return next();
      return limited(call, next, l);
    },
  };

  async function limited(call: ChatCall, next: Next, l: CallerLimits): Promise<ChatOutcome> {
    const buckets: RateBucket[] = [];
    if (l.keyRpm !== null || l.keyTpm !== null) buckets.push({ id: `key:${call.caller.keyId}`, label: "API key", rpm: l.keyRpm, tpm: l.keyTpm });
    if (l.workspaceRpm !== null || l.workspaceTpm !== null) buckets.push({ id: `ws:${call.caller.workspaceId}`, label: "workspace", rpm: l.workspaceRpm, tpm: l.workspaceTpm });
    const admitted = await deps.limiter.admit(buckets);
    if (!admitted.ok) {
      throw serviceError(Reason.RATE_LIMITED, `${admitted.message}; retry after ${admitted.retryAfterSeconds} s`, {
        retryable: true,
        retryAfterSeconds: admitted.retryAfterSeconds,
      });
    }
    if (l.keyTpm === null && l.workspaceTpm === null) return next();
    let counted = false;
    const count = async (c: ChatCall) => {
      if (counted) return;
      counted = true;
      await deps.limiter.addTokens(buckets, c.track.usage?.total_tokens ?? (c.track.usage?.prompt_tokens ?? 0) + (c.track.usage?.completion_tokens ?? 0)).catch(() => undefined);
    };
    let outcome;
    try {
      outcome = await next();
    } catch (err) {
      await count(call);
      throw err;
    }
    if (outcome.kind === "completion") {
      await count(call);
      return outcome;
    }
    const inner = outcome.events[Symbol.asyncIterator]();
    const events: AsyncIterable<StreamEvent> = {
      [Symbol.asyncIterator]() {
        return {
          async next() {
            let r: IteratorResult<StreamEvent>;
            try {
              r = await inner.next();
            } catch (err) {
              await count(call);
              throw err;
            }
            if (r.done) await count(call);
            return r;
          },
          async return(value?: unknown) {
            try {
              return (await inner.return?.(value)) ?? { done: true as const, value: undefined };
            } finally {
              await count(call);
            }
          },
        };
      },
    };
    return { kind: "stream", events };
  }
}
