/**
 * The generation record keeps the cost the answer carried (docs/catalog.md, "Cost on the generation record"), on
 * SQLite and PostgreSQL, read over HTTP (`GET /api/v1/generation`) and gRPC (`GenerationsService.GetGeneration`,
 * grpc-js): a priced, platform-served completion records `total_cost` = its `usage.cost`; a BYOK-served one records
 * `is_byok` with 0 to pay and the provider's price as `upstream_inference_cost`; cache-read, cache-write and
 * reasoning token counts are kept; a model the catalog lacks records no cost (null). Completions made with the
 * `openai` SDK against fake upstreams.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import { startFakeAnthropic } from "../../helpers/fake-upstreams/anthropic.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { bearer, grpcClient, unary } from "../../helpers/grpc.js";
import { writeCatalogFile } from "../../helpers/catalog-file.js";

interface PricedUsage {
  cost?: number | null;
  is_byok?: boolean;
  cost_details?: { upstream_inference_cost: number };
}

describe.each(["sqlite", "postgresql"] as const)("the generation record carries the cost (%s)", (provider) => {
  let h: Harness;
  let openai: FakeUpstream;
  let anthropic: FakeUpstream;
  let client: OpenAI;
  let generations: any;

  beforeAll(async () => {
    // 2000 prompt tokens of which 1500 cached, 100 completion tokens of which 40 reasoning.
    openai = await startFakeOpenAI({ text: ["Hel", "lo"], finish: "stop", usage: { input: 2000, output: 100, cached: 1500, reasoning: 40 } });
    // Anthropic: 100 uncached input, 4000 read from the cache, 1000 written to it, 50 output.
    anthropic = await startFakeAnthropic({ text: ["Hi"], finish: "end_turn", usage: { input: 100, output: 50, cached: 4000, cacheWrite: 1000 } });
    const catalogFile = writeCatalogFile([{ slug: "acme/tiny", name: "Acme Tiny (self-hosted)", endpoints: [{ provider: "ollama", model_id: "tiny", context_length: 8192, pricing: { prompt: "0.000001", completion: "0.000002" } }] }]);
    h = await startHarness({
      provider,
      env: {
        PORTICO_PROVIDER_OPENAI_BASE_URL: `${openai.url}/v1`,
        PORTICO_PROVIDER_ANTHROPIC_BASE_URL: anthropic.url,
        PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `ollama=${openai.url}/v1`,
        PORTICO_KEYLESS_PROVIDERS: "ollama",
        PORTICO_CATALOG_FILE: catalogFile,
      },
    });
    for (const [p, key] of [["openai", "sk-test"], ["anthropic", "sk-ant-test"]] as const) {
      const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: p, key } });
      expect(res.status, res.text).toBe(200);
    }
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
    generations = grpcClient("portico/generations/v1/generations_service.proto", "portico.generations.v1.GenerationsService", h.coreUrl);
  });
  afterAll(async () => {
    generations?.close();
    await h?.close();
    await Promise.all([openai, anthropic].map((f) => f?.close()));
  });

  const messages = [{ role: "user" as const, content: "hi" }];

  /** One completion, non-streamed and streamed: each answer's id and usage. */
  async function both(model: string): Promise<Array<{ id: string; usage: PricedUsage }>> {
    const done = await client.chat.completions.create({ model, messages, max_tokens: 100 });
    const stream = await client.chat.completions.create({ model, messages, max_tokens: 100, stream: true, stream_options: { include_usage: true } });
    let id = "";
    let usage: PricedUsage | undefined;
    for await (const chunk of stream) {
      id = chunk.id;
      if (chunk.usage) usage = chunk.usage as unknown as PricedUsage;
    }
    return [
      { id: done.id, usage: done.usage as unknown as PricedUsage },
      { id, usage: usage! },
    ];
  }

  async function overHttp(id: string): Promise<Record<string, unknown>> {
    const got = await api(h, "GET", `/generation?id=${id}`, { key: h.tenant.apiKey });
    expect(got.status, got.text).toBe(200);
    return got.json.data;
  }

  async function overGrpc(id: string): Promise<Record<string, unknown>> {
    const { response, error } = await unary(generations, "GetGeneration", { id }, bearer(h.tenant.apiKey));
    expect(error).toBeUndefined();
    return response.generation;
  }

  it("platform-served and priced: total_cost is the answer's usage.cost, with the token counts it was priced on", async () => {
    for (const { id, usage } of await both("ollama/tiny")) {
      // 2000 × $1/M + 100 × $2/M (no cache or reasoning price on this endpoint).
      expect(usage).toMatchObject({ cost: 0.0022, is_byok: false });
      expect(await overHttp(id)).toMatchObject({
        id,
        provider: "ollama",
        total_cost: usage.cost,
        upstream_inference_cost: usage.cost_details!.upstream_inference_cost,
        is_byok: false,
        prompt_tokens: 2000,
        completion_tokens: 100,
        native_tokens_cached: 1500,
        native_tokens_cache_write: null,
        native_tokens_reasoning: 40,
      });
      expect(await overGrpc(id)).toMatchObject({
        id,
        cost_femto_usd: "2200000000000",
        upstream_inference_cost_femto_usd: "2200000000000",
        is_byok: false,
        cached_tokens: 1500,
        reasoning_tokens: 40,
      });
    }
  });

  it("BYOK-served: is_byok, nothing to pay, the provider's price as upstream_inference_cost", async () => {
    for (const { id, usage } of await both("openai/gpt-4o")) {
      // 500 × $2.50/M + 1500 cached × $1.25/M + 100 × $10/M.
      expect(usage).toMatchObject({ cost: 0, is_byok: true, cost_details: { upstream_inference_cost: 0.004125 } });
      expect(await overHttp(id)).toMatchObject({ total_cost: 0, upstream_inference_cost: 0.004125, is_byok: true, native_tokens_cached: 1500 });
      expect(await overGrpc(id)).toMatchObject({ cost_femto_usd: "0", upstream_inference_cost_femto_usd: "4125000000000", is_byok: true });
    }
    // Anthropic's cache reads and writes, each at its own price: 100 × $3/M + 4000 × $0.30/M + 1000 × $3.75/M + 50 × $15/M.
    for (const { id, usage } of await both("anthropic/claude-sonnet-4")) {
      expect(usage.cost_details!.upstream_inference_cost).toBe(0.006);
      expect(await overHttp(id)).toMatchObject({ total_cost: 0, upstream_inference_cost: 0.006, is_byok: true, prompt_tokens: 5100, native_tokens_cached: 4000, native_tokens_cache_write: 1000 });
      expect(await overGrpc(id)).toMatchObject({ upstream_inference_cost_femto_usd: "6000000000000", cached_tokens: 4000, cache_write_tokens: 1000 });
    }
  });

  it("a model the catalog lacks: the generation has no cost (null), as its answer", async () => {
    for (const { id, usage } of await both("openai/gpt-99-unreleased")) {
      expect(usage.cost).toBeNull();
      expect(await overHttp(id)).toMatchObject({ model: "openai/gpt-99-unreleased", status: "success", total_cost: null, upstream_inference_cost: null, is_byok: true, prompt_tokens: 2000 });
      const g = await overGrpc(id);
      expect(g.cost_femto_usd ?? null).toBeNull();
      expect(g.upstream_inference_cost_femto_usd ?? null).toBeNull();
      expect(g.prompt_tokens).toBe(2000);
    }
  });
});
