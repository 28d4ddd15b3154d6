/**
 * Stage "spend" (between plan and execute; docs/limits.md): a key with a spend limit, or a key whose workspace has
 * a budget, never spends past it, whatever the number of concurrent requests and instances.
 *
 * Before the upstream call it reserves the request's largest possible cost (src/core/spend/max-cost.ts: the prompt
 * bounded by the body's bytes at the endpoint's highest prompt-side price, plus the output bound at its highest
 * output-side price; the largest over the planned attempts; 0 for an attempt a BYOK credential serves, which the
 * customer's own provider key pays) against the key's and the workspace's counters (src/core/spend/spend-store.ts).
 * A reservation that does not fit is 402 `spend_limit_exceeded` naming the limit. After the answer (the completion,
 * the stream's end, its failure or the consumer leaving) it settles at the generation's cost, computed by the cost
 * stage's own function, and releases the rest. A stream the client cancels before the provider reported usage is
 * billed for what was relayed (an estimate, below) and that estimate is what the generation records.
 *
 * A planned attempt on an endpoint the catalog cannot price (uncatalogued) is refused (400 naming `model`) when a
 * limit applies: its cost could not be bounded. While a stream runs, its reservation's expiry is pushed on, so only
 * a reservation whose process died is released by expiry.
 */
import type { Logger } from "pino";
import type { Catalog } from "../../catalog/catalog.js";
import { Reason, invalidArgument, serviceError } from "../../errors.js";
import { usd } from "../../catalog/cost.js";
import { maxCostOf, nativeSearchBound, promptTokenBound, searchFeesOf } from "../../spend/max-cost.js";
import { keyCounterId, workspaceCounterId, type SpendStore } from "../../spend/spend-store.js";
import type { StreamEvent, Usage } from "../model.js";
import { accountCostOf, priceServed } from "./cost.js";
import type { CallerLimits } from "../../auth.js";
import type { Attempt, ChatCall, ChatOutcome, ChatStage, Next } from "./stage.js";

export interface SpendDeps {
  catalog: Catalog;
  store: SpendStore;
  /** The reservations' expiry (PORTICO_SPEND_RESERVATION_TTL_MS); live streams extend theirs every third of it. */
  reservationTtlMs: number;
  logger: Logger;
}

/** Bytes of text per token assumed for a cancelled stream whose usage the provider never reported. */
const BYTES_PER_TOKEN_ESTIMATE = 4;

const dollars = (f: bigint) => `$${usd(f).toFixed(6).replace(/0+$/, "").replace(/\.$/, "")}`;

