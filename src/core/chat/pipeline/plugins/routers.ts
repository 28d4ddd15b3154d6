/**
 * The routing plugins (docs/plugins.md): `auto-router`, `auto-beta-router` and `pareto-router` choose the
 * request's model among catalog models, before the plan stage (their `route` hook runs in the plugins'
 * routing stage, index.ts), so the chosen model is planned, called upstream, named in the answer and recorded
 * like a model the caller named. Each reports why: the rule, the candidates' scores, the choice.
 *
 * Candidates: catalog chat models (text out, not embeddings) with `quality` (auto routers) or `coding_score`
 * (pareto) rated in the catalog's quality table (ratings.ts, or the operator's figures), with an endpoint of a
 * provider the caller has a usable credential for; narrowed by `allowed_models` / `excluded_models`
 * (exact slugs, `<vendor>/*`, or `*` anywhere as a wildcard). A model's price is that of its cheapest such
 * endpoint. Prices here only rank (floating point is fine); money is never computed from them.
 *
 * The rules are pure functions (`autoRoute`, `betaRoute`, `paretoRoute`) over `RouterCandidate`s.
 */
import { invalidArgument } from "../../../errors.js";
import type { Catalog } from "../../../catalog/catalog.js";
import type { CatalogModel, RouterTask } from "../../../catalog/types.js";
import type { ChatCall } from "../stage.js";
import type { Plugin, PluginRun } from "./types.js";

export interface RouterCandidate {
  slug: string;
  /** USD per million prompt / completion tokens, the cheapest routable endpoint's. */
  prompt: number;
  completion: number;
  quality?: number;
  coding?: number;
  context: number;
  tasks?: Partial<Record<RouterTask, number>>;
}

/** A scored candidate as the report shows it. */
export interface Scored {
  model: string;
  score: number;
  price: number;
}

export interface RouteChoice {
  chosen: string;
  ranked: Scored[];
}

/** Weighted average price: 3 prompt tokens per completion token ((3·prompt + completion) / 4), USD per million. */
export function weightedPrice(c: Pick<RouterCandidate, "prompt" | "completion">): number {
  return (3 * c.prompt + c.completion) / 4;
}

const round = (n: number) => Math.round(n * 10_000) / 10_000;
const byScoreThenPrice = (a: Scored, b: Scored) => b.score - a.score || a.price - b.price || (a.model < b.model ? -1 : 1);

/**
 * auto-router: score = (1 − t/10)·quality − (t/10)·(price / the dearest candidate's price), price the weighted
 * average; the highest score wins (ties: the cheaper, then the slug). t = 0 ranks by quality alone, t = 10 by
 * price alone.
 */
export function autoRoute(candidates: readonly RouterCandidate[], tradeoff: number): RouteChoice {
  const lambda = tradeoff / 10;
  const max = Math.max(0, ...candidates.map(weightedPrice));
  const ranked = candidates
    .map((c) => {
      const price = weightedPrice(c);
      return { model: c.slug, price: round(price), score: round((1 - lambda) * (c.quality ?? 0) - lambda * (max > 0 ? price / max : 0)) };
    })
    .sort(byScoreThenPrice);
  return { chosen: ranked[0]!.model, ranked };
}

/**
 * The cheap classification of auto-beta-router, a rule (no model call): `long_context` when the prompt is
 * estimated (characters / 4) above 32,000 tokens; else `coding` when a message has a code fence (```) or the
 * last user message names programming (see CODING_WORDS); else `chat`.
 */
