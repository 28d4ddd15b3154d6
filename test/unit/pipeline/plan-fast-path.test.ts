/**
 * The plan stage's fast path (one planned provider: its credentials read directly, no map) plans exactly what the
 * general path plans, and `resolveCandidates` without its spreads gives what the spreads gave: the same attempts in
 * the same order (credentials, sources, limits, endpoints, keys and their order), the same calls of the stores and
 * of the draw, the same errors, over generated requests (models and fallbacks, suffixes, provider orders and
 * filters, ZDR, BYOK flags, shared keys, presets, pins, cooling endpoints, attempt caps).
 */
import { describe, expect, it } from "vitest";
import { createPlanStage, type PlanDeps } from "../../../src/core/chat/pipeline/plan.js";
import { newCall, type ChatCall, type ChatOutcome } from "../../../src/core/chat/pipeline/stage.js";
import { createCatalog, type Catalog } from "../../../src/core/catalog/catalog.js";
import { BUILTIN_CATALOG } from "../../../src/core/catalog/builtin-catalog.js";
import { ProviderRegistry } from "../../../src/core/chat/providers/index.js";
import { resolveCandidates, type Candidate } from "../../../src/core/chat/routing/route.js";
import { routingPreferencesOf, splitSuffix, type RoutingPreferences } from "../../../src/core/chat/routing/preferences.js";
import { createMemoryHealthMemory } from "../../../src/lib/health-memory.js";
import { createMemorySessionAffinity } from "../../../src/lib/session-affinity.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest } from "../../../src/core/chat/model.js";
import { mulberry32 as rng } from "../../helpers/prng.js";


/** resolveCandidates as it was written with spreads (before the fast path's commit): the reference. */
function referenceResolve(models: readonly string[], prefs: RoutingPreferences, catalog: Catalog, known: (provider: string) => boolean): Candidate[] {
  const out: Candidate[] = [];
  models.forEach((raw, modelIndex) => {
    const { id, sort } = splitSuffix(raw);
    const extra = sort ? { suffixSort: sort } : {};
    const model = catalog.model(id);
    if (model) {
      for (const endpoint of catalog.endpointsOf(id)) {
        if (!known(endpoint.provider)) continue;
        out.push({ provider: endpoint.provider, requestedModel: id, upstreamModel: endpoint.model_id, model, endpoint, modelIndex, ...extra });
      }
      return;
    }
    const slash = id.indexOf("/");
    if (slash <= 0 || slash === id.length - 1) return;
    const own = id.slice(0, slash).toLowerCase();
    const upstreamModel = id.slice(slash + 1);
    const order = prefs.order ?? [];
    const providers = new Set(order);
    if (prefs.allowFallbacks || order.length === 0) providers.add(own);
    for (const provider of providers) {
      if (!known(provider)) continue;
      const match = catalog.endpointFor(provider, upstreamModel);
      const usable = match && match.endpoint.status !== "disabled" ? match : undefined;
      out.push({ provider, requestedModel: id, upstreamModel, ...(usable ? { model: usable.model, endpoint: usable.endpoint } : {}), modelIndex, ...extra });
    }
  });
  return out;
}

const catalog = createCatalog(BUILTIN_CATALOG);
const registry = new ProviderRegistry();
const providers = registry.list().map((p) => p.slug);
const known = (p: string) => registry.get(p) !== undefined;
const catalogSlugs = catalog.models().map((m) => m.slug);
const multi = catalogSlugs.filter((s) => catalog.endpointsOf(s).length > 1);

function pick<T>(r: () => number, list: readonly T[]): T {
  return list[Math.floor(r() * list.length)]!;
}
function some<T>(r: () => number, list: readonly T[], max: number): T[] {
  const n = Math.floor(r() * (max + 1));
  return Array.from({ length: n }, () => pick(r, list));
}

