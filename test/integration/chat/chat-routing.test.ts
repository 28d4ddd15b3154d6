/**
 * Routing through the model catalog end to end (docs/routing.md): the `openai` client asks for a canonical
 * slug and the request reaches the provider endpoint the rules pick, with that provider's own model id (three
 * fake OpenAI-compatible upstreams play groq, together and fireworks and record what they receive); `order`,
 * `only`, `sort`, the `:floor` / `:nitro` suffixes; a failing endpoint falls back and is then tried last; a
 * filter that leaves no endpoint is a 400 naming it and nothing reaches any provider; the generation record
 * says which catalog model served, or that the id was uncatalogued; `provider.sort: "latency"` follows the
 * time to first token Portico itself recorded.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { bearer, grpcClient, unary } from "../../helpers/grpc.js";

const LLAMA = "meta-llama/llama-3.3-70b-instruct";
const IDS = { groq: "llama-3.3-70b-versatile", together: "meta-llama/Llama-3.3-70B-Instruct-Turbo", fireworks: "accounts/fireworks/models/llama-v3p3-70b-instruct" } as const;
type Name = keyof typeof IDS;

describe.each(["sqlite", "postgresql"] as const)("routing through the model catalog (%s)", (db) => {
  let h: Harness;
  const fakes = {} as Record<Name, FakeUpstream>;
  let client: OpenAI;

  beforeAll(async () => {
    for (const name of Object.keys(IDS) as Name[]) fakes[name] = await startFakeOpenAI({ text: [name], finish: "stop", usage: { input: 10, output: 20 } });
    h = await startHarness({
      provider: db,
      env: {
        PORTICO_PROVIDER_GROQ_BASE_URL: `${fakes.groq.url}/v1`,
        PORTICO_PROVIDER_TOGETHER_BASE_URL: `${fakes.together.url}/v1`,
        PORTICO_PROVIDER_FIREWORKS_BASE_URL: `${fakes.fireworks.url}/v1`,
        // A failed endpoint's first cool-down is 1 s by default; 30 s here, so that "it goes last" does not depend
        // on how fast a loaded machine sends the next request (the growth itself: test/unit/lib/health-memory.test.ts).
        PORTICO_COOLDOWN_BASE_MS: "30000",
      },
    });
    for (const provider of Object.keys(IDS)) {
      const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider, key: `sk-${provider}` } });
      expect(res.status, res.text).toBe(200);
    }
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all(Object.values(fakes).map((f) => f.close()));
  });
  beforeEach(() => {
    for (const f of Object.values(fakes)) {
      f.requests.length = 0;
      f.knobs = {};
    }
  });

  const messages = [{ role: "user" as const, content: "hi" }];
  const received = () => Object.fromEntries((Object.keys(IDS) as Name[]).map((n) => [n, fakes[n].requests.map((r) => r.body.model)]));
  const create = (body: Record<string, unknown>) => client.chat.completions.create({ messages, ...body } as never) as unknown as Promise<OpenAI.ChatCompletion & { provider: string }>;
  const generation = async (id: string) => {
    const res = await api(h, "GET", `/generation?id=${id}`, { key: h.tenant.apiKey });
    expect(res.status, res.text).toBe(200);
    return (res.json as { data: Record<string, unknown> }).data;
  };

  it("a canonical slug reaches the cheapest endpoint with the provider's own model id (openai client, sort price and :floor)", async () => {
    const res = await create({ model: LLAMA, provider: { sort: "price" } });
    expect(res.provider).toBe("groq");
    expect(res.choices[0]!.message.content).toBe("groq");
    const floor = await create({ model: `${LLAMA}:floor` });
    expect(floor.provider).toBe("groq");
    expect(received()).toEqual({ groq: [IDS.groq, IDS.groq], together: [], fireworks: [] });
    const g = await generation(res.id);
    expect(g).toMatchObject({ requested_model: LLAMA, provider: "groq", catalog_model: LLAMA, uncatalogued: false });
  });

  it("order and only pick the endpoint by provider slug, each with its own model id; streams too", async () => {
    expect((await create({ model: LLAMA, provider: { order: ["fireworks", "together"] } })).provider).toBe("fireworks");
    expect((await create({ model: LLAMA, provider: { only: ["together"] } })).provider).toBe("together");
    const stream = await client.chat.completions.create({ model: LLAMA, messages, stream: true, provider: { order: ["together"] } } as never);
    let text = "";
    for await (const chunk of stream as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe("together");
    expect(received()).toEqual({ groq: [], together: [IDS.together, IDS.together], fireworks: [IDS.fireworks] });
  });

  it("a failing endpoint falls back to the next, and goes last while it is remembered as failing", async () => {
    fakes.groq.knobs = { failStatus: 500 };
    const first = await create({ model: LLAMA, provider: { sort: "price" } });
    expect(first.provider).toBe("together");
    expect(received()).toEqual({ groq: [IDS.groq], together: [IDS.together], fireworks: [] });
    // groq is healthy again, but failed seconds ago: the next request goes to together without trying it.
    fakes.groq.knobs = {};
    const second = await create({ model: LLAMA, provider: { sort: "price" } });
    expect(second.provider).toBe("together");
    expect(received().groq).toHaveLength(1);
    expect((await generation(first.id)).attempts).toBe(2);
  });

  it.each([
    ["provider.zdr", { zdr: true }],
    ["provider.quantizations", { quantizations: ["int4"] }],
    ["provider.max_price.prompt", { max_price: { prompt: "0.5" } }],
    ["provider.only", { only: ["openai"] }],
    ["provider.enforce_distillable_text", { enforce_distillable_text: true }],
    ["provider.require_parameters", { require_parameters: true, only: ["groq"] }],
  ])("a filter that leaves no endpoint is a 400 naming it (%s), and nothing reaches a provider", async (field, provider) => {
    const res = await api(h, "POST", "/chat/completions", {
      key: h.tenant.apiKey,
      body: { model: LLAMA, messages, provider, ...(field === "provider.require_parameters" ? { logprobs: true } : {}) },
    });
    expect(res.status, res.text).toBe(400);
    const err = (res.json as { error: { code: number; message: string; metadata?: { field?: string } } }).error;
    expect(err.metadata?.field).toBe(field);
    expect(err.message).toContain(field);
    expect(received()).toEqual({ groq: [], together: [], fireworks: [] });
  });

  it("what cannot be honoured is refused with a 400 naming it: sort exacto, max_price.audio", async () => {
    for (const [provider, field] of [[{ sort: "exacto" }, "provider.sort"], [{ max_price: { audio: "1" } }, "provider.max_price.audio"]] as const) {
      const res = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: LLAMA, messages, provider } });
      expect(res.status, res.text).toBe(400);
      expect((res.json as { error: { metadata?: { field?: string } } }).error.metadata?.field).toBe(field);
    }
  });

  it("an id the catalog lacks still goes to its provider as named, and the generation says uncatalogued", async () => {
    const res = await create({ model: "groq/brand-new-model" });
    expect(res.provider).toBe("groq");
    expect(received().groq).toEqual(["brand-new-model"]);
    expect(await generation(res.id)).toMatchObject({ catalog_model: null, uncatalogued: true });
    // gRPC reads the same record.
    const generations = grpcClient("portico/generations/v1/generations_service.proto", "portico.generations.v1.GenerationsService", h.coreUrl);
    const read = async (id: string) => {
      const { response, error } = await unary(generations, "GetGeneration", { id }, bearer(h.tenant.apiKey));
      expect(error).toBeFalsy();
      return response.generation;
    };
    const g = await read(res.id);
    expect(g.uncatalogued).toBe(true);
    expect(g.catalog_model ?? null).toBeNull();
    // A <provider>/<provider model id> the catalog knows is catalogued, and goes to that provider only.
    const direct = await create({ model: `together/${IDS.together}` });
    expect(direct.provider).toBe("together");
    expect(await generation(direct.id)).toMatchObject({ catalog_model: LLAMA, uncatalogued: false });
    expect(await read(direct.id)).toMatchObject({ uncatalogued: false, catalog_model: LLAMA });
  });

  it("sort latency (and :nitro, throughput) follow what Portico recorded per endpoint", async () => {
    // A slow first byte on fireworks, none on together; two streamed samples each.
    fakes.fireworks.knobs = { headerDelayMs: 300 };
    const ids: Record<string, string[]> = { together: [], fireworks: [] };
    for (const provider of ["together", "fireworks", "together", "fireworks"]) {
      const stream = await client.chat.completions.create({ model: LLAMA, messages, stream: true, provider: { only: [provider] } } as never);
      for await (const chunk of stream as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>) ids[provider]!.push(chunk.id);
    }
    // What the records say (the figures routing reads are the same samples, kept in memory).
    const ttft = async (provider: string) => {
      const values = await Promise.all([...new Set(ids[provider])].map(async (id) => Number((await generation(id)).time_to_first_token_ms)));
      return values.sort((a, b) => a - b)[0]!;
    };
    const [together, fireworks] = [await ttft("together"), await ttft("fireworks")];
    const faster = together <= fireworks ? "together" : "fireworks";
    fakes.fireworks.knobs = {};
    const res = await create({ model: LLAMA, provider: { sort: "latency", ignore: ["groq"] } });
    expect(res.provider).toBe(faster);
    // groq has no figures: it ranks last for latency even though it is the cheapest.
    const all = await create({ model: LLAMA, provider: { sort: "latency" } });
    expect(all.provider).not.toBe("groq");
    const nitro = await create({ model: `${LLAMA}:nitro` });
    expect(nitro.provider).not.toBe("groq");
  });

  it("zdr: true reaches a provider whose BYOK credential is declared zero-data-retention, with that credential only", async () => {
    const created = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "together", key: "sk-together-zdr", declared_zdr: true } });
    expect(created.status, created.text).toBe(200);
    try {
      const res = await create({ model: LLAMA, provider: { zdr: true } });
      expect(res.provider).toBe("together");
      expect(received()).toEqual({ groq: [], together: [IDS.together], fireworks: [] });
      expect(fakes.together.requests[0]!.headers.authorization).toBe("Bearer sk-together-zdr");
    } finally {
      const id = (created.json as { data: { id: string } }).data.id;
      expect((await api(h, "DELETE", `/byok/${id}`, { key: h.tenant.managementKey })).status).toBe(200);
    }
  });
});
