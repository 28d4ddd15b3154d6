/**
 * Stage "cost": prices the answer at the served endpoint's catalog prices (docs/catalog.md, "Cost rules";
 * the arithmetic is src/core/catalog/cost.ts) and puts the figures on the usage the caller gets, as the
 * real-world service does:
 *
 *   usage.cost          what the generation costs the caller's account: the provider price, or 0 when the
 *                       caller's own provider key (BYOK) paid the provider
 *   usage.is_byok       whether a BYOK credential served it
 *   usage.cost_details  { upstream_inference_cost, upstream_inference_prompt_cost,
 *                         upstream_inference_completions_cost }: the provider's price and its prompt / completion
 *                       parts (per-request and per-image fees count in the prompt part)
 *
 * Non-streamed answers carry it on `usage`; streams on the event that carries `usage` (the last one). The
 * cost is kept on the call's tracking (`track.cost`, `track.catalogModel`) for the record stage. A model the
 * catalog does not know on the provider that served it is relayed as before, with `usage.cost: null`, and
 * stays uncatalogued (`track.catalogModel` null). Events without usage pass through uncopied.
 */
import { costOf, usd, type CostParts } from "../../catalog/cost.js";
import type { Catalog } from "../../catalog/catalog.js";
import type { StreamEvent, Usage } from "../model.js";
import { tapEvents } from "./tap.js";
import type { ChatCall, ChatStage } from "./stage.js";

/** The usage fields the cost stage adds (the real-world service's names). */
export interface PricedUsage extends Usage {
  is_byok?: boolean;
  cost_details?: { upstream_inference_cost: number; upstream_inference_prompt_cost: number; upstream_inference_completions_cost: number };
}

/** Input images of the request (`image_url` content parts), for per-image prices. */
function imagesOf(body: Readonly<Record<string, unknown>>): number {
  let n = 0;
  if (!Array.isArray(body.messages)) return 0;
  for (const m of body.messages as Array<{ content?: unknown }>) {
    if (!Array.isArray(m?.content)) continue;
    for (const part of m.content as Array<{ type?: unknown }>) if (part?.type === "image_url") n++;
  }
  return n;
}

/**
 * Prices `usage` at the served endpoint's prices and keeps the result on the call's tracking (`track.cost`,
 * `track.catalogModel`); undefined when the catalog does not know what served it (uncatalogued). The spend stage
 * settles with the same function, so a settled cost always equals the generation's.
 */
export function priceServed(catalog: Catalog, call: ChatCall, usage: Usage): CostParts | undefined {
  const { track } = call;
  const served = call.attempts.find((a) => a.provider === track.provider && a.credentialId === track.credentialId && a.requestedModel === track.model);
  const match = served && track.model !== null ? catalog.resolve(track.model, served.provider, served.call.model) : undefined;
  if (!match) {
    track.catalogModel = null;
    track.cost = null;
    return undefined;
  }
  const parts = costOf(match.endpoint.pricing, usage, imagesOf(call.request));
  track.catalogModel = match.model.slug;
  track.cost = { femtoUsd: parts.total, paidBy: track.credentialSource === "byok" ? "byok" : "platform" };
  return parts;
}

export function createCostStage(deps: { catalog: Catalog }): ChatStage {
  function price(call: ChatCall, usage: Usage): PricedUsage {
    const { track } = call;
    // A response-cache hit called no provider: it costs nothing (the usage is the cached answer's, docs/operations.md).
    if (track.cache === "hit") {
      track.cost = { femtoUsd: 0n, paidBy: "platform" };
      return { ...usage, cost: 0, is_byok: false, cost_details: { upstream_inference_cost: 0, upstream_inference_prompt_cost: 0, upstream_inference_completions_cost: 0 } };
    }
    const parts = priceServed(deps.catalog, call, usage);
    if (!parts) return { ...usage, cost: null };
    const byok = track.credentialSource === "byok";
    return {
      ...usage,
      cost: byok ? 0 : usd(parts.total),
      is_byok: byok,
      cost_details: {
        upstream_inference_cost: usd(parts.total),
        upstream_inference_prompt_cost: usd(parts.prompt + parts.cacheRead + parts.cacheWrite + parts.request + parts.image),
        upstream_inference_completions_cost: usd(parts.completion),
      },
    };
  }

  /** The stream's events with the usage event priced: a tap, no iterator layer of its own. */
  function meter(call: ChatCall, events: AsyncIterable<StreamEvent>): AsyncIterable<StreamEvent> {
    return tapEvents(events, { map: (event) => (event.usage ? { ...event, usage: price(call, event.usage) } : event) });
  }

  return {
    name: "cost",
    async run(call, next) {
      const outcome = await next();
      if (outcome.kind === "stream") return { kind: "stream", events: meter(call, outcome.events) };
      const usage = outcome.completion.usage;
      return usage ? { kind: "completion", completion: { ...outcome.completion, usage: price(call, usage) } } : outcome;
    },
  };
}