function modelId(r: () => number): string {
  const kind = r();
  let id: string;
  if (kind < 0.35) id = pick(r, catalogSlugs);
  else if (kind < 0.55 && multi.length > 0) id = pick(r, multi);
  else if (kind < 0.85) {
    const p = pick(r, providers);
    const eps = catalog.models().flatMap((m) => catalog.endpointsOf(m.slug)).filter((e) => e.provider === p);
    id = `${p}/${eps.length > 0 && r() < 0.6 ? pick(r, eps).model_id : `model-${Math.floor(r() * 3)}`}`;
  } else id = pick(r, ["unknownvendor/x", "openai/gpt-4o", "groq/llama-3.3-70b", "anthropic/claude-sonnet-4"]);
  const s = r();
  return s < 0.1 ? `${id}:nitro` : s < 0.2 ? `${id}:floor` : id;
}

interface World {
  byok: Map<string, Record<string, unknown>[]>;
  shared: Map<string, { id: string; provider: string; apiKey: string; sortOrder: number; weight: number }[]>;
}

function world(r: () => number, slugs: string[]): World {
  const byok = new Map<string, Record<string, unknown>[]>();
  const shared = new Map<string, { id: string; provider: string; apiKey: string; sortOrder: number; weight: number }[]>();
  for (const p of providers) {
    const n = r() < 0.2 ? 0 : Math.floor(r() * 4);
    byok.set(
      p,
      Array.from({ length: n }, (_, i) => ({
        id: `${p}-b${i}`,
        provider: p,
        disabled: r() < 0.1,
        allowedModels: r() < 0.2 ? [r() < 0.5 ? pick(r, slugs) : `${p}/*`] : null,
        allowedApiKeyHashes: r() < 0.1 ? [r() < 0.5 ? "h".repeat(64) : "other"] : null,
        allowedUserIds: r() < 0.1 ? [r() < 0.5 ? "u1" : "u2"] : null,
        isRequired: r() < 0.15,
        isFallback: r() < 0.2,
        isByokOnly: r() < 0.15,
        sortOrder: Math.floor(r() * 3),
        createdAt: new Date(2026, 0, 1 + Math.floor(r() * 3)),
        apiKey: r() < 0.08 ? null : r() < 0.05 ? "" : `key-${p}-${i}`,
        declaredZdr: r() < 0.3 ? true : r() < 0.3 ? false : null,
      })),
    );
    const m = r() < 0.5 ? 0 : Math.floor(r() * 3);
    shared.set(p, Array.from({ length: m }, (_, i) => ({ id: `${p}-s${i}`, provider: p, apiKey: `shared-${p}-${i}`, sortOrder: i, weight: 1 + Math.floor(r() * 3) })));
  }
  return { byok, shared };
}

function providerField(r: () => number): Record<string, unknown> | undefined {
  if (r() < 0.45) return undefined;
  const f: Record<string, unknown> = {};
  if (r() < 0.5) f.order = some(r, providers, 3);
  if (r() < 0.15) f.only = some(r, providers, 4);
  if (r() < 0.15) f.ignore = some(r, providers, 2);
  if (r() < 0.3) f.allow_fallbacks = r() < 0.5;
  if (r() < 0.15) f.zdr = true;
  if (r() < 0.15) f.sort = pick(r, ["price", "throughput", "latency"]);
  return f;
}

const caller: Caller = {
  keyId: "k1", keyHash: "h".repeat(64), keyLabel: "k", organizationId: "o1", workspaceId: "w1", userId: "u1",
  isManagement: false, internsProgramme: false,
};

/** What a plan made, every field an attempt carries, keys and their order included. */
function planned(call: ChatCall) {
  return {
    attemptsNotTried: call.attemptsNotTried,
    attempts: call.attempts.map((a) => ({
      keys: Object.keys(a),
      callKeys: Object.keys(a.call),
      provider: a.provider,
      requestedModel: a.requestedModel,
      credentialId: a.credentialId,
      credentialSource: a.credentialSource,
      adapter: a.adapter,
      catalogModel: a.catalogModel,
      endpoint: a.endpoint,
      healthKey: a.healthKey,
      model: a.call.model,
      body: a.call.body,
      baseUrl: a.call.baseUrl,
      apiKey: a.call.apiKey,
      limits: a.call.limits,
      signal: a.call.signal === call.signal,
    })),
  };
}

