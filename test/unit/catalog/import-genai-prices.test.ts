/**
 * scripts/import-genai-prices.ts (docs/catalog.md, "Importing prices from genai-prices"): the script run as an
 * operator runs it writes a file the catalog loader accepts; known list prices appear converted exactly (decimal
 * text, no float drift: $0.075/M is "0.000000075", where 0.075 / 1e6 in floating point is 7.499999999999999e-8);
 * every imported endpoint prices a request as @pydantic/genai-prices itself does (long-context tiers included);
 * the choice of dated prices, time-of-day discounts, unknown providers and new models on synthetic data.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { calcPrice } from "@pydantic/genai-prices";
import { describe, expect, it } from "vitest";
import { decimalOf, importGenaiPrices, shiftDecimal, type GenaiProvider } from "../../../scripts/import-genai-prices.js";
import { loadCatalog } from "../../../src/core/catalog/catalog.js";
import { costOf, femto } from "../../../src/core/catalog/cost.js";

const run = promisify(execFile);

describe("the genai-prices import script", () => {
  it("writes a catalog file the loader accepts, with known prices converted exactly and priced as genai-prices prices them", async () => {
    const out = join(mkdtempSync(join(tmpdir(), "portico-genai-")), "catalog.json");
    const { stderr } = await run(process.execPath, ["bin/run-ts.mjs", "scripts/import-genai-prices.ts", "--out", out, "--as-of", "2026-11-26"]);
    expect(stderr).toMatch(/^@pydantic\/genai-prices 0\.1\.8, prices as of 2026-11-26: \d+ built-in endpoints updated, \d+ models added/);
    const file = JSON.parse(readFileSync(out, "utf8"));
    const catalog = loadCatalog(out); // the loader used at start-up (PORTICO_CATALOG_FILE)

    const price = (provider: string, id: string) => catalog.endpointFor(provider, id)!.endpoint;
    expect(price("openai", "gpt-4o").pricing).toEqual({ prompt: "0.0000025", completion: "0.00001", input_cache_read: "0.00000125" });
    expect(price("openai", "gpt-4o-mini").pricing).toEqual({ prompt: "0.00000015", completion: "0.0000006", input_cache_read: "0.000000075" });
    expect(price("anthropic", "claude-sonnet-4-5-20250929").pricing).toEqual({
      prompt: "0.000003", completion: "0.000015", input_cache_read: "0.0000003", input_cache_write: "0.00000375",
      tiers: [{ above_prompt_tokens: 200000, prompt: "0.000006", completion: "0.0000225", input_cache_read: "0.0000006", input_cache_write: "0.0000075" }],
    });
    expect(price("anthropic", "claude-sonnet-4-5-20250929").source).toEqual({ url: "https://www.anthropic.com/pricing#api", as_of: "2026-11-26" });
    expect(price("groq", "llama-3.3-70b-versatile").pricing).toEqual({ prompt: "0.00000059", completion: "0.00000079" });
    // A model the built-in catalog lacks arrives as a new model with the provider's data policy.
    const added = catalog.endpointFor("anthropic", "claude-opus-4-5");
    expect(added?.model.slug).toBe("anthropic/claude-opus-4-5");
    expect(added?.endpoint.data_policy).toEqual({ training: false, retains_prompts: true, retention_days: 30 });

    // Every price in the file is a decimal string; every endpoint in it prices 300k prompt + 1M completion
    // tokens (above the long-context thresholds) and 1M + 1M as genai-prices does.
    const genaiProvider: Record<string, string> = { openai: "openai", anthropic: "anthropic", "google-ai-studio": "google", deepseek: "deepseek", mistral: "mistral", xai: "x-ai", groq: "groq", together: "together", fireworks: "fireworks" };
    let compared = 0;
    for (const m of file.models) {
      for (const e of m.endpoints) {
        for (const v of Object.values(e.pricing).filter((x) => typeof x !== "object")) expect(v).toMatch(/^\d+(\.\d+)?$/);
        const endpoint = catalog.model(m.slug)!.endpoints.find((x) => x.provider === e.provider)!;
        for (const input of [1_000_000, 300_000]) {
          const ours = Number(costOf(endpoint.pricing, { prompt_tokens: input, completion_tokens: 1_000_000, total_tokens: input + 1_000_000 }).total) / 1e15;
          const theirs = calcPrice({ input_tokens: input, output_tokens: 1_000_000 }, endpoint.model_id.replace(/^accounts\/fireworks\/models\//, ""), {
            providerId: genaiProvider[e.provider]!,
            timestamp: new Date("2026-11-26T12:00:00Z"),
          });
          expect(theirs, `${m.slug} on ${e.provider}`).not.toBeNull();
          expect(ours, `${m.slug} on ${e.provider} (${input} prompt tokens)`).toBeCloseTo(theirs!.total_price, 9);
          compared += 1;
        }
      }
    }
    expect(compared).toBeGreaterThan(100);
  }, 60_000);

  it("converts the data set's numbers as the decimals they were written as", () => {
    expect(decimalOf(0.075)).toBe("0.075");
    expect(decimalOf(1e-7)).toBe("0.0000001");
    expect(decimalOf(1.5e21)).toBe("1500000000000000000000");
    expect(shiftDecimal("0.075", 6)).toBe("0.000000075");
    expect(shiftDecimal("2.5", 6)).toBe("0.0000025");
    expect(shiftDecimal("10", 3)).toBe("0.01");
    expect(shiftDecimal("1.25", -2)).toBe("125");
    expect(femto(shiftDecimal(decimalOf(0.075), 6))).toBe(75_000_000n);
  });

  it("on synthetic data: dated prices by as_of, time-of-day discounts left out, tiers, unknown providers and new models", () => {
    const providers: GenaiProvider[] = [
      {
        id: "deepseek",
        name: "DeepSeek",
        pricing_urls: ["https://example.test/deepseek-prices"],
        models: [
          {
            id: "deepseek-chat",
            match: { equals: "deepseek-chat" },
            prices: [
              { prices: { input_mtok: 0.27, output_mtok: 1.1, cache_read_mtok: 0.07 } },
              { constraint: { type: "time_of_date", start_time: "16:30:00Z", end_time: "00:30:00Z" }, prices: { input_mtok: 0.135, output_mtok: 0.55 } },
              { constraint: { type: "start_date", start_date: "2026-01-01" }, prices: { input_mtok: 0.28, output_mtok: 0.42, cache_read_mtok: 0.028 } },
              { constraint: { type: "start_date", start_date: "2027-01-01" }, prices: { input_mtok: 9, output_mtok: 9 } },
            ],
          },
          {
            // The standard price written as a 16-hour time-of-day window, the discount unconstrained.
            id: "deepseek-reasoner",
            match: { equals: "deepseek-reasoner" },
            prices: [
              { prices: { input_mtok: 0.135, output_mtok: 0.55 } },
              { constraint: { type: "time_of_date", start_time: "00:30:00Z", end_time: "16:30:00Z" }, prices: { input_mtok: 0.55, output_mtok: 2.19 } },
            ],
          },
          {
            id: "deepseek-v9",
            name: "DeepSeek V9",
            context_window: 262144,
            match: { starts_with: "deepseek-v9" },
            prices: { input_mtok: { base: 0.5, tiers: [{ start: 128000, price: 1 }] }, output_mtok: 2, requests_kcount: 5, input_audio_mtok: 3 },
          },
          { id: "deepseek-embed", context_window: 8192, match: { equals: "deepseek-embed" }, prices: { input_mtok: 0.01 } },
        ],
      },
      { id: "aws", name: "AWS Bedrock", models: [{ id: "x", match: { equals: "x" }, prices: { input_mtok: 1, output_mtok: 1 } }] },
    ];
    const { file, report } = importGenaiPrices(providers, { asOf: "2026-11-26" });
    const chat = file.models.find((m) => m.slug === "deepseek/deepseek-chat")!;
    expect(chat.endpoints).toEqual([
      { provider: "deepseek", pricing: { prompt: "0.00000028", completion: "0.00000042", input_cache_read: "0.000000028" }, source: { url: "https://example.test/deepseek-prices", as_of: "2026-11-26" } },
    ]);
    expect(importGenaiPrices(providers, { asOf: "2025-06-01" }).file.models.find((m) => m.slug === "deepseek/deepseek-chat")!.endpoints[0]!.pricing).toEqual({
      prompt: "0.00000027", completion: "0.0000011", input_cache_read: "0.00000007",
    });
    expect(file.models.find((m) => m.slug === "deepseek/deepseek-reasoner")!.endpoints[0]!.pricing).toEqual({ prompt: "0.00000055", completion: "0.00000219" });
    const v9 = file.models.find((m) => m.slug === "deepseek/deepseek-v9")!;
    expect(v9).toMatchObject({ name: "DeepSeek V9", context_length: 262144 });
    expect(v9.endpoints[0]).toMatchObject({
      provider: "deepseek",
      model_id: "deepseek-v9",
      pricing: { prompt: "0.0000005", completion: "0.000002", request: "0.005", tiers: [{ above_prompt_tokens: 128000, prompt: "0.000001" }] },
      data_policy: { training: true, retains_prompts: true },
    });
    expect(file.models.some((m) => m.slug === "deepseek/deepseek-embed")).toBe(false);
    expect(report.skipped).toContain("provider aws (1 models): no Portico adapter");
    expect(report.skipped).toContain("deepseek/deepseek-embed: no prompt and completion prices (not a chat model)");
    expect(report.notes).toContain("deepseek/deepseek-chat: time-of-day prices 16:30:00Z–00:30:00Z not modelled");
    expect(report.notes).toContain("deepseek/deepseek-v9: input_audio_mtok not billed by Portico");
  });
});
