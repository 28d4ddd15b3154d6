/**
 * Routing through the model catalog (docs/routing.md): from a request's `model` / `models` and its routing
 * preferences to the ordered list of endpoints to try, before credentials.
 *
 * 1. Resolve: a canonical slug (`meta-llama/llama-3.3-70b-instruct`) → its catalog endpoints, each with its
 *    provider's own model id; any other `<provider>/<model>` → that provider (and the providers `order` names),
 *    asked for `<model>`: catalogued when the catalog knows that provider's id, else **uncatalogued**.
 * 2. Filter, in a fixed order: only, ignore, order (allow_fallbacks false), quantizations, data_collection, zdr,
 *    enforce_distillable_text, require_parameters, max_price. A filter that leaves no endpoint is a 400 naming
 *    it; an uncatalogued endpoint meets no catalog filter (its terms and prices are unknown).
 * 3. Order, per model (partition `model`, the default) or across every model (partition `none`): `order`'s
 *    providers first; then by `sort` (price ascending, throughput descending, latency ascending: endpoints
 *    without figures last), else load balanced: the first endpoint drawn at random among the healthy ones with
 *    weight 1/price², the other healthy ones by ascending price; endpoints that failed recently go last. Then
 *    `preferred_min_throughput` / `preferred_max_latency` move the endpoints known to miss them (then those
 *    without figures) after those known to meet them, across models.
 */
import type { Catalog, CatalogModel, Endpoint } from "../../catalog/catalog.js";
import { invalidArgument } from "../../errors.js";
import { compareDecimal, parseDecimal, shift, type Decimal } from "./decimal.js";
import { meets, type EndpointStats } from "./endpoint-stats.js";
import { splitSuffix, type RoutingPreferences, type SortKey } from "./preferences.js";
import { endpointKey } from "./health.js";

/** One endpoint the request may be sent to, before credentials. */
export interface Candidate {
  provider: string;
  /** The model as the caller named it, without a routing suffix (credentials' allowed_models match it). */
  requestedModel: string;
  /** The provider's own model id, sent upstream. */
  upstreamModel: string;
  /** The catalog model and endpoint; absent when uncatalogued. */
  model?: CatalogModel;
  endpoint?: Endpoint;
  /** The index of the requested model (partition `model`). */
  modelIndex: number;
  /** The sort the model's suffix asked for (`:nitro`, `:floor`). */
  suffixSort?: SortKey;
}


/** The request fields that use a catalog `supported_parameters` name (require_parameters). */
const PARAMETERS: ReadonlyArray<[string, string]> = [
  ["max_tokens", "max_tokens"],
  ["max_completion_tokens", "max_tokens"],
  ["temperature", "temperature"],
  ["top_p", "top_p"],
  ["top_k", "top_k"],
  ["min_p", "min_p"],
  ["top_a", "top_a"],
  ["repetition_penalty", "repetition_penalty"],
  ["stop", "stop"],
  ["frequency_penalty", "frequency_penalty"],
  ["presence_penalty", "presence_penalty"],
  ["seed", "seed"],
  ["logit_bias", "logit_bias"],
  ["logprobs", "logprobs"],
  ["top_logprobs", "top_logprobs"],
  ["response_format", "response_format"],
  ["tools", "tools"],
  ["tool_choice", "tool_choice"],
  ["reasoning", "reasoning"],
  ["reasoning_effort", "reasoning"],
  ["include_reasoning", "include_reasoning"],
];

/** The catalog parameter names the request uses (non-null fields; json_schema also needs structured_outputs). */
export function parametersUsed(body: Readonly<Record<string, unknown>>): string[] {
  const used = new Set<string>();
  for (const [field, name] of PARAMETERS) {
    const v = body[field];
    if (v !== undefined && v !== null) used.add(name);
  }
  const rf = body.response_format as { type?: unknown } | undefined;
  if (rf && rf.type === "json_schema") used.add("structured_outputs");
  return [...used];
}

