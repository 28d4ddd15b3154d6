/**
 * Routing through the model catalog (src/core/chat/routing, docs/routing.md), without a server: canonical
 * slugs fan out to their endpoints with the providers' own model ids; every filter, and the 400 naming the
 * one that left no endpoint; sorts, suffixes, partitions; load balancing by inverse square of price with an
 * injected random draw; the health memory; preferred throughput / latency; uncatalogued ids.
 */
import { ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createCatalog, type CatalogModel, type Endpoint } from "../../../../src/core/catalog/catalog.js";
import { BUILTIN_CATALOG } from "../../../../src/core/catalog/builtin-catalog.js";
import { errorDetailOf } from "../../../../src/lib/service-error.js";
import { routingPreferencesOf } from "../../../../src/core/chat/routing/preferences.js";
import { filterCandidates, orderCandidates, parametersUsed, resolveCandidates, type Candidate } from "../../../../src/core/chat/routing/route.js";
import { endpointKey } from "../../../../src/core/chat/routing/health.js";
import { createEndpointStats } from "../../../../src/core/chat/routing/endpoint-stats.js";

const PROVIDERS = new Set(["openai", "anthropic", "groq", "together", "fireworks", "deepseek", "mistral", "xai", "google-ai-studio", "cheap", "mid", "dear"]);
const known = (p: string) => PROVIDERS.has(p);

function ep(provider: string, model_id: string, prompt: string, completion: string, more: Partial<Endpoint> = {}): Endpoint {
  return {
    provider, model_id, pricing: { prompt, completion }, context_length: 8192, max_completion_tokens: null, quantization: "unknown",
    data_policy: { training: false, retains_prompts: true }, zdr: false, status: "active", source: { url: "test", as_of: "2026-11-26" }, ...more,
  };
}
const model = (slug: string, endpoints: Endpoint[], supported = ["max_tokens", "temperature", "tools"]): CatalogModel => ({
  slug, name: slug, context_length: 8192, architecture: { input_modalities: ["text"], output_modalities: ["text"] }, supported_parameters: supported, endpoints,
});

// Three endpoints at $1, $2 and $3 per million tokens (prompt + completion), with different terms.
const catalog = createCatalog({
  version: 1,
  models: [
    model("acme/m", [
      ep("cheap", "m-cheap", "0.0000005", "0.0000005", { quantization: "int8", data_policy: { training: true, retains_prompts: true } }),
      ep("mid", "m-mid", "0.000001", "0.000001", { quantization: "fp8", zdr: true, supported_parameters: ["max_tokens", "temperature"] }),
      ep("dear", "m-dear", "0.0000015", "0.0000015", { quantization: "bf16", distillable: true, pricing: { prompt: "0.0000015", completion: "0.0000015", request: "0.001", image: "0.002" } }),
    ]),
    model("acme/other", [ep("cheap", "o-cheap", "0.000004", "0.000004"), ep("dear", "o-dear", "0.000001", "0.000001")]),
  ],
});

const body = (provider?: Record<string, unknown>, more: Record<string, unknown> = {}) => ({ model: "acme/m", messages: [], ...(provider ? { provider } : {}), ...more });

function route(b: Record<string, unknown>, opts: { random?: number; unhealthy?: string[]; stats?: ReturnType<typeof createEndpointStats>; cat?: typeof catalog } = {}): Candidate[] {
  const prefs = routingPreferencesOf(b);
  const models = [b.model as string, ...((b.models as string[] | undefined) ?? [])];
  const cands = filterCandidates(resolveCandidates(models, prefs, opts.cat ?? catalog, known), prefs, b, String(b.model));
  return orderCandidates(cands, prefs, { unhealthy: new Set(opts.unhealthy ?? []), random: () => opts.random ?? 0, ...(opts.stats ? { stats: opts.stats } : {}) });
}
const providers = (c: Candidate[]) => c.map((x) => x.provider);

function refusal(fn: () => unknown): { field?: string; message: string } {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    return { field: errorDetailOf(err as ConnectError)?.field, message: (err as ConnectError).rawMessage };
  }
  throw new Error("expected a refusal");
}

