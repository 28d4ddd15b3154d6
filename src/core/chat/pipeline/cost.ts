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
import { copyOf } from "../../../lib/copy.js";
import type { CanonicalRequest, StreamEvent, Usage } from "../model.js";
import { tapEvents } from "./tap.js";
import type { ChatCall, ChatStage } from "./stage.js";

/** The usage fields the cost stage adds (the real-world service's names). */
export interface PricedUsage extends Usage {
  is_byok?: boolean;
  cost_details?: { upstream_inference_cost: number; upstream_inference_prompt_cost: number; upstream_inference_completions_cost: number };
}

/** Input images of the request (`image_url` content parts), for per-image prices. */
export function imagesOf(body: Readonly<CanonicalRequest>): number {
  let n = 0;
  if (!Array.isArray(body.messages)) return 0;
  for (const m of body.messages) {
    if (!Array.isArray(m?.content)) continue;
    for (const part of m.content) if (part?.type === "image_url") n++;
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
  const parts = costOf(match.endpoint.pricing, providerSearches(track, usage), imagesOf(call.request));
  track.catalogModel = match.model.slug;
  const paidBy = track.credentialSource === "byok" ? "byok" : "platform";
  track.cost = { femtoUsd: parts.total, paidBy };
  if (track.nested.length > 0) {
    // Calls made on the request's behalf (the fusion panel) are part of its cost, each paid by its own credential.
    let upstream = parts.total;
    let account = paidBy === "byok" ? 0n : parts.total;
    for (const n of track.nested) {
      if (!n.cost) continue;
      upstream += n.cost.total;
      if (n.paidBy === "platform") account += n.cost.total;
    }
    track.cost = { femtoUsd: upstream, paidBy, accountFemtoUsd: account };
  }
  return parts;
}

/** `usage` with only the provider's own searches in `web_search_requests` (Portico's are the operator's cost). */
function providerSearches(track: ChatCall["track"], usage: Usage): Usage {
  const searches = usage.server_tool_use?.web_search_requests;
  if (track.porticoSearches === 0 || searches === undefined) return usage;
  return { ...usage, server_tool_use: { ...usage.server_tool_use, web_search_requests: Math.max(0, searches - track.porticoSearches) } };
}

/** What the caller's account pays for the priced request (`track.cost`): 0 for a BYOK-served one. */
export function accountCostOf(track: ChatCall["track"]): bigint {
  if (!track.cost) return 0n;
  return track.cost.accountFemtoUsd ?? (track.cost.paidBy === "byok" ? 0n : track.cost.femtoUsd);
}

const add = (a: number | undefined, b: number | undefined): number | undefined => (a === undefined && b === undefined ? undefined : (a ?? 0) + (b ?? 0));

/** The request's usage with that of the calls made on its behalf (`track.nested`, the fusion panel) added. */
export function withNestedUsage(track: ChatCall["track"], usage: Usage): Usage {
  if (track.nested.length === 0) return usage;
  const out: Usage = { ...usage };
  for (const { usage: n } of track.nested) {
    out.prompt_tokens = (out.prompt_tokens ?? 0) + (n.prompt_tokens ?? 0);
    out.completion_tokens = (out.completion_tokens ?? 0) + (n.completion_tokens ?? 0);
    out.total_tokens = (out.total_tokens ?? 0) + (n.total_tokens ?? (n.prompt_tokens ?? 0) + (n.completion_tokens ?? 0));
    const cached = add(out.prompt_tokens_details?.cached_tokens, n.prompt_tokens_details?.cached_tokens);
    if (cached !== undefined) out.prompt_tokens_details = { ...out.prompt_tokens_details, cached_tokens: cached };
    const reasoning = add(out.completion_tokens_details?.reasoning_tokens, n.completion_tokens_details?.reasoning_tokens);
    if (reasoning !== undefined) out.completion_tokens_details = { ...out.completion_tokens_details, reasoning_tokens: reasoning };
    const searches = add(out.server_tool_use?.web_search_requests, n.server_tool_use?.web_search_requests);
    if (searches !== undefined) out.server_tool_use = { ...out.server_tool_use, web_search_requests: searches };
  }
  return out;
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
    // The fusion panel's calls (track.nested) count in the usage and the cost the caller sees.
    const summed = withNestedUsage(track, usage);
    // `{ ...summed, cost, … }` (a spread, then keys a usage lacks) costs ≈ 2 µs on Node 20: a copy, then the keys (src/lib/copy.ts).
    const priced = copyOf(summed) as PricedUsage;
    if (!parts) {
      priced.cost = null;
      return priced;
    }
    const byok = track.credentialSource === "byok";
    // Per-request fees (request, images, the provider's searches) count on the prompt side, as the request's.
    let prompt = parts.prompt + parts.cacheRead + parts.cacheWrite + parts.request + parts.image + parts.webSearch;
    let completion = parts.completion;
    for (const n of track.nested) {
      prompt += n.cost?.prompt ?? 0n;
      completion += n.cost?.completion ?? 0n;
    }
    priced.cost = usd(accountCostOf(track));
    priced.is_byok = byok;
    priced.cost_details = {
      upstream_inference_cost: usd(track.cost!.femtoUsd),
      upstream_inference_prompt_cost: usd(prompt),
      upstream_inference_completions_cost: usd(completion),
    };
    return priced;
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