/** Step 1: the candidates of every requested model, in request order. */
export function resolveCandidates(models: readonly string[], prefs: RoutingPreferences, catalog: Catalog, known: (provider: string) => boolean): Candidate[] {
  const out: Candidate[] = [];
  // A loop and keys assigned in their places (no closure, no spread of a temporary object: V8's slow path; the same
  // keys in the same order as the spreads gave; bench/README.md, "the plan's fast path").
  for (let modelIndex = 0; modelIndex < models.length; modelIndex++) {
    const { id, sort } = splitSuffix(models[modelIndex]!);
    const model = catalog.model(id);
    if (model) {
      for (const endpoint of catalog.endpointsOf(id)) {
        if (!known(endpoint.provider)) continue;
        const c: Candidate = { provider: endpoint.provider, requestedModel: id, upstreamModel: endpoint.model_id, model, endpoint, modelIndex };
        if (sort) c.suffixSort = sort;
        out.push(c);
      }
      continue;
    }
    const slash = id.indexOf("/");
    if (slash <= 0 || slash === id.length - 1) continue;
    const own = id.slice(0, slash).toLowerCase();
    const upstreamModel = id.slice(slash + 1);
    // Today's rule for `<provider>/<model>`: the providers `order` names are asked for the same `<model>`.
    const order = prefs.order ?? [];
    const one = order.length === 0 || (order.length === 1 && order[0] === own);
    const providers: Iterable<string> = one ? [own] : new Set(order);
    if (!one && (prefs.allowFallbacks || order.length === 0)) (providers as Set<string>).add(own);
    for (const provider of providers) {
      if (!known(provider)) continue;
      const match = catalog.endpointFor(provider, upstreamModel);
      const usable = match && match.endpoint.status !== "disabled" ? match : undefined;
      const c = (usable
        ? { provider, requestedModel: id, upstreamModel, model: usable.model, endpoint: usable.endpoint, modelIndex }
        : { provider, requestedModel: id, upstreamModel, modelIndex }) as Candidate;
      if (sort) c.suffixSort = sort;
      out.push(c);
    }
  }
  return out;
}

/** Per-token price of an endpoint for ordering: prompt + completion (USD per token, as a float); unknown → Infinity. */
export function blendedPrice(c: Candidate): number {
  if (!c.endpoint) return Number.POSITIVE_INFINITY;
  return Number(c.endpoint.pricing.prompt) + Number(c.endpoint.pricing.completion);
}

const ZERO: Decimal = { digits: 0n, exp: 0 };

/** The highest price an endpoint may charge for `field` (its base price or a long-context tier's), per token. */
function highest(e: Endpoint, field: "prompt" | "completion"): Decimal {
  let max = parseDecimal(e.pricing[field]) ?? ZERO;
  for (const t of e.pricing.tiers ?? []) {
    const v = t[field] !== undefined ? parseDecimal(t[field]!) : undefined;
    if (v && compareDecimal(v, max) > 0) max = v;
  }
  return max;
}

interface Filter {
  field: string;
  keep(c: Candidate): boolean;
  /** Why the list ended empty, for the 400. */
  why: string;
}