describe("resolving model ids", () => {
  const builtin = createCatalog(BUILTIN_CATALOG);
  it("a canonical slug fans out to its endpoints, each with the provider's own model id", () => {
    const got = route({ model: "meta-llama/llama-3.3-70b-instruct", provider: { sort: "price" } }, { cat: builtin });
    expect(got.map((c) => [c.provider, c.upstreamModel])).toEqual([
      ["groq", "llama-3.3-70b-versatile"],
      ["together", "meta-llama/Llama-3.3-70B-Instruct-Turbo"],
      ["fireworks", "accounts/fireworks/models/llama-v3p3-70b-instruct"],
    ]);
    expect(got.every((c) => c.model?.slug === "meta-llama/llama-3.3-70b-instruct" && c.requestedModel === "meta-llama/llama-3.3-70b-instruct")).toBe(true);
  });

  it("a <provider>/<provider model id> the catalog knows goes to that provider only, catalogued", () => {
    const got = route({ model: "groq/llama-3.3-70b-versatile" }, { cat: builtin });
    expect(got.map((c) => [c.provider, c.upstreamModel, c.model?.slug])).toEqual([["groq", "llama-3.3-70b-versatile", "meta-llama/llama-3.3-70b-instruct"]]);
  });

  it("an id the catalog does not know still goes to its provider, uncatalogued", () => {
    const got = route({ model: "groq/brand-new-model" }, { cat: builtin });
    expect(got.map((c) => [c.provider, c.upstreamModel, c.model, c.endpoint])).toEqual([["groq", "brand-new-model", undefined, undefined]]);
  });

  it("provider lists take display names too, case insensitive", () => {
    const names = new Map([["together ai", "together"], ["fireworks ai", "fireworks"]]);
    expect(routingPreferencesOf({ provider: { only: ["Together AI", "GROQ"], order: ["Fireworks AI"], ignore: ["fireworks"] } }, names)).toMatchObject({
      only: ["together", "groq"],
      order: ["fireworks"],
      ignore: ["fireworks"],
    });
  });

  it("only and ignore match endpoint provider slugs; order puts its providers first", () => {
    expect(providers(route(body({ only: ["dear", "mid"], sort: "price" })))).toEqual(["mid", "dear"]);
    expect(providers(route(body({ ignore: ["cheap"], sort: "price" })))).toEqual(["mid", "dear"]);
    expect(providers(route(body({ order: ["dear", "cheap"] }), { random: 0 }))).toEqual(["dear", "cheap", "mid"]);
    expect(providers(route(body({ order: ["dear"], allow_fallbacks: false })))).toEqual(["dear"]);
  });
});

