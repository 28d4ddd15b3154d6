/** The built-in catalog's data, its lookups, and the operator file merged over it (docs/catalog.md). */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BUILTIN_CATALOG, perM } from "../../../src/core/catalog/builtin-catalog.js";
import { CatalogError, createCatalog, loadCatalog, mergeCatalogs } from "../../../src/core/catalog/catalog.js";
import { femto } from "../../../src/core/catalog/cost.js";
import { ProviderRegistry } from "../../../src/core/chat/providers/index.js";

const catalog = createCatalog(BUILTIN_CATALOG);

function operatorFile(content: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), "portico-catalog-"));
  const file = join(dir, "catalog.json");
  writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content));
  return file;
}

describe("perM: per-million prices to exact per-token strings", () => {
  it("shifts the decimal point six places without floating point", () => {
    expect(perM("2.50")).toBe("0.0000025");
    expect(perM("0.075")).toBe("0.000000075");
    expect(perM("15")).toBe("0.000015");
    expect(perM("0")).toBe("0");
    expect(perM("1000")).toBe("0.001");
    expect(perM("18.75")).toBe("0.00001875");
  });
});

describe("the built-in catalog", () => {
  const registry = new ProviderRegistry();

  it("has models for every provider that has an adapter, and only for those", () => {
    const served = new Set(BUILTIN_CATALOG.models.flatMap((m) => m.endpoints.map((e) => e.provider)));
    expect([...served].sort()).toEqual(registry.slugs());
  });

  it("every entry is complete: prices parse, limits are positive, a source and date for every figure", () => {
    const slugs = new Set<string>();
    for (const m of BUILTIN_CATALOG.models) {
      expect(m.slug, m.slug).toMatch(/^[a-z0-9-]+\/[a-z0-9.-]+$/);
      expect(slugs.has(m.slug), `duplicate ${m.slug}`).toBe(false);
      slugs.add(m.slug);
      expect(m.name.length).toBeGreaterThan(0);
      expect(m.architecture.input_modalities).toContain("text");
      // Embedding models (POST /embeddings) produce no tokens: no max_tokens, and no output price.
      const embeddings = m.architecture.output_modalities.includes("embeddings");
      if (embeddings) expect(m.architecture.output_modalities, m.slug).toEqual(["embeddings"]);
      else expect(m.supported_parameters).toContain("max_tokens");
      expect(m.endpoints.length).toBeGreaterThan(0);
      expect(m.context_length).toBe(Math.max(...m.endpoints.map((e) => e.context_length)));
      for (const e of m.endpoints) {
        const at = `${m.slug} @ ${e.provider}`;
        expect(registry.get(e.provider), at).toBeDefined();
        expect(femto(e.pricing.prompt), at).toBeGreaterThan(0n);
        if (embeddings) expect(e.pricing.completion, at).toBe("0");
        else expect(femto(e.pricing.completion), at).toBeGreaterThan(0n);
        for (const p of [e.pricing.input_cache_read, e.pricing.input_cache_write]) if (p !== undefined) expect(() => femto(p)).not.toThrow();
        // A cache read is never dearer than an uncached prompt token.
        if (e.pricing.input_cache_read) expect(femto(e.pricing.input_cache_read), at).toBeLessThan(femto(e.pricing.prompt));
        expect(e.context_length, at).toBeGreaterThan(0);
        if (e.max_completion_tokens !== null) expect(e.max_completion_tokens, at).toBeLessThanOrEqual(e.context_length);
        expect(e.source.url, at).toMatch(/^https:\/\//);
        expect(e.source.as_of, at).toMatch(/^\d{4}-\d{2}-\d{2}$/);
        expect(e.status).toBe("active");
        // Conservative by default: nothing built in claims zero data retention.
        expect(e.zdr).toBe(false);
      }
    }
  });

  it("lists several endpoints for open-weight models served by several providers", () => {
    const providers = catalog.endpointsOf("meta-llama/llama-3.3-70b-instruct").map((e) => e.provider);
    expect(providers).toEqual(["groq", "together", "fireworks"]);
    expect(catalog.endpointsOf("openai/gpt-oss-120b").length).toBeGreaterThanOrEqual(3);
  });

  it("Anthropic endpoints price cache writes at 1.25× and cache reads at 0.1× the input price", () => {
    for (const m of BUILTIN_CATALOG.models.filter((m) => m.slug.startsWith("anthropic/"))) {
      const e = m.endpoints[0]!;
      expect(femto(e.pricing.input_cache_write!) * 4n, m.slug).toBe(femto(e.pricing.prompt) * 5n);
      expect(femto(e.pricing.input_cache_read!) * 10n, m.slug).toBe(femto(e.pricing.prompt));
    }
  });
});

describe("lookups", () => {
  it("model slug → model and endpoints; unknown slug → nothing", () => {
    expect(catalog.model("anthropic/claude-sonnet-4")?.name).toBe("Anthropic: Claude Sonnet 4");
    expect(catalog.endpointsOf("anthropic/claude-sonnet-4")).toHaveLength(1);
    expect(catalog.model("acme/nothing")).toBeUndefined();
    expect(catalog.endpointsOf("acme/nothing")).toEqual([]);
    const slugs = catalog.models().map((m) => m.slug);
    expect(slugs).toEqual([...slugs].sort());
  });

  it("provider + the provider's own model id (or an alias) → endpoint", () => {
    expect(catalog.endpointFor("anthropic", "claude-sonnet-4-20250514")?.model.slug).toBe("anthropic/claude-sonnet-4");
    expect(catalog.endpointFor("anthropic", "claude-sonnet-4-0")?.model.slug).toBe("anthropic/claude-sonnet-4");
    expect(catalog.endpointFor("groq", "llama-3.3-70b-versatile")?.endpoint.pricing.prompt).toBe("0.00000059");
    expect(catalog.endpointFor("together", "llama-3.3-70b-versatile")).toBeUndefined();
    expect(catalog.endpointFor("openai", "gpt-4o-2024-08-06")?.model.slug).toBe("openai/gpt-4o");
  });

  it("resolve: the served provider's model id first, then the requested canonical slug on that provider", () => {
    // `<provider>/<model>` as routed today: openai/gpt-4o-mini sends `gpt-4o-mini` to openai.
    expect(catalog.resolve("openai/gpt-4o-mini", "openai", "gpt-4o-mini")?.model.slug).toBe("openai/gpt-4o-mini");
    // A canonical slug whose tail is not the provider's id: the model's endpoint on the provider that served it.
    expect(catalog.resolve("anthropic/claude-sonnet-4", "anthropic", "claude-sonnet-4")?.endpoint.model_id).toBe("claude-sonnet-4-20250514");
    // Served by a provider that has no endpoint for it, or a model nobody catalogued: uncatalogued.
    expect(catalog.resolve("anthropic/claude-sonnet-4", "groq", "claude-sonnet-4")).toBeUndefined();
    expect(catalog.resolve("openai/gpt-99", "openai", "gpt-99")).toBeUndefined();
  });
});

describe("the operator file (PORTICO_CATALOG_FILE), merged over the built-in catalog", () => {
  it("without a file, the built-in catalog", () => {
    expect(loadCatalog(undefined).models()).toHaveLength(BUILTIN_CATALOG.models.length);
  });

  it("adds a self-hosted model in one entry, with conservative defaults for what it leaves out", () => {
    const c = loadCatalog(
      operatorFile({
        version: 1,
        models: [{ slug: "acme/llama-local", name: "Local Llama", endpoints: [{ provider: "vllm", model_id: "llama-3-8b", context_length: 8192, pricing: { prompt: "0", completion: "0" } }] }],
      }),
    );
    const hit = c.endpointFor("vllm", "llama-3-8b")!;
    expect(hit.model).toMatchObject({ slug: "acme/llama-local", name: "Local Llama", context_length: 8192, architecture: { input_modalities: ["text"] } });
    expect(hit.endpoint).toMatchObject({ quantization: "unknown", zdr: false, status: "active", data_policy: { training: true, retains_prompts: true }, max_completion_tokens: null });
    expect(c.model("openai/gpt-4o")).toBeDefined(); // the built-in ones stay
  });

  it("a negotiated price replaces an endpoint's whole price list; other fields of the endpoint stay", () => {
    const c = loadCatalog(
      operatorFile({ version: 1, models: [{ slug: "openai/gpt-4o", endpoints: [{ provider: "openai", pricing: { prompt: "0.000002", completion: "0.000008" } }] }] }),
    );
    const e = c.endpointFor("openai", "gpt-4o")!.endpoint;
    expect(e.pricing).toEqual({ prompt: "0.000002", completion: "0.000008" });
    expect(e.context_length).toBe(128_000);
    expect(e.source.url).toBe("operator catalog file");
  });

  it("disables an endpoint, removes an endpoint, removes a model, adds an endpoint to a built-in model", () => {
    const c = loadCatalog(
      operatorFile({
        version: 1,
        models: [
          { slug: "meta-llama/llama-3.3-70b-instruct", endpoints: [{ provider: "groq", status: "disabled" }, { provider: "fireworks", remove: true }, { provider: "vllm", model_id: "llama33", pricing: { prompt: "0.0000001", completion: "0.0000001" } }] },
          { slug: "openai/gpt-4o-mini", remove: true },
        ],
      }),
    );
    expect(c.endpointsOf("meta-llama/llama-3.3-70b-instruct").map((e) => e.provider)).toEqual(["together", "vllm"]);
    expect(c.endpointFor("groq", "llama-3.3-70b-versatile")?.endpoint.status).toBe("disabled"); // still priced if served
    expect(c.endpointFor("vllm", "llama33")?.endpoint.context_length).toBe(131_072); // the model's context by default
    expect(c.model("openai/gpt-4o-mini")).toBeUndefined();
  });

  it("refuses a broken file with the file, the entry and the rule", () => {
    const bad = (content: unknown) => () => loadCatalog(operatorFile(content));
    expect(bad("{not json")).toThrow(/is not JSON/);
    expect(() => loadCatalog("/nonexistent/catalog.json")).toThrow(/PORTICO_CATALOG_FILE \/nonexistent\/catalog.json cannot be read/);
    expect(bad({ version: 2, models: [] })).toThrow(CatalogError);
    expect(bad({ version: 1, models: [{ slug: "openai/gpt-4o", endpoints: [{ provider: "openai", pricing: { prompt: 0.000002, completion: "1" } }] }] })).toThrow(
      /models\[0\]\.endpoints\[0\]\.pricing\.prompt: must be a decimal string/,
    );
    expect(bad({ version: 1, models: [{ slug: "openai/gpt-4o", endpoints: [{ provider: "openai", pricing: { prompt: "3e-6", completion: "1" } }] }] })).toThrow(/decimal string/);
    expect(bad({ version: 1, models: [{ slug: "nope" }] })).toThrow(/canonical slug/);
    expect(bad({ version: 1, models: [{ slug: "acme/x", name: "X" }] })).toThrow(/needs a name and at least one endpoint/);
    expect(bad({ version: 1, models: [{ slug: "acme/x", name: "X", endpoints: [{ provider: "vllm", model_id: "x" }] }] })).toThrow(/needs pricing/);
    expect(bad({ version: 1, models: [{ slug: "acme/x", remove: true }] })).toThrow(/remove names a model the catalog lacks/);
    expect(bad({ version: 1, models: [{ slug: "openai/gpt-4o", colour: "red" }] })).toThrow(/colour/);
    // Two models claiming one provider id would price requests at a guess.
    expect(
      bad({ version: 1, models: [{ slug: "acme/x", name: "X", endpoints: [{ provider: "openai", model_id: "gpt-4o", context_length: 1000, pricing: { prompt: "0", completion: "0" } }] }] }),
    ).toThrow(/"gpt-4o" is claimed by both/);
  });

  it("mergeCatalogs leaves the built-in catalog unchanged", () => {
    const before = JSON.stringify(BUILTIN_CATALOG);
    mergeCatalogs(BUILTIN_CATALOG, { version: 1, models: [{ slug: "openai/gpt-4o", endpoints: [{ provider: "openai", status: "disabled" }] }] });
    expect(JSON.stringify(BUILTIN_CATALOG)).toBe(before);
  });
});