/** The filters of `prefs`, in the order they are applied. */
function filtersOf(prefs: RoutingPreferences, body: Readonly<Record<string, unknown>>, extra: readonly Filter[]): Filter[] {
  const f: Filter[] = [...extra];
  if (prefs.only) {
    const only = new Set(prefs.only);
    f.push({ field: "provider.only", keep: (c) => only.has(c.provider), why: "none of the providers it names serves the model" });
  }
  if (prefs.ignore) {
    const ignore = new Set(prefs.ignore);
    f.push({ field: "provider.ignore", keep: (c) => !ignore.has(c.provider), why: "it ignores every provider that serves the model" });
  }
  if (prefs.order?.length && !prefs.allowFallbacks) {
    const order = new Set(prefs.order);
    f.push({ field: "provider.order", keep: (c) => order.has(c.provider), why: "with allow_fallbacks false, only its providers may serve, and none of them serves the model" });
  }
  if (prefs.quantizations) {
    const q = prefs.quantizations;
    f.push({ field: "provider.quantizations", keep: (c) => c.endpoint !== undefined && q.has(c.endpoint.quantization), why: `no endpoint runs the model at ${[...q].join(", ") || "any listed quantization"}` });
  }
  if (prefs.dataCollectionDeny) {
    f.push({ field: "provider.data_collection", keep: (c) => c.endpoint !== undefined && !c.endpoint.data_policy.training, why: 'with "deny", only endpoints whose provider may not train on prompts serve, and every endpoint of the model may (or its terms are unknown)' });
  }
  if (prefs.zdr) {
    const declared = prefs.zdrCredentialProviders;
    f.push({
      field: "provider.zdr",
      keep: (c) => c.endpoint?.zdr === true || declared?.has(c.provider) === true,
      why: "no endpoint of the model is zero-data-retention, and no credential of its providers is declared so (declared_zdr)",
    });
  }
  if (prefs.distillable) {
    f.push({ field: "provider.enforce_distillable_text", keep: (c) => c.endpoint?.distillable === true, why: "no endpoint of the model allows distilling its outputs" });
  }
  if (prefs.requireParameters) {
    const used = parametersUsed(body);
    f.push({
      field: "provider.require_parameters",
      keep: (c) => {
        if (!c.endpoint || !c.model) return false;
        const supported = c.endpoint.supported_parameters ?? c.model.supported_parameters;
        return used.every((p) => supported.includes(p));
      },
      why: `no endpoint of the model supports every parameter the request uses (${used.join(", ") || "none"})`,
    });
  }
  const mp = prefs.maxPrice;
  if (mp) {
    // Per million tokens on the wire, per token in the catalog.
    for (const k of ["prompt", "completion"] as const) {
      const max = mp[k];
      if (max) f.push({ field: `provider.max_price.${k}`, keep: (c) => c.endpoint !== undefined && compareDecimal(shift(highest(c.endpoint, k), 6), max) <= 0, why: `no endpoint's ${k} price is at most ${fmt(max)} USD per million tokens` });
    }
    for (const k of ["request", "image"] as const) {
      const max = mp[k];
      if (max) f.push({ field: `provider.max_price.${k}`, keep: (c) => c.endpoint !== undefined && compareDecimal(parseDecimal(c.endpoint.pricing[k] ?? "0") ?? ZERO, max) <= 0, why: `no endpoint's price per ${k} is at most ${fmt(max)} USD` });
    }
  }
  return f;
}

const hasFilters = (p: RoutingPreferences) =>
  p.only !== undefined || p.ignore !== undefined || (p.order !== undefined && !p.allowFallbacks) || p.quantizations !== undefined ||
  p.dataCollectionDeny || p.zdr || p.distillable || p.requireParameters || p.maxPrice !== undefined;

function fmt(d: Decimal): string {
  return d.exp >= 0 ? `${d.digits}${"0".repeat(d.exp)}` : `${Number(d.digits) * 10 ** d.exp}`;
}

/**
 * Step 2: the candidates that meet every filter. Throws a 400 naming the filter that removed the last
 * candidates (`extra` filters — the account's routing settings — come first).
 */
export function filterCandidates(candidates: Candidate[], prefs: RoutingPreferences, body: Readonly<Record<string, unknown>>, label: string, extra: readonly Filter[] = []): Candidate[] {
  if (extra.length === 0 && !hasFilters(prefs)) return candidates;
  let left = candidates;
  for (const f of filtersOf(prefs, body, extra)) {
    const kept = left.filter(f.keep);
    if (kept.length === 0 && left.length > 0) {
      throw invalidArgument(f.field, `No endpoint is left to serve ${label}: ${f.field} removed the last ones (${f.why}); nothing was sent to any provider`);
    }
    left = kept;
  }
  return left;
}
export type { Filter as RoutingFilter };

export interface OrderDeps {
  /** Live figures per endpoint (throughput/latency sorts, preferred thresholds). */
  stats?: EndpointStats;
  /** Keys (`endpointKey`, routing/health.ts) of the endpoints cooling in the health memory. */
  unhealthy: ReadonlySet<string>;
  /** A number in [0, 1): the load balancing draw (tests inject it). */
  random: () => number;
}

