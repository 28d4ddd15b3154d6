/**
 * usage.cost on chat completions (docs/catalog.md), end to end with the `openai` SDK against fake upstreams:
 * the answer and the final stream chunk carry the generation's cost at the catalog's prices with the breakdown
 * of the real-world service (`cost`, `is_byok`, `cost_details`); a BYOK-served call shows the provider's price
 * in `cost_details` and 0 in `cost` (the customer's own key paid); an operator catalog file (PORTICO_CATALOG_FILE)
 * prices a self-hosted model; a model the catalog lacks still routes, with `cost: null`. `GET /api/v1/models`
 * describes the catalog models the key can reach. Over HTTP and gRPC.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import { startFakeAnthropic } from "../../helpers/fake-upstreams/anthropic.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { bearer, grpcClient } from "../../helpers/grpc.js";
import { writeCatalogFile } from "../../helpers/catalog-file.js";

interface PricedUsage {
  prompt_tokens: number;
  completion_tokens: number;
  cost?: number | null;
  is_byok?: boolean;
  cost_details?: { upstream_inference_cost: number; upstream_inference_prompt_cost: number; upstream_inference_completions_cost: number };
}

describe("usage.cost from the model catalog", () => {
  let h: Harness;
  let openai: FakeUpstream;
  let anthropic: FakeUpstream;
  let client: OpenAI;

  beforeAll(async () => {
    // 2000 prompt tokens of which 1500 cached, 100 completion tokens.
    openai = await startFakeOpenAI({ text: ["Hel", "lo"], finish: "stop", usage: { input: 2000, output: 100, cached: 1500 } });
    // Anthropic: 100 uncached input, 4000 read from the cache, 1000 written to it, 50 output.
    anthropic = await startFakeAnthropic({ text: ["Hi"], finish: "end_turn", usage: { input: 100, output: 50, cached: 4000, cacheWrite: 1000 } });
    const catalogFile = writeCatalogFile([{ slug: "acme/tiny", name: "Acme Tiny (self-hosted)", endpoints: [{ provider: "ollama", model_id: "tiny", context_length: 8192, pricing: { prompt: "0.000001", completion: "0.000002" } }] }]);
    h = await startHarness({
      env: {
        PORTICO_PROVIDER_OPENAI_BASE_URL: `${openai.url}/v1`,
        PORTICO_PROVIDER_ANTHROPIC_BASE_URL: anthropic.url,
        PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `ollama=${openai.url}/v1`,
        PORTICO_KEYLESS_PROVIDERS: "ollama",
        PORTICO_CATALOG_FILE: catalogFile,
      },
    });
    for (const [provider, key] of [["openai", "sk-test"], ["anthropic", "sk-ant-test"]] as const) {
      const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider, key } });
      expect(res.status, res.text).toBe(200);
    }
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([openai, anthropic].map((f) => f?.close()));
  });

  const messages = [{ role: "user" as const, content: "hi" }];
  const complete = async (model: string) => (await client.chat.completions.create({ model, messages, max_tokens: 100 })).usage as unknown as PricedUsage;
  async function streamed(model: string): Promise<{ usage: PricedUsage; chunks: number; withUsage: number }> {
    const stream = await client.chat.completions.create({ model, messages, max_tokens: 100, stream: true, stream_options: { include_usage: true } });
    let usage: PricedUsage | undefined;
    let chunks = 0;
    let withUsage = 0;
    for await (const chunk of stream) {
      chunks++;
      if (chunk.usage) {
        withUsage++;
        usage = chunk.usage as unknown as PricedUsage;
      }
    }
    return { usage: usage!, chunks, withUsage };
  }

  it("platform-served (the operator's keyless provider priced by the operator catalog file): cost is the price", async () => {
    // 2000 × $1/M (no cache price: cached tokens at the prompt price) + 100 × $2/M.
    const expected = { cost: 0.0022, is_byok: false, cost_details: { upstream_inference_cost: 0.0022, upstream_inference_prompt_cost: 0.002, upstream_inference_completions_cost: 0.0002 } };
    expect(await complete("ollama/tiny")).toMatchObject({ prompt_tokens: 2000, completion_tokens: 100, ...expected });
    const s = await streamed("ollama/tiny");
    expect(s.usage).toMatchObject(expected);
    expect(s.withUsage).toBe(1); // on the final chunk only
    expect(s.chunks).toBeGreaterThan(2);
  });

  it("BYOK-served (OpenAI gpt-4o at list price): the provider's price in cost_details, cost 0, is_byok", async () => {
    // 500 × $2.50/M + 1500 cached × $1.25/M + 100 × $10/M = $0.004125.
    const expected = { cost: 0, is_byok: true, cost_details: { upstream_inference_cost: 0.004125, upstream_inference_prompt_cost: 0.003125, upstream_inference_completions_cost: 0.001 } };
    expect(await complete("openai/gpt-4o")).toMatchObject(expected);
    expect((await streamed("openai/gpt-4o")).usage).toMatchObject(expected);
  });

  it("Anthropic with cache reads and writes: each prompt token billed once at its own price", async () => {
    // 100 × $3/M + 4000 × $0.30/M + 1000 × $3.75/M + 50 × $15/M = $0.006.
    const expected = { prompt_tokens: 5100, is_byok: true, cost_details: { upstream_inference_cost: 0.006, upstream_inference_prompt_cost: 0.00525, upstream_inference_completions_cost: 0.00075 } };
    expect(await complete("anthropic/claude-sonnet-4")).toMatchObject(expected);
    expect((await streamed("anthropic/claude-sonnet-4")).usage).toMatchObject(expected);
  });

  it("over gRPC (grpc-js ChatService): the unary answer and the stream's usage chunk carry the same cost", async () => {
    const struct = (o: Record<string, unknown>): unknown => ({
      fields: Object.fromEntries(
        Object.entries(o).map(([k, v]) => [
          k,
          typeof v === "string" ? { stringValue: v } : Array.isArray(v) ? { listValue: { values: v.map((x) => ({ structValue: struct(x as Record<string, unknown>) })) } } : { numberValue: v },
        ]),
      ),
    });
    /** usage.cost and usage.cost_details.upstream_inference_cost out of a google.protobuf.Struct as proto-loader gives it. */
    const costs = (s: any) => {
      const usage = s?.fields?.usage?.structValue?.fields;
      return usage ? { cost: usage.cost?.numberValue, upstream: usage.cost_details?.structValue?.fields?.upstream_inference_cost?.numberValue } : undefined;
    };
    const chat = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
    const body = struct({ model: "ollama/tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 100 });
    const unary = await new Promise<any>((resolve, reject) =>
      chat.CreateChatCompletion({ body }, bearer(h.tenant.apiKey), (err: Error | null, res: unknown) => (err ? reject(err) : resolve(res))),
    );
    expect(costs(unary.completion)).toEqual({ cost: 0.0022, upstream: 0.0022 });
    const seen: unknown[] = [];
    await new Promise<void>((resolve, reject) => {
      const call = chat.StreamChatCompletion({ body }, bearer(h.tenant.apiKey));
      call.on("data", (m: any) => {
        const c = costs(m.chunk);
        if (c) seen.push(c);
      });
      call.on("end", resolve);
      call.on("error", reject);
    });
    expect(seen).toEqual([{ cost: 0.0022, upstream: 0.0022 }]);
  });

  it("a <provider>/<model> the catalog lacks routes as before, with cost null", async () => {
    const before = openai.requests.length;
    const usage = await complete("openai/gpt-99-unreleased");
    expect(openai.requests.length).toBe(before + 1);
    expect(openai.requests.at(-1)!.body.model).toBe("gpt-99-unreleased");
    expect(usage).toMatchObject({ prompt_tokens: 2000, completion_tokens: 100, cost: null });
    expect(usage.cost_details).toBeUndefined();
    expect((await streamed("openai/gpt-99-unreleased")).usage).toMatchObject({ cost: null });
  });

  it("GET /api/v1/models: the catalog models the key can reach, in the real-world shape, beside the bare entries (openai SDK and gRPC)", async () => {
    const page = await client.models.list();
    const byId = new Map(page.data.map((m) => [m.id, m as unknown as Record<string, unknown>]));
    // An id the catalog does not describe: the same fields, without catalog figures (prices "-1": they depend on the model reached).
    expect(byId.get("openai/*")).toEqual({
      id: "openai/*",
      object: "model",
      created: expect.any(Number),
      owned_by: "openai",
      canonical_slug: "openai/*",
      name: "openai/*",
      context_length: null,
      architecture: { modality: "text->text", input_modalities: ["text"], output_modalities: ["text"] },
      pricing: { prompt: "-1", completion: "-1" },
      supported_parameters: [],
      top_provider: { context_length: null, max_completion_tokens: null, is_moderated: false },
      per_request_limits: null,
      default_parameters: null,
      supported_voices: null,
      links: { details: "" },
    });
    expect(byId.get("openai/gpt-4o")).toEqual({
      id: "openai/gpt-4o",
      object: "model",
      created: expect.any(Number),
      owned_by: "openai",
      canonical_slug: "openai/gpt-4o",
      name: "OpenAI: GPT-4o",
      context_length: 128000,
      architecture: { modality: "text+image+file->text", input_modalities: ["text", "image", "file"], output_modalities: ["text"] },
      pricing: { prompt: "0.0000025", completion: "0.00001", request: "0", image: "0", input_cache_read: "0.00000125" },
      supported_parameters: expect.arrayContaining(["max_tokens", "tools", "response_format"]),
      top_provider: { context_length: 128000, max_completion_tokens: 16384, is_moderated: false },
      per_request_limits: null,
      default_parameters: null,
      supported_voices: null,
      links: { details: "/api/v1/models/openai/gpt-4o/endpoints" },
    });
    // One entry per model, under its canonical slug (not the provider's dated id).
    expect(byId.get("anthropic/claude-sonnet-4")).toMatchObject({
      canonical_slug: "anthropic/claude-sonnet-4",
      owned_by: "anthropic",
      pricing: { prompt: "0.000003", completion: "0.000015", input_cache_read: "0.0000003", input_cache_write: "0.00000375" },
    });
    expect(byId.has("anthropic/claude-sonnet-4-20250514")).toBe(false);
    // The operator file's self-hosted model, on the keyless provider.
    expect(byId.get("acme/tiny")).toMatchObject({ canonical_slug: "acme/tiny", owned_by: "acme", name: "Acme Tiny (self-hosted)", pricing: { prompt: "0.000001" }, top_provider: { max_completion_tokens: null } });
    // No credential for Groq: none of its endpoints, so no model served only by Groq (Llama 3.3 70B also by Together and Fireworks: no key either).
    expect([...byId.keys()].filter((id) => id.startsWith("groq/") || id === "meta-llama/llama-3.3-70b-instruct")).toEqual([]);
    const ids = page.data.map((m) => m.id);
    expect(ids).toEqual([...ids].sort());

    const chat = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
    const res = await new Promise<any>((resolve, reject) => chat.ListModels({}, bearer(h.tenant.apiKey), (err: Error | null, r: unknown) => (err ? reject(err) : resolve(r))));
    const grpcModel = res.models.find((m: any) => m.id === "openai/gpt-4o");
    expect(grpcModel).toMatchObject({ canonical_slug: "openai/gpt-4o", pricing: { prompt: "0.0000025", input_cache_read: "0.00000125" }, supported_parameters: expect.arrayContaining(["tools"]) });
    expect(res.models.length).toBe(page.data.length);
  });
});
