/**
 * `POST /api/v1/embeddings` (docs/dialects.md, "Embeddings") with the `openai` client against fake providers on
 * loopback in their own wire formats: an OpenAI-compatible `/embeddings` (floats and base64, token-id inputs,
 * `dimensions`, `user`), Gemini's `embedContent` / `batchEmbedContents` (token counts estimated with the o200k
 * tokenizer, token ids refused); the cost on the answer and on the generation record (BYOK and platform-paid);
 * a key's spend limit (402 before anything is sent; spend settled at the generations' cost); refusals naming
 * the field; provider errors in the envelope; and the gRPC EmbeddingsService the gateway translates to.
 * SQLite and PostgreSQL.
 */
import OpenAI from "openai";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EmbeddingsService } from "../../../src/gen/portico/embeddings/v1/embeddings_service_pb.js";
import { keyCounterId } from "../../../src/core/spend/spend-store.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import { startFakeGemini } from "../../helpers/fake-upstreams/gemini.js";
import { fakeVector, type FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";
import { writeCatalogFile } from "../../helpers/catalog-file.js";

const FEMTO = 1e15;

describe.each(["sqlite", "postgresql"] as const)("embeddings (%s)", (provider) => {
  let h: Harness;
  let openai: FakeUpstream;
  let gemini: FakeUpstream;
  let local: FakeUpstream;
  let client: OpenAI;

  beforeAll(async () => {
    openai = await startFakeOpenAI({ text: [], finish: "stop", usage: { input: 7, output: 0 } });
    gemini = await startFakeGemini();
    local = await startFakeOpenAI({ text: [], finish: "stop", usage: { input: 1000, output: 0 } });
    // A platform-paid (keyless) embedding model with a price, for the spend limit.
    const catalogFile = writeCatalogFile([
      {
        slug: "acme/embed",
        name: "Acme Embed",
        architecture: { input_modalities: ["text"], output_modalities: ["embeddings"] },
        supported_parameters: ["dimensions"],
        endpoints: [{ provider: "ollama", model_id: "embed", context_length: 8192, pricing: { prompt: "0.000001", completion: "0" } }],
      },
    ]);
    h = await startHarness({
      provider,
      env: {
        PORTICO_PROVIDER_OPENAI_BASE_URL: `${openai.url}/v1`,
        PORTICO_PROVIDER_GOOGLE_AI_STUDIO_BASE_URL: `${gemini.url}/v1beta`,
        PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `ollama=${local.url}/v1`,
        PORTICO_KEYLESS_PROVIDERS: "ollama",
        PORTICO_CATALOG_FILE: catalogFile,
      },
    });
    for (const [p, key] of [["openai", "sk-openai-embed-test"], ["google-ai-studio", "goog-embed-test"], ["anthropic", "sk-ant-embed-test"]] as const) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: p, key } })).status).toBe(200);
    }
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([openai?.close(), gemini?.close(), local?.close()]);
  });

  const generation = (id: string) =>
    waitFor(`generation ${id}`, async () => {
      const r = await api(h, "GET", `/generation?id=${id}`, { key: h.tenant.apiKey });
      return r.status === 200 ? r.json.data : undefined;
    });

  it("openai client, floats: vectors in input order, the upstream body, the cost (BYOK) on the answer and the generation", async () => {
    const res = await client.embeddings.create({ model: "openai/text-embedding-3-small", input: ["alpha", "beta"], encoding_format: "float", dimensions: 3, user: "u-1" });
    expect(res.object).toBe("list");
    expect(res.model).toBe("openai/text-embedding-3-small");
    expect(res.data).toEqual([
      { object: "embedding", index: 0, embedding: fakeVector(0, 3) },
      { object: "embedding", index: 1, embedding: fakeVector(1, 3) },
    ]);
    const up = openai.requests.at(-1)!;
    expect(up.url).toBe("/v1/embeddings");
    expect(up.headers.authorization).toBe("Bearer sk-openai-embed-test");
    expect(up.body).toEqual({ model: "text-embedding-3-small", input: ["alpha", "beta"], dimensions: 3, user: "u-1", encoding_format: "float" });
    // 7 tokens × $0.02 per million, paid by the workspace's own OpenAI key.
    const usage = res.usage as any;
    expect(usage).toMatchObject({ prompt_tokens: 7, total_tokens: 7, cost: 0, is_byok: true });
    expect(usage.cost_details.upstream_inference_cost).toBeCloseTo(7 * 0.02e-6, 15);
    const id = (res as any).id as string;
    expect((res as any).provider).toBe("openai");
    const gen = await generation(id);
    expect(gen).toMatchObject({ id, provider: "openai", model: "openai/text-embedding-3-small", prompt_tokens: 7, completion_tokens: 0, total_cost: 0, streamed: false, status: "success" });
    expect(gen.upstream_inference_cost).toBeCloseTo(7 * 0.02e-6, 15);
  });

  it("openai client, base64 (its default): Portico asks floats upstream and encodes little-endian float32, which the client decodes", async () => {
    const res = await client.embeddings.create({ model: "openai/text-embedding-3-large", input: "one text" });
    expect(openai.requests.at(-1)!.body).toMatchObject({ model: "text-embedding-3-large", input: "one text", encoding_format: "float" });
    expect(res.data).toEqual([{ object: "embedding", index: 0, embedding: fakeVector(0) }]);
    const raw = await api(h, "POST", "/embeddings", { key: h.tenant.apiKey, body: { model: "openai/text-embedding-3-large", input: [[1, 2, 3], [4]], encoding_format: "base64" } });
    expect(raw.status, raw.text).toBe(200);
    expect(openai.requests.at(-1)!.body.input).toEqual([[1, 2, 3], [4]]);
    // A model the catalog does not know is relayed uncatalogued: no price, cost null.
    const unknown = await api(h, "POST", "/embeddings", { key: h.tenant.apiKey, body: { model: "openai/text-embedding-4-preview", input: "x", encoding_format: "float" } });
    expect(unknown.status, unknown.text).toBe(200);
    expect(openai.requests.at(-1)!.body.model).toBe("text-embedding-4-preview");
    expect(unknown.json.usage).toEqual({ prompt_tokens: 7, total_tokens: 7, cost: null });
    const b64 = raw.json.data.map((d: { embedding: string }) => d.embedding);
    expect(b64.every((e: unknown) => typeof e === "string")).toBe(true);
    const decoded = b64.map((e: string) => {
      const buf = Buffer.from(e, "base64");
      return Array.from({ length: buf.length / 4 }, (_, i) => buf.readFloatLE(i * 4));
    });
    expect(decoded).toEqual([fakeVector(0), fakeVector(1)]);
  });

  it("Gemini: embedContent for one text, batchEmbedContents for several; dimensions as outputDimensionality; tokens estimated (o200k); token ids refused", async () => {
    const one = await client.embeddings.create({ model: "google/gemini-embedding-001", input: "the quick brown fox", encoding_format: "float", dimensions: 2 });
    let up = gemini.requests.at(-1)!;
    expect(up.url).toBe("/v1beta/models/gemini-embedding-001:embedContent");
    expect(up.headers["x-goog-api-key"]).toBe("goog-embed-test");
    expect(up.body).toEqual({ content: { parts: [{ text: "the quick brown fox" }] }, outputDimensionality: 2 });
    expect(one.data).toEqual([{ object: "embedding", index: 0, embedding: fakeVector(0, 2) }]);
    const tokens = countTokens("the quick brown fox");
    expect(one.usage).toMatchObject({ prompt_tokens: tokens, total_tokens: tokens, cost: 0, is_byok: true });

    const texts = ["first", "second text", "third"];
    const many = await client.embeddings.create({ model: "google-ai-studio/gemini-embedding-001", input: texts });
    up = gemini.requests.at(-1)!;
    expect(up.url).toBe("/v1beta/models/gemini-embedding-001:batchEmbedContents");
    expect(up.body).toEqual({ requests: texts.map((text) => ({ model: "models/gemini-embedding-001", content: { parts: [{ text }] } })) });
    expect(many.data.map((d) => d.embedding)).toEqual([fakeVector(0), fakeVector(1), fakeVector(2)]);
    const total = texts.reduce((n, t) => n + countTokens(t), 0);
    expect((many.usage as any).cost_details.upstream_inference_cost).toBeCloseTo(total * 0.15e-6, 15);
    const gen = await generation((many as any).id);
    expect(gen).toMatchObject({ provider: "google-ai-studio", prompt_tokens: total, status: "success" });

    // More texts than one batchEmbedContents call takes: several calls, in order.
    const batchStart = gemini.requests.length;
    const lots = Array.from({ length: 230 }, (_, i) => `text ${i}`);
    const big = await client.embeddings.create({ model: "google/gemini-embedding-001", input: lots, encoding_format: "float" });
    expect(gemini.requests.slice(batchStart).map((r) => r.body.requests.length)).toEqual([100, 100, 30]);
    expect(gemini.requests[batchStart + 2]!.body.requests[0].content).toEqual({ parts: [{ text: "text 200" }] });
    expect(big.data.map((d) => d.index)).toEqual(lots.map((_, i) => i));
    expect(big.data.map((d) => d.embedding)).toEqual(lots.map((_, i) => fakeVector(i % 100)));
    expect(big.usage.prompt_tokens).toBe(lots.reduce((n, t) => n + countTokens(t), 0));

    const before = gemini.requests.length;
    const ids = await api(h, "POST", "/embeddings", { key: h.tenant.apiKey, body: { model: "google/gemini-embedding-001", input: [1, 2, 3] } });
    expect(ids.status).toBe(400);
    expect(ids.json.error.metadata.field).toBe("input");
    expect(gemini.requests.length).toBe(before);
  });

  it("refuses bad bodies with 400 naming the field, before any provider is called", async () => {
    const before = openai.requests.length;
    const cases: Array<[unknown, string]> = [
      [{ model: "openai/text-embedding-3-small", input: "x", task_type: "RETRIEVAL_QUERY" }, "task_type"],
      [{ model: "openai/text-embedding-3-small" }, "input"],
      [{ input: "x" }, "model"],
      [{ model: "openai/text-embedding-3-small", input: [] }, "input"],
      [{ model: "openai/text-embedding-3-small", input: "x", encoding_format: "int8" }, "encoding_format"],
      [{ model: "openai/text-embedding-3-small", input: "x", dimensions: 0 }, "dimensions"],
      [{ model: "openai/text-embedding-ada-002", input: "x", dimensions: 256 }, "dimensions"],
      [{ model: "openai/gpt-4o-mini", input: "x" }, "model"],
      [{ model: "anthropic/claude-sonnet-4", input: "x" }, "model"],
      [{ model: "@preset/anything", input: "x" }, "model"],
    ];
    for (const [body, field] of cases) {
      const res = await api(h, "POST", "/embeddings", { key: h.tenant.apiKey, body });
      expect(res.status, res.text).toBe(400);
      expect(res.json.error.metadata.field, res.text).toBe(field);
      expect(res.json.error.message).toContain(field);
    }
    await expect(client.embeddings.create({ model: "openai/text-embedding-3-small", input: "x", extra: 1 } as any)).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    expect(openai.requests.length).toBe(before);
    const anonymous = await api(h, "POST", "/embeddings", { body: { model: "openai/text-embedding-3-small", input: "x" } });
    expect(anonymous.status).toBe(401);
  });

  it("a provider's error comes back in the envelope, and the generation records it", async () => {
    openai.knobs = { failStatus: 400, failMessage: "This model's maximum context length is 8192 tokens" };
    try {
      const res = await api(h, "POST", "/embeddings", { key: h.tenant.apiKey, body: { model: "openai/text-embedding-3-small", input: "too long" } });
      expect(res.status).toBe(502);
      expect(res.json.error.code).toBe(502);
      expect(res.json.error.message).toContain("maximum context length is 8192 tokens");
      expect(res.text).not.toContain("sk-openai-embed-test");
      await expect(client.embeddings.create({ model: "openai/text-embedding-3-small", input: "x" })).rejects.toBeInstanceOf(OpenAI.APIError);
    } finally {
      openai.knobs = {};
    }
  });

  it("a key's spend limit: reserved before the call (402 when it does not fit), settled at the generations' cost", async () => {
    const created = await api(h, "POST", "/keys", { key: h.tenant.managementKey, body: { name: "embed-limited", limit: 0.003 } });
    expect(created.status, created.text).toBe(201);
    const key = created.json.key as string;
    const hash = created.json.data.hash as string;
    const limited = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: key, maxRetries: 0 });
    // 1,000 tokens × $1 per million = $0.001, platform-paid (keyless endpoint).
    const ok = await limited.embeddings.create({ model: "ollama/embed", input: "short", encoding_format: "float" });
    expect(ok.usage).toMatchObject({ prompt_tokens: 1000, cost: 0.001, is_byok: false });
    expect(local.requests.at(-1)!.body).toEqual({ model: "embed", input: "short", encoding_format: "float" });
    // A body whose bytes could cost more than what is left is refused before anything is sent.
    const before = local.requests.length;
    const big = "word ".repeat(600);
    const refused = await api(h, "POST", "/embeddings", { key, body: { model: "acme/embed", input: [big] } });
    expect(refused.status, refused.text).toBe(402);
    expect(refused.json.error.metadata.reason).toBe("spend_limit_exceeded");
    await expect(limited.embeddings.create({ model: "acme/embed", input: big })).rejects.toMatchObject({ status: 402 });
    expect(local.requests.length).toBe(before);
    const gens = await waitFor("the key's generations", async () => {
      const list = await h.database.db.generation.findMany({ where: { keyHash: hash } });
      return list.length >= 3 ? list : undefined;
    });
    const spent = gens.reduce((s, g) => s + (g.costFemtoUsd ?? 0n), 0n);
    expect(spent).toBe(BigInt(0.001 * FEMTO));
    const keyId = (await h.database.db.apiKey.findUnique({ where: { hash } }))!.id;
    const counter = await h.database.db.spendCounter.findUnique({ where: { id: keyCounterId(keyId) } });
    expect(counter?.spentFemtoUsd).toBe(spent);
    expect(counter?.reservedFemtoUsd).toBe(0n);
  });

  it("gRPC: EmbeddingsService.CreateEmbeddings answers the same object", async () => {
    const grpc = createClient(EmbeddingsService, createGrpcTransport({ baseUrl: h.coreUrl }));
    const res = await grpc.createEmbeddings(
      { body: { model: "openai/text-embedding-3-small", input: ["g"], encoding_format: "float" } },
      { headers: { authorization: `Bearer ${h.tenant.apiKey}` } },
    );
    expect(res.provider).toBe("openai");
    const json = JSON.parse(res.responseJson);
    expect(json).toMatchObject({ object: "list", id: res.id, data: [{ object: "embedding", index: 0, embedding: fakeVector(0) }], usage: { prompt_tokens: 7 } });
    await expect(grpc.createEmbeddings({ body: { model: "openai/text-embedding-3-small", input: "x", nope: true } }, { headers: { authorization: `Bearer ${h.tenant.apiKey}` } })).rejects.toThrow(/nope/);
  });
});
