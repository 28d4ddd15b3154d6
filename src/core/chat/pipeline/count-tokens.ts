/**
 * Counting a request's input tokens, as Messages' `count_tokens` and the Gemini dialect's `countTokens` do: the
 * request goes through the given stages up to planning (nothing is called upstream by the pipeline); when the first
 * planned attempt's adapter can count, the provider counts (exact), else Portico estimates (src/lib/token-count.ts).
 */
import type { Logger } from "pino";
import { Reason, serviceError } from "../../errors.js";
import { estimateInputTokens } from "../dialects/anthropic-messages.js";
import { UpstreamError } from "../providers/types.js";
import { tokenCounter } from "../../../lib/token-count.js";
import { compose, type ChatCall, type ChatStage } from "./stage.js";

/** Ends the count's chain after planning. */
const planOnly: ChatStage = {
  name: "plan-only",
  run: () => Promise.resolve({ kind: "stream", events: (async function* () {})() }),
};

/** Plans `call` through `stages`, then counts its input tokens; `provider` is "" for an estimate. */
export async function countInputTokens(call: ChatCall, stages: readonly ChatStage[], logger: Logger): Promise<{ tokens: bigint; exact: boolean; provider: string }> {
  await compose([...stages, planOnly])(call);
  const counter = call.attempts.find((a) => a.adapter.countTokens !== undefined);
  if (!counter || counter !== call.attempts[0]) {
    return { tokens: BigInt(estimateInputTokens(call.request, await tokenCounter())), exact: false, provider: "" };
  }
  try {
    const n = await counter.adapter.countTokens!(counter.call);
    return { tokens: BigInt(n), exact: true, provider: counter.provider };
  } catch (err) {
    if (!(err instanceof UpstreamError)) throw err;
    logger.info({ provider: counter.provider, status: err.status }, "token count failed upstream");
    throw serviceError(Reason.UPSTREAM_FAILED, `The provider could not count the tokens: ${err.message}`, { retryable: err.retryable });
  }
}