export function createSpendStage(deps: SpendDeps): ChatStage {
  const { catalog, store } = deps;

  /** The largest cost the account can be charged for `call` (femto-USD). */
  function bound(call: ChatCall): bigint {
    let max = 0n;
    for (const a of call.attempts) {
      if (a.credentialSource === "byok") continue;
      const match = catalog.resolve(a.requestedModel, a.provider, a.call.model);
      if (!match) {
        throw invalidArgument(
          "model",
          `${a.requestedModel} on provider ${a.provider} has no price in the model catalog, and this key has a spend limit (or its workspace a budget): an unpriced request cannot be bounded. Add the model to the catalog (PORTICO_CATALOG_FILE) or serve it with your own provider key (BYOK)`,
        );
      }
      const c = maxCostOf(a.call.body, match.endpoint) + searchFeesOf(searchesOf(a), match.endpoint);
      if (c > max) max = c;
    }
    return max;
  }

  /** The most native searches `a` can be billed for; a 400 naming the field that asked when nothing bounds them. */
  function searchesOf(a: Attempt): number {
    const n = nativeSearchBound(a.call, a.adapter.format);
    if (n !== undefined) return n;
    const field = `${a.call.webSearch?.askedBy ?? "plugins"}.max_uses`;
    throw invalidArgument(
      field,
      `${field} is required for ${a.requestedModel}'s native web search on ${a.provider} when this key has a spend limit (or its workspace a budget): without it the provider's searches, billed per search, cannot be bounded`,
    );
  }

  /** The account's cost of the answer as the generation records it (0 when unpriced or BYOK-paid). */
  function settledCost(call: ChatCall, relayedBytes: number, relayedChunks: number): bigint {
    const { track } = call;
    if (track.provider === null) {
      // The request's own call served nothing; calls made on its behalf (a fusion panel that answered before the
      // judge failed) still cost what they cost.
      let nested = 0n;
      for (const n of track.nested) if (n.paidBy === "platform" && n.cost) nested += n.cost.total;
      return nested;
    }
    let usage: Usage | null = track.usage;
    if (!usage && track.status === "cancelled" && (relayedChunks > 0 || track.timeToFirstTokenMs !== null)) {
      // The client left before the provider reported usage: Portico's own count of what was produced (docs/limits.md).
      const prompt = Math.ceil(promptTokenBound(call.request) / BYTES_PER_TOKEN_ESTIMATE);
      const completion = Math.max(relayedChunks, Math.ceil(relayedBytes / BYTES_PER_TOKEN_ESTIMATE));
      usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
      track.usage = usage;
    }
    if (!usage) return 0n;
    const parts = priceServed(catalog, call, usage);
    // accountCostOf: 0 when BYOK served it; with a fusion panel, the platform-paid calls of it too.
    return parts ? accountCostOf(call.track) : 0n;
  }

  return {
    name: "spend",
    run(call, next) {
      const limits = call.caller.limits;
      if (!limits || (!limits.keySpend && !limits.workspaceSpend)) {
        // No limit: nothing to reserve (no async step of its own unless a plugin deferred work until here).
        return call.afterReserve ? runDeferred(call).then(next) : next();
      }
      return reserved(call, next, limits);
    },
  };

  async function reserved(call: ChatCall, next: Next, limits: CallerLimits): Promise<ChatOutcome> {
    // The request's own call, plus what a plugin calls on its behalf first (the fusion panel: call.reserveExtra).
    const amount = bound(call) + (call.reserveExtra ?? 0n);
    const counters = {
      key: limits.keySpend ? keyCounterId(call.caller.keyId) : null,
      ws: limits.workspaceSpend ? workspaceCounterId(call.caller.workspaceId) : null,
    };
    const r = await store.reserve({ key: counters.key, workspace: counters.ws, amount });
    if (!r.ok) {
      const which = r.refusedBy === "key" ? "this API key's spend limit" : "the workspace's budget";
      throw serviceError(
        Reason.SPEND_LIMIT_EXCEEDED,
        `This request could cost up to ${dollars(amount)}, more than the ${dollars(r.remaining)} left of ${which} (${dollars(r.limit)}); lower max_completion_tokens, raise the limit or wait for its reset`,
        { field: r.refusedBy === "key" ? "limit" : "workspace.budget" },
      );
    }
    const keepAlive = setInterval(() => void store.extend(r.id).catch(() => undefined), Math.max(50, Math.floor(deps.reservationTtlMs / 3)));
    keepAlive.unref();
    let settled: Promise<void> | undefined;
    let relayedBytes = 0;
    let relayedChunks = 0;
    const settle = (): Promise<void> => {
      if (settled) return settled;
      clearInterval(keepAlive);
      const cost = settledCost(call, relayedBytes, relayedChunks);
      if (cost > amount) {
        // The bound did not hold (a provider counted more than the body's bytes): the real cost still counts.
        deps.logger.warn({ generation: call.track.id, reserved: amount.toString(), cost: cost.toString() }, "a generation cost more than its reservation");
      }
      settled = store.settle(r.id, cost, counters).catch((err: unknown) => {
        // The reservation stays until its expiry releases it; the cost is still on the generation record.
        deps.logger.error({ err, generation: call.track.id }, "spend settlement failed");
      });
      return settled;
    };
    let outcome;
    try {
      await runDeferred(call);
      outcome = await next();
    } catch (err) {
      await settle();
      throw err;
    }
    if (outcome.kind === "completion") {
      await settle();
      return outcome;
    }
    const inner = outcome.events[Symbol.asyncIterator]();
    const count = (e: StreamEvent) => {
      for (const c of e.choices ?? []) {
        const d = c.delta as Record<string, unknown> | undefined;
        if (!d) continue;
        let n = 0;
        for (const k of ["content", "reasoning", "reasoning_content", "refusal"]) if (typeof d[k] === "string") n += Buffer.byteLength(d[k] as string);
        if (Array.isArray(d.tool_calls)) for (const t of d.tool_calls as Array<{ function?: { arguments?: unknown } }>) {
          if (typeof t?.function?.arguments === "string") n += Buffer.byteLength(t.function.arguments);
        }
        if (n > 0) {
          relayedBytes += n;
          relayedChunks++;
        }
      }
    };
    // A hand-written iterator (see record.ts); the events pass through uncopied.
    const events: AsyncIterable<StreamEvent> = {
      [Symbol.asyncIterator]() {
        return {
          async next() {
            let res: IteratorResult<StreamEvent>;
            try {
              res = await inner.next();
            } catch (err) {
              if (call.signal.aborted && call.track.status === "pending") call.track.status = "cancelled";
              await settle();
              throw err;
            }
            if (res.done) await settle();
            else count(res.value);
            return res;
          },
          async return(value?: unknown) {
            try {
              return (await inner.return?.(value)) ?? { done: true as const, value: undefined };
            } finally {
              if (call.track.status === "pending") call.track.status = "cancelled";
              await settle();
            }
          },
          async throw(err?: unknown) {
            await settle();
            if (inner.throw) return inner.throw(err);
            throw err;
          },
        };
      },
    };
    return { kind: "stream", events };
  }
}

/** Runs the work plugins deferred until the reservation (ChatCall.afterReserve: the fusion panel), once. */
async function runDeferred(call: ChatCall): Promise<void> {
  const work = call.afterReserve;
  if (!work) return;
  call.afterReserve = undefined;
  for (const w of work) await w();
}