const figuresOf = (c: Candidate, stats?: EndpointStats) => (c.model && stats ? stats.figures(c.model.slug, c.provider) : undefined);

/** The candidates by `key`; stable; endpoints without figures last for throughput and latency. */
function sortBy(list: Candidate[], key: SortKey, stats?: EndpointStats): Candidate[] {
  const value = (c: Candidate): number => {
    if (key === "price") return blendedPrice(c);
    const f = figuresOf(c, stats);
    if (!f) return Number.POSITIVE_INFINITY;
    return key === "throughput" ? -f.throughput.p50 : f.latency.p50;
  };
  const v = new Map(list.map((c) => [c, value(c)]));
  return [...list].sort((a, b) => v.get(a)! - v.get(b)!);
}

/** Load balancing: one drawn with weight 1/price² (free endpoints first), the rest by ascending price. */
function balance(list: Candidate[], random: () => number): Candidate[] {
  if (list.length <= 1) return list;
  const byPrice = sortBy(list, "price");
  const prices = byPrice.map(blendedPrice);
  let weights: number[];
  if (prices.some((p) => p === 0)) weights = prices.map((p) => (p === 0 ? 1 : 0));
  else weights = prices.map((p) => (Number.isFinite(p) ? 1 / (p * p) : 0));
  const total = weights.reduce((a, b) => a + b, 0);
  if (!(total > 0)) return byPrice;
  let r = random() * total;
  let pick = byPrice.length - 1;
  for (let i = 0; i < weights.length; i++) {
    r -= weights[i]!;
    if (r < 0 && weights[i]! > 0) {
      pick = i;
      break;
    }
  }
  return [byPrice[pick]!, ...byPrice.slice(0, pick), ...byPrice.slice(pick + 1)];
}

/** One partition's order: `order`'s providers first (as named), then sorted or load balanced; recently failed last. */
function orderPool(pool: Candidate[], prefs: RoutingPreferences, deps: OrderDeps): Candidate[] {
  const named: Candidate[] = [];
  let rest = pool;
  if (prefs.order?.length) {
    for (const provider of prefs.order) for (const c of pool) if (c.provider === provider && !named.includes(c)) named.push(c);
    rest = pool.filter((c) => !named.includes(c));
  }
  const sort = prefs.sort ?? pool.find((c) => c.suffixSort)?.suffixSort;
  const healthy = rest.filter((c) => !deps.unhealthy.has(endpointKey(c.provider, c.upstreamModel)));
  const failing = rest.filter((c) => deps.unhealthy.has(endpointKey(c.provider, c.upstreamModel)));
  const ordered = sort ? sortBy(healthy, sort, deps.stats) : balance(healthy, deps.random);
  return [...named, ...ordered, ...sortBy(failing, sort ?? "price", deps.stats)];
}

/** Step 3: the order in which the candidates are tried. */
export function orderCandidates(candidates: Candidate[], prefs: RoutingPreferences, deps: OrderDeps): Candidate[] {
  if (candidates.length <= 1) return candidates;
  let out: Candidate[];
  if (prefs.partition === "none") out = orderPool(candidates, prefs, deps);
  else {
    out = [];
    const byModel = new Map<number, Candidate[]>();
    for (const c of candidates) {
      let l = byModel.get(c.modelIndex);
      if (!l) byModel.set(c.modelIndex, (l = []));
      l.push(c);
    }
    for (const i of [...byModel.keys()].sort((a, b) => a - b)) out.push(...orderPool(byModel.get(i)!, prefs, deps));
  }
  if (prefs.minThroughput || prefs.maxLatency) {
    const cls = (c: Candidate) => {
      const m = meets(figuresOf(c, deps.stats), prefs.minThroughput, prefs.maxLatency);
      return m === true ? 0 : m === undefined ? 1 : 2;
    };
    out = [...out.filter((c) => cls(c) === 0), ...out.filter((c) => cls(c) === 1), ...out.filter((c) => cls(c) === 2)];
  }
  return out;
}