async function runPlan(seed: number, general: boolean) {
  const r = rng(seed);
  const slugs = Array.from({ length: 3 }, () => modelId(r));
  const w = world(r, slugs);
  const reads: string[] = [];
  const draws = rng(seed ^ 0x5bd1e995);
  let drawn = 0;
  const health = createMemoryHealthMemory();
  for (const s of catalogSlugs) for (const e of catalog.endpointsOf(s)) if (r() < 0.05) health.failed(`endpoint:${e.provider}:${e.model_id}`);
  const affinity = createMemorySessionAffinity({ ttlMs: 60_000 });
  const deps: PlanDeps = {
    credentials: {
      forProvider: async (ws: string, p: string) => (reads.push(`byok:${ws}:${p}`), (w.byok.get(p) ?? []) as never),
      listAll: async () => [],
    } as unknown as PlanDeps["credentials"],
    ...(r() < 0.6 ? { shared: { forProvider: async (p: string) => (reads.push(`shared:${p}`), w.shared.get(p) ?? []) } as unknown as PlanDeps["shared"] } : {}),
    providers: registry,
    maxAttempts: 1 + Math.floor(r() * 5),
    catalog,
    health,
    random: () => (drawn++, draws()),
    credentialOrder: r() < 0.5 ? "balanced" : "ordered",
    affinity,
    ...(r() < 0.2 ? { accountFilters: async () => [{ field: "account.providers", why: "the account's providers", keep: () => r() < 2 }] as never } : {}),
    generalPathOnly: general,
  };
  const body: Record<string, unknown> = { model: slugs[0], messages: [{ role: "user", content: "hi" }] };
  if (r() < 0.3) body.models = slugs.slice(1, 1 + Math.floor(r() * 3));
  const provider = providerField(r);
  if (provider) body.provider = provider;
  const session = r() < 0.3 ? "s-1" : undefined;
  if (session && r() < 0.7) {
    const p = pick(r, providers);
    affinity.set(`o1\u0000${String(slugs[0])}`, session, { provider: p, model: slugs[0]!.split("/")[1] ?? "", credentialId: `${p}-b${Math.floor(r() * 3)}` });
  }
  const call = newCall(caller, new AbortController().signal, false, body as unknown as CanonicalRequest, undefined, session);
  if (r() < 0.2) call.track.presetSlug = "my-preset";
  const plan = createPlanStage(deps);
  let error: unknown;
  try {
    await plan.run(call, async () => ({ kind: "stream", events: (async function* () {})() }) as unknown as ChatOutcome);
  } catch (err) {
    error = err;
  }
  return { planned: planned(call), reads, drawn, error: error === undefined ? undefined : String(error), requestedModel: call.track.requestedModel };
}

describe("plan: the fast path", () => {
  it("resolveCandidates without spreads gives the candidates the spreads gave, keys and their order", () => {
    const r = rng(7);
    for (let i = 0; i < 3000; i++) {
      const models = Array.from({ length: 1 + Math.floor(r() * 3) }, () => modelId(r));
      const provider = providerField(r);
      let prefs: RoutingPreferences;
      try {
        prefs = routingPreferencesOf(provider ? { provider } : {});
      } catch {
        continue;
      }
      const got = resolveCandidates(models, prefs, catalog, known);
      const want = referenceResolve(models, prefs, catalog, known);
      expect(got).toEqual(want);
      expect(got.map((c) => Object.keys(c))).toEqual(want.map((c) => Object.keys(c)));
      got.forEach((c, j) => {
        expect(c.model).toBe(want[j]!.model);
        expect(c.endpoint).toBe(want[j]!.endpoint);
      });
    }
  });

  it("plans what the general path plans over generated requests", async () => {
    let fast = 0;
    let withAttempts = 0;
    for (let seed = 1; seed <= 2500; seed++) {
      const a = await runPlan(seed, false);
      const b = await runPlan(seed, true);
      expect(a).toEqual(b);
      if (a.planned.attempts.length > 0) withAttempts++;
      if (a.planned.attempts.length > 0 && new Set(a.planned.attempts.map((x) => x.provider)).size === 1) fast++;
    }
    // The generated requests reach both paths, and most plan attempts.
    expect(fast).toBeGreaterThan(300);
    expect(withAttempts).toBeGreaterThan(800);
  });
});