describe("filters", () => {
  it("quantizations, data_collection, zdr, enforce_distillable_text, require_parameters and max_price each keep what meets them", () => {
    expect(providers(route(body({ quantizations: ["fp8", "bf16"], sort: "price" })))).toEqual(["mid", "dear"]);
    expect(providers(route(body({ data_collection: "deny", sort: "price" })))).toEqual(["mid", "dear"]);
    expect(providers(route(body({ zdr: true })))).toEqual(["mid"]);
    expect(providers(route(body({ enforce_distillable_text: true })))).toEqual(["dear"]);
    // tools: "mid" lists its own parameters, without tools.
    expect(providers(route(body({ require_parameters: true, sort: "price" }, { tools: [{ type: "function", function: { name: "f" } }] })))).toEqual(["cheap", "dear"]);
    // USD per million tokens: "mid" costs 1 per million prompt tokens.
    expect(providers(route(body({ max_price: { prompt: "1", completion: 1 }, sort: "price" })))).toEqual(["cheap", "mid"]);
    expect(providers(route(body({ max_price: { prompt: "0.5" } })))).toEqual(["cheap"]);
    expect(providers(route(body({ max_price: { request: "0.0005" }, sort: "price" })))).toEqual(["cheap", "mid"]);
    expect(providers(route(body({ max_price: { image: "0.002" }, sort: "price" })))).toEqual(["cheap", "mid", "dear"]);
  });

  it.each([
    ["provider.only", { only: ["nobody"] }],
    ["provider.ignore", { ignore: ["cheap", "mid", "dear"] }],
    ["provider.order", { order: ["groq"], allow_fallbacks: false }],
    ["provider.quantizations", { quantizations: ["fp4"] }],
    ["provider.data_collection", { data_collection: "deny", only: ["cheap"] }],
    ["provider.zdr", { zdr: true, ignore: ["mid"] }],
    ["provider.enforce_distillable_text", { enforce_distillable_text: true, only: ["cheap", "mid"] }],
    ["provider.require_parameters", { require_parameters: true, only: ["mid"] }],
    ["provider.max_price.prompt", { max_price: { prompt: "0.4" } }],
    ["provider.max_price.completion", { max_price: { completion: "0.0000001" } }],
    ["provider.max_price.request", { max_price: { request: "0" }, only: ["dear"] }],
    ["provider.max_price.image", { max_price: { image: "0.001" }, only: ["dear"] }],
  ])("a filter that leaves no endpoint is a 400 naming it: %s", (field, provider) => {
    const r = refusal(() => route(body(provider, { tools: [{ type: "function", function: { name: "f" } }] })));
    expect(r.field).toBe(field);
    expect(r.message).toContain(field);
    expect(r.message).toContain("nothing was sent to any provider");
  });

  it("zdr: a provider with a credential declared zero-data-retention is eligible though its endpoint is not", () => {
    const prefs = routingPreferencesOf(body({ zdr: true }));
    prefs.zdrCredentialProviders = new Set(["dear"]);
    const kept = filterCandidates(resolveCandidates(["acme/m"], prefs, catalog, known), prefs, body(), "acme/m");
    expect(providers(kept).sort()).toEqual(["dear", "mid"]);
  });

  it("an uncatalogued endpoint meets no catalog filter (its terms are unknown)", () => {
    expect(refusal(() => route({ model: "groq/brand-new-model", provider: { zdr: true } })).field).toBe("provider.zdr");
    expect(refusal(() => route({ model: "groq/brand-new-model", provider: { max_price: { prompt: "100" } } })).field).toBe("provider.max_price.prompt");
  });

  it("a long-context tier counts against max_price: the endpoint may charge it", () => {
    const builtin = createCatalog(BUILTIN_CATALOG);
    // Gemini 2.5 Pro: $1.25 per million prompt tokens, $2.50 above 200k.
    expect(refusal(() => route({ model: "google/gemini-2.5-pro", provider: { max_price: { prompt: "2" } } }, { cat: builtin })).field).toBe("provider.max_price.prompt");
    expect(route({ model: "google/gemini-2.5-pro", provider: { max_price: { prompt: "2.5" } } }, { cat: builtin })).toHaveLength(1);
  });

  it("refuses what it cannot honour, naming the field: sort exacto, max_price.audio", () => {
    expect(refusal(() => route(body({ sort: "exacto" }))).field).toBe("provider.sort");
    expect(refusal(() => route(body({ sort: { by: "exacto" } }))).field).toBe("provider.sort.by");
    expect(refusal(() => route(body({ max_price: { audio: "1" } }))).field).toBe("provider.max_price.audio");
  });

  it("the parameters a request uses, by their catalog names", () => {
    expect(parametersUsed({ max_completion_tokens: 5, temperature: null, reasoning_effort: "low", response_format: { type: "json_schema" }, stop: "x" }).sort()).toEqual(
      ["max_tokens", "reasoning", "response_format", "stop", "structured_outputs"].sort(),
    );
  });
});

