/**
 * The routing preferences of a chat request (docs/routing.md), read from its validated body: the `provider`
 * object, the deprecated `route` field and the model suffixes `:nitro` / `:floor`. Values the description
 * allows but Portico cannot honour are refused here with a 400 naming the field (`provider.sort: "exacto"`,
 * `provider.max_price.audio`), never accepted and ignored.
 */
import { invalidArgument } from "../../errors.js";
import { parseDecimal, type Decimal } from "./decimal.js";

export type SortKey = "price" | "throughput" | "latency";
export type Partition = "model" | "none";

/** Thresholds per percentile; a number in the request is its p50. */
export interface Percentiles {
  p50?: number;
  p75?: number;
  p90?: number;
  p99?: number;
}
export const PERCENTILES = ["p50", "p75", "p90", "p99"] as const;

/** `provider.max_price`: prompt and completion in USD per million tokens, request per request, image per image. */
export interface MaxPrice {
  prompt?: Decimal;
  completion?: Decimal;
  request?: Decimal;
  image?: Decimal;
}

export interface RoutingPreferences {
  order?: string[];
  only?: string[];
  ignore?: string[];
  /** Default true. */
  allowFallbacks: boolean;
  /** From `provider.sort` (string or `{by}`); a model suffix may set it per model (see `splitSuffix`). */
  sort?: SortKey;
  /** `provider.sort.partition`, else the deprecated `route` (`fallback` → model, `sort` → none); default model. */
  partition: Partition;
  maxPrice?: MaxPrice;
  quantizations?: ReadonlySet<string>;
  dataCollectionDeny: boolean;
  zdr: boolean;
  /** With `zdr`: providers for which the caller has a BYOK credential declared zero-data-retention (set by the plan stage). */
  zdrCredentialProviders?: ReadonlySet<string>;
  requireParameters: boolean;
  distillable: boolean;
  /** Tokens per second. */
  minThroughput?: Percentiles;
  /** Seconds to the first token. */
  maxLatency?: Percentiles;
}

const lower = (v: unknown, names?: ReadonlyMap<string, string>): string[] | undefined =>
  Array.isArray(v)
    ? v.filter((x): x is string => typeof x === "string").map((s) => {
        const l = s.toLowerCase();
        return names?.get(l) ?? l;
      })
    : undefined;

function percentiles(field: string, v: unknown): Percentiles | undefined {
  if (v === null || v === undefined) return undefined;
  if (typeof v === "number") return { p50: v };
  if (typeof v !== "object" || Array.isArray(v)) throw invalidArgument(field, `${field} must be a number or an object of percentiles (p50, p75, p90, p99)`);
  const out: Percentiles = {};
  for (const p of PERCENTILES) {
    const x = (v as Record<string, unknown>)[p];
    if (typeof x === "number") out[p] = x;
  }
  return Object.keys(out).length ? out : undefined;
}

function sortOf(v: unknown): { by?: string | null; partition?: string | null } {
  if (typeof v === "string") return { by: v };
  if (v && typeof v === "object" && !Array.isArray(v)) return v as { by?: string | null; partition?: string | null };
  return {};
}

/**
 * Reads the preferences of `body` (already checked by the ChatRequest definition: shapes are right, so this
 * only reads them, and refuses what Portico cannot honour). Provider lists take slugs or display names, case
 * insensitive (`names`: lowercased display name → slug, e.g. "together ai" → "together"), as the real-world
 * SDKs send display names.
 */
export function routingPreferencesOf(body: Readonly<Record<string, unknown>>, names?: ReadonlyMap<string, string>): RoutingPreferences {
  const p = body.provider && typeof body.provider === "object" && !Array.isArray(body.provider) ? (body.provider as Record<string, unknown>) : {};
  const prefs: RoutingPreferences = {
    allowFallbacks: p.allow_fallbacks !== false,
    partition: body.route === "sort" ? "none" : "model",
    dataCollectionDeny: p.data_collection === "deny",
    zdr: p.zdr === true,
    requireParameters: p.require_parameters === true,
    distillable: p.enforce_distillable_text === true,
  };
  const order = lower(p.order, names);
  const only = lower(p.only, names);
  const ignore = lower(p.ignore, names);
  if (order) prefs.order = order;
  if (only) prefs.only = only;
  if (ignore) prefs.ignore = ignore;

  const sort = sortOf(p.sort);
  if (sort.by === "exacto") {
    throw invalidArgument(
      typeof p.sort === "string" ? "provider.sort" : "provider.sort.by",
      'provider.sort "exacto" is not supported here: Portico has no tool-calling quality figures per endpoint; use "price", "throughput" or "latency"',
    );
  }
  if (sort.by === "price" || sort.by === "throughput" || sort.by === "latency") prefs.sort = sort.by;
  if (sort.partition === "model" || sort.partition === "none") prefs.partition = sort.partition;

  if (p.max_price && typeof p.max_price === "object") {
    const mp = p.max_price as Record<string, unknown>;
    if (mp.audio !== undefined && mp.audio !== null) {
      throw invalidArgument("provider.max_price.audio", "provider.max_price.audio is not supported here: the model catalog has no audio prices, so no endpoint could be shown to meet it");
    }
    const out: MaxPrice = {};
    for (const k of ["prompt", "completion", "request", "image"] as const) {
      const v = mp[k];
      if (v === undefined || v === null) continue;
      const d = parseDecimal(typeof v === "number" ? String(v) : String(v));
      if (!d) throw invalidArgument(`provider.max_price.${k}`, `provider.max_price.${k} must be a non-negative decimal number of USD`);
      out[k] = d;
    }
    if (Object.keys(out).length) prefs.maxPrice = out;
  }
  if (Array.isArray(p.quantizations)) prefs.quantizations = new Set(lower(p.quantizations));
  const minThroughput = percentiles("provider.preferred_min_throughput", p.preferred_min_throughput);
  const maxLatency = percentiles("provider.preferred_max_latency", p.preferred_max_latency);
  if (minThroughput) prefs.minThroughput = minThroughput;
  if (maxLatency) prefs.maxLatency = maxLatency;
  return prefs;
}

/** The model suffixes that are routing shorthands: `:nitro` = sort by throughput, `:floor` = sort by price. */
export const MODEL_SUFFIXES: Readonly<Record<string, SortKey>> = { ":nitro": "throughput", ":floor": "price" };

/** `meta-llama/llama-3.3-70b-instruct:nitro` → the id without the suffix and the sort it asks for. */
export function splitSuffix(id: string): { id: string; sort?: SortKey } {
  const colon = id.lastIndexOf(":");
  if (colon > 0) {
    const sort = MODEL_SUFFIXES[id.slice(colon)];
    if (sort) return { id: id.slice(0, colon), sort };
  }
  return { id };
}