export const LONG_CONTEXT_TOKENS = 32_000;
const CODING_WORDS =
  /\b(code|coding|function|def|class|compile[rsd]?|debug|bug|stack ?trace|traceback|exception|refactor|regex|sql|typescript|javascript|python|java|rust|golang|kotlin|swift|c\+\+|c#|unit tests?|api|json schema|script)\b/i;

export function classify(messages: unknown): { task: RouterTask; tokens: number } {
  const texts = (Array.isArray(messages) ? messages : []).map((m) => ({ role: (m as { role?: unknown }).role, text: textOf((m as { content?: unknown }).content) }));
  const tokens = Math.ceil(texts.reduce((n, t) => n + t.text.length, 0) / 4);
  if (tokens > LONG_CONTEXT_TOKENS) return { task: "long_context", tokens };
  const lastUser = [...texts].reverse().find((t) => t.role === "user")?.text ?? "";
  if (texts.some((t) => t.text.includes("```")) || CODING_WORDS.test(lastUser)) return { task: "coding", tokens };
  return { task: "chat", tokens };
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((p) => (p && typeof p === "object" && typeof (p as { text?: unknown }).text === "string" ? (p as { text: string }).text : "")).join("\n");
}

/** A candidate's score for a task: the catalog's `task_scores[task]`, else `coding_score` (coding) or `quality`. */
export function taskScore(c: RouterCandidate, task: RouterTask): number {
  return c.tasks?.[task] ?? (task === "coding" ? (c.coding ?? c.quality ?? 0) : (c.quality ?? 0));
}

/**
 * auto-beta-router: the candidates that can hold the prompt (context length ≥ the estimated tokens), sorted by
 * weighted price; the cheapest ⌈n·(11 − t)/11⌉ are kept (t = 0 keeps all, t = 10 about the cheapest eleventh,
 * at least one); among them the highest task score wins (ties: the cheaper, then the slug).
 */
export function betaRoute(candidates: readonly RouterCandidate[], tradeoff: number, task: RouterTask, tokens: number): RouteChoice & { kept: number } {
  const fits = candidates.filter((c) => c.context >= tokens);
  const pool = (fits.length > 0 ? fits : candidates).slice().sort((a, b) => weightedPrice(a) - weightedPrice(b) || (a.slug < b.slug ? -1 : 1));
  const kept = Math.max(1, Math.ceil((pool.length * (11 - tradeoff)) / 11));
  const ranked = pool
    .slice(0, kept)
    .map((c) => ({ model: c.slug, price: round(weightedPrice(c)), score: round(taskScore(c, task)) }))
    .sort(byScoreThenPrice);
  return { chosen: ranked[0]!.model, ranked, kept };
}

export type CodingTier = "high" | "medium" | "low";
/** The tier `min_coding_score` asks for: >= 0.66 high, >= 0.33 medium, else low; omitted: high. */
export function codingTier(min: number | undefined): CodingTier {
  if (min === undefined || min >= 0.66) return "high";
  return min >= 0.33 ? "medium" : "low";
}
const TIER_FLOOR: Record<CodingTier, number> = { high: 0.66, medium: 0.33, low: 0 };

/**
 * pareto-router: the models whose `coding_score` is in the asked tier or above (≥ the tier's floor), at most
 * `maxPrice` USD per million prompt tokens when given; the cheapest by `price_source` (prompt price, or the
 * weighted average) wins (ties: the higher coding score, then the slug). Undefined when none qualifies.
 */
export function paretoRoute(candidates: readonly RouterCandidate[], tier: CodingTier, source: "prompt" | "weighted_avg", maxPrice?: number): RouteChoice | undefined {
  const price = (c: RouterCandidate) => (source === "prompt" ? c.prompt : weightedPrice(c));
  const ranked = candidates
    .filter((c) => (c.coding ?? -1) >= TIER_FLOOR[tier] && (maxPrice === undefined || c.prompt <= maxPrice))
    .map((c) => ({ model: c.slug, price: round(price(c)), score: round(c.coding ?? 0) }))
    .sort((a, b) => a.price - b.price || b.score - a.score || (a.model < b.model ? -1 : 1));
  return ranked.length > 0 ? { chosen: ranked[0]!.model, ranked } : undefined;
}

/** `slug` matches `pattern`: equal, or `*` standing for any characters (so `openai/*` is every OpenAI model). */
export function matches(pattern: string, slug: string): boolean {
  if (!pattern.includes("*")) return pattern === slug;
  const re = new RegExp(`^${pattern.split("*").map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`);
  return re.test(slug);
}

// ---- the plugins ----

export interface RouterDeps {
  catalog: Catalog;
  /** The providers the caller has a usable credential for (its workspace's or the operator's shared keys). */
  routableProviders(call: ChatCall): Promise<ReadonlySet<string>>;
  /** PORTICO_BRAND: `<brand>/auto` as the model asks for auto-router with its defaults. */
  brand: string;
}

const COST_TIERS: Record<string, number> = { low: 10, medium: 7, high: 4, xhigh: 2, max: 0 };

/** The candidates of one request: rated chat models the caller can route, narrowed by the entry's patterns. */
async function candidatesOf(deps: RouterDeps, call: ChatCall, run: PluginRun, rated: (m: CatalogModel) => boolean): Promise<{ list: RouterCandidate[]; unrated: number }> {
  const routable = await deps.routableProviders(call);
  const allowed = run.options.allowed_models as string[] | undefined;
  const excluded = (run.options.excluded_models as string[] | undefined) ?? [];
  const list: RouterCandidate[] = [];
  let unrated = 0;
  for (const m of deps.catalog.models()) {
    const out = m.architecture.output_modalities;
    if (!out.includes("text") || out.includes("embeddings")) continue;
    if (allowed && allowed.length > 0 && !allowed.some((p) => matches(p, m.slug))) continue;
    if (excluded.some((p) => matches(p, m.slug))) continue;
    const endpoints = deps.catalog.endpointsOf(m.slug).filter((e) => e.status === "active" && routable.has(e.provider));
    if (endpoints.length === 0) continue;
    if (!rated(m)) {
      unrated++;
      continue;
    }
    const cheapest = endpoints.map((e) => ({ prompt: Number(e.pricing.prompt) * 1e6, completion: Number(e.pricing.completion) * 1e6 })).sort((a, b) => weightedPrice(a) - weightedPrice(b))[0]!;
    const c: RouterCandidate = { slug: m.slug, ...cheapest, context: Math.max(...endpoints.map((e) => e.context_length)) };
    if (m.quality !== undefined) c.quality = m.quality;
    if (m.coding_score !== undefined) c.coding = m.coding_score;
    if (m.task_scores) c.tasks = m.task_scores;
    list.push(c);
  }
  return { list, unrated };
}

function noCandidates(run: PluginRun, unrated: number): never {
  const allowed = run.options.allowed_models !== undefined;
  const field = allowed ? `${run.field}.allowed_models` : run.field;
  const why = unrated > 0 ? ` (${unrated} matching model${unrated === 1 ? " is" : "s are"} not rated in the catalog's quality table)` : "";
  throw invalidArgument(
    field,
    `${field}: no catalog model you can route to is left to choose from${why}: ${allowed ? "widen allowed_models" : "store a provider key"} (GET /api/v1/models lists what this key may use; docs/plugins.md)`,
  );
}

function tradeoffOf(run: PluginRun): number {
  const tier = run.options.cost_tier;
  if (typeof tier === "string" && tier in COST_TIERS) return COST_TIERS[tier]!;
  return typeof run.options.cost_quality_tradeoff === "number" ? run.options.cost_quality_tradeoff : 7;
}

/** The chosen model replaces `model`; the report gets the rule's inputs and the choice. */
function choose(call: ChatCall, run: PluginRun, chosen: string, report: Record<string, unknown>): void {
  Object.assign(run.report, report, { chosen });
  call.request.model = chosen;
}

/** Common to the three: `pin_model: true` is refused, and so is `models` (the router chooses the model). */
function checkCommon(call: ChatCall, run: PluginRun): void {
  if (run.options.pin_model === true) throw invalidArgument(`${run.field}.pin_model`, `${run.field}.pin_model is not supported by this deployment (docs/plugins.md)`);
  if (Array.isArray(call.request.models) && call.request.models.length > 0) {
    throw invalidArgument("models", `models cannot be combined with ${run.field} ("${String(run.options.id)}"): the router chooses the model; narrow its choice with allowed_models`);
  }
}

export function createAutoRouterPlugin(deps: RouterDeps): Plugin {
  return {
    id: "auto-router",
    order: 0,
    async route(call, run) {
      checkCommon(call, run);
      const tradeoff = tradeoffOf(run);
      const { list, unrated } = await candidatesOf(deps, call, run, (m) => m.quality !== undefined);
      if (list.length === 0) noCandidates(run, unrated);
      const { chosen, ranked } = autoRoute(list, tradeoff);
      choose(call, run, chosen, { rule: "score = (1 - t/10) * quality - (t/10) * price / max price", cost_quality_tradeoff: tradeoff, considered: list.length, candidates: ranked.slice(0, 10) });
    },
  };
}

export function createAutoBetaRouterPlugin(deps: RouterDeps): Plugin {
  return {
    id: "auto-beta-router",
    order: 0,
    async route(call, run) {
      checkCommon(call, run);
      const tradeoff = tradeoffOf(run);
      const { list, unrated } = await candidatesOf(deps, call, run, (m) => m.quality !== undefined || m.task_scores !== undefined);
      if (list.length === 0) noCandidates(run, unrated);
      const { task, tokens } = classify(call.request.messages);
      const { chosen, ranked, kept } = betaRoute(list, tradeoff, task, tokens);
      choose(call, run, chosen, { task, estimated_prompt_tokens: tokens, cost_quality_tradeoff: tradeoff, considered: list.length, kept, candidates: ranked.slice(0, 10) });
    },
  };
}

export function createParetoRouterPlugin(deps: RouterDeps): Plugin {
  return {
    id: "pareto-router",
    order: 0,
    async route(call, run) {
      checkCommon(call, run);
      const min = run.options.min_coding_score as number | undefined;
      const source = (run.options.price_source as "prompt" | "weighted_avg" | undefined) ?? "prompt";
      const maxPrice = run.options.max_price as number | undefined;
      const tier = codingTier(min);
      const { list, unrated } = await candidatesOf(deps, call, run, (m) => m.coding_score !== undefined);
      if (list.length === 0) noCandidates(run, unrated);
      const choice = paretoRoute(list, tier, source, maxPrice);
      if (!choice) {
        const field = maxPrice !== undefined ? `${run.field}.max_price` : `${run.field}.min_coding_score`;
        throw invalidArgument(field, `${field}: no model you can route to is in the ${tier} coding tier${maxPrice !== undefined ? ` at most $${maxPrice} per million prompt tokens` : ""} (docs/plugins.md)`);
      }
      choose(call, run, choice.chosen, { tier, price_source: source, considered: list.length, candidates: choice.ranked.slice(0, 10) });
    },
  };
}

export function routerPlugins(deps: RouterDeps): Plugin[] {
  return [createAutoRouterPlugin(deps), createAutoBetaRouterPlugin(deps), createParetoRouterPlugin(deps)];
}