describe("ordering", () => {
  it("load balances by inverse square of price: weights 1, 1/4, 1/9 for $1, $2, $3", () => {
    // Total weight 1 + 0.25 + 0.111… = 1.3611…; cumulative shares 0.7347, 0.9184, 1.
    const at = (r: number) => providers(route(body(), { random: r }));
    expect(at(0)).toEqual(["cheap", "mid", "dear"]);
    expect(at(0.734)).toEqual(["cheap", "mid", "dear"]);
    expect(at(0.735)).toEqual(["mid", "cheap", "dear"]);
    expect(at(0.918)).toEqual(["mid", "cheap", "dear"]);
    expect(at(0.919)).toEqual(["dear", "cheap", "mid"]);
    expect(at(0.9999)).toEqual(["dear", "cheap", "mid"]);
    // The shares over many draws follow the weights.
    const counts = { cheap: 0, mid: 0, dear: 0 };
    for (let i = 0; i < 1000; i++) counts[at((i + 0.5) / 1000)[0] as keyof typeof counts]++;
    expect(counts).toEqual({ cheap: 735, mid: 183, dear: 82 });
  });

  it("endpoints that failed recently go last, after the healthy ones (the real-world example)", () => {
    const unhealthy = [endpointKey("mid", "m-mid")];
    expect(providers(route(body(), { random: 0, unhealthy }))).toEqual(["cheap", "dear", "mid"]);
    // A draw of the most expensive healthy one: the others by price, the failing one last.
    expect(providers(route(body(), { random: 0.95, unhealthy }))).toEqual(["dear", "cheap", "mid"]);
  });

  it("sort: price ascending, throughput descending, latency ascending; endpoints without figures last", () => {
    const stats = createEndpointStats();
    const rec = (provider: string, latencyMs: number, ttft: number, tokens: number) =>
      stats.observe({ status: "success", catalogModel: "acme/m", provider, attempts: 1, latencyMs, timeToFirstTokenMs: ttft, completionTokens: tokens, streamed: true });
    rec("dear", 1100, 100, 1000); // 1000 tok/s, 0.1 s
    rec("mid", 2500, 500, 1000); // 500 tok/s, 0.5 s
    expect(providers(route(body({ sort: "price" }), { stats }))).toEqual(["cheap", "mid", "dear"]);
    expect(providers(route(body({ sort: "throughput" }), { stats }))).toEqual(["dear", "mid", "cheap"]);
    expect(providers(route(body({ sort: { by: "latency" } }), { stats }))).toEqual(["dear", "mid", "cheap"]);
    // Suffixes: :nitro = throughput, :floor = price.
    expect(providers(route({ model: "acme/m:nitro" }, { stats }))).toEqual(["dear", "mid", "cheap"]);
    expect(providers(route({ model: "acme/m:floor" }, { stats, random: 0.99 }))).toEqual(["cheap", "mid", "dear"]);
    expect(route({ model: "acme/m:nitro" }, { stats })[0]!.requestedModel).toBe("acme/m");
  });

  it("partition: by model keeps the models in order; none sorts every model's endpoints together (route: sort is its legacy alias)", () => {
    const b = (p: Record<string, unknown>, more: Record<string, unknown> = {}) => ({ model: "acme/other", models: ["acme/m"], provider: p, ...more });
    const pairs = (c: Candidate[]) => c.map((x) => x.upstreamModel);
    expect(pairs(route(b({ sort: "price" })))).toEqual(["o-dear", "o-cheap", "m-cheap", "m-mid", "m-dear"]);
    expect(pairs(route(b({ sort: { by: "price", partition: "none" } })))).toEqual(["m-cheap", "o-dear", "m-mid", "m-dear", "o-cheap"]);
    expect(pairs(route(b({ sort: "price" }, { route: "sort" })))).toEqual(["m-cheap", "o-dear", "m-mid", "m-dear", "o-cheap"]);
    expect(pairs(route(b({ sort: "price" }, { route: "fallback" })))).toEqual(["o-dear", "o-cheap", "m-cheap", "m-mid", "m-dear"]);
    expect(pairs(route(b({ sort: { by: "price", partition: "model" } }, { route: "sort" })))).toEqual(["o-dear", "o-cheap", "m-cheap", "m-mid", "m-dear"]);
  });

  it("preferred_min_throughput / preferred_max_latency move endpoints that miss them (then those without figures) last, across models", () => {
    const stats = createEndpointStats();
    const rec = (provider: string, model: string, latencyMs: number, ttft: number, tokens: number) =>
      stats.observe({ status: "success", catalogModel: model, provider, attempts: 1, latencyMs, timeToFirstTokenMs: ttft, completionTokens: tokens, streamed: true });
    rec("cheap", "acme/m", 10_100, 100, 1000); // 100 tok/s, 0.1 s
    rec("mid", "acme/m", 1500, 500, 1000); // 1000 tok/s, 0.5 s
    rec("dear", "acme/other", 600, 100, 500); // 1000 tok/s, 0.1 s
    const order = (provider: Record<string, unknown>) => route({ model: "acme/m", models: ["acme/other"], provider: { sort: "price", ...provider } }, { stats }).map((c) => `${c.provider}:${c.upstreamModel}`);
    expect(order({ preferred_min_throughput: 500 })).toEqual(["mid:m-mid", "dear:o-dear", "dear:m-dear", "cheap:o-cheap", "cheap:m-cheap"]);
    expect(order({ preferred_max_latency: { p90: 0.2 } })).toEqual(["cheap:m-cheap", "dear:o-dear", "dear:m-dear", "cheap:o-cheap", "mid:m-mid"]);
  });
});
