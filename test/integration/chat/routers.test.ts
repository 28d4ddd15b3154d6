/**
 * The router plugins (docs/plugins.md: auto-router, auto-beta-router, pareto-router) end to end with the
 * `openai` client against the fake OpenAI upstream: the chosen model is the one called upstream, the answer
 * and the generation name it, the report says why; `<vendor>/*` patterns; an empty candidate set is a 400
 * naming `plugins[i].allowed_models` with nothing sent upstream. The caller has an OpenAI key only, so the
 * candidates are the catalog's OpenAI-served models (docs/plugins.md, "The quality table").
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";
import { bearer, grpcClient } from "../../helpers/grpc.js";

/** google.protobuf.Struct as proto-loader represents it. */
const value = (v: unknown): unknown =>
  typeof v === "string" ? { stringValue: v }
  : typeof v === "number" ? { numberValue: v }
  : typeof v === "boolean" ? { boolValue: v }
  : Array.isArray(v) ? { listValue: { values: v.map(value) } }
  : { structValue: struct(v as Record<string, unknown>) };
const struct = (o: Record<string, unknown>) => ({ fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, value(v)])) });

describe("router plugins (sqlite)", () => {
  let h: Harness;
  let upstream: FakeUpstream;
  let client: OpenAI;

  beforeAll(async () => {
    upstream = await startFakeOpenAI();
    h = await startHarness({ provider: "sqlite", env: { PORTICO_PROVIDER_OPENAI_BASE_URL: `${upstream.url}/v1` } });
    const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "openai", key: "sk-test" } });
    expect(res.status, res.text).toBe(200);
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await upstream?.close();
  });

  const messages = [{ role: "user" as const, content: "hi" }];
  type Report = { id: string; chosen?: string; candidates?: Array<{ model: string; score: number; price: number }>; [k: string]: unknown };
  const generation = (id: string) =>
    waitFor(`generation ${id}`, async () => {
      const got = await api(h, "GET", `/generation?id=${id}`, { key: h.tenant.apiKey });
      return got.status === 200 ? (got.json.data as { model: string; plugins: Report[] }) : undefined;
    });
  const create = (body: Record<string, unknown>) => client.chat.completions.create({ model: "openai/gpt-4o", messages, ...body } as never) as unknown as Promise<OpenAI.ChatCompletion & { plugins?: Report[] }>;

  it("auto-router, tradeoff 0: the best-rated OpenAI model is called upstream, named in the answer and the generation", async () => {
    const res = await create({ plugins: [{ id: "auto-router", allowed_models: ["openai/*"], cost_quality_tradeoff: 0 }] });
    // gpt-5 and o3 share the top tier (0.9); gpt-5 is cheaper by the weighted price
    expect(upstream.requests.at(-1)!.body.model).toBe("gpt-5");
    expect(upstream.requests.at(-1)!.body.plugins).toBeUndefined();
    expect(res.model).toContain("gpt-5");
    const report = res.plugins!.find((p) => p.id === "auto-router")!;
    expect(report.chosen).toBe("openai/gpt-5");
    expect(report.cost_quality_tradeoff).toBe(0);
    expect(report.candidates![0]).toMatchObject({ model: "openai/gpt-5", score: 0.9 });
    expect(report.candidates!.every((c) => c.model.startsWith("openai/"))).toBe(true);
    const gen = await generation(res.id);
    expect(gen.model).toContain("gpt-5");
    expect(gen.plugins.find((p) => p.id === "auto-router")!.chosen).toBe("openai/gpt-5");
  });

  it("auto-router, tradeoff 10 (cheapest), streaming: the cheapest model streams", async () => {
    const stream = await client.chat.completions.create({ model: "openai/gpt-4o", messages, stream: true, plugins: [{ id: "auto-router", cost_quality_tradeoff: 10 }] } as never);
    let model = "";
    let reports: Report[] | undefined;
    for await (const chunk of stream as unknown as AsyncIterable<OpenAI.ChatCompletionChunk & { plugins?: Report[] }>) {
      model ||= chunk.model;
      reports ??= chunk.plugins;
    }
    expect(upstream.requests.at(-1)!.body.model).toBe("gpt-5-nano");
    expect(model).toContain("gpt-5-nano");
    expect(reports?.find((p) => p.id === "auto-router")?.chosen).toBe("openai/gpt-5-nano");
  });

  it("the `<brand>/auto` model runs auto-router with its defaults", async () => {
    const res = await create({ model: "service/auto" });
    const report = res.plugins!.find((p) => p.id === "auto-router")!;
    expect(report.trigger).toBe("service/auto");
    expect(report.cost_quality_tradeoff).toBe(7);
    expect(upstream.requests.at(-1)!.body.model).toBe(report.chosen!.replace(/^openai\//, ""));
  });

  it("an allowed_models list no routable model matches is 400 naming plugins[0].allowed_models; nothing sent upstream", async () => {
    const before = upstream.requests.length;
    const err = await create({ plugins: [{ id: "auto-router", allowed_models: ["anthropic/*"] }] }).then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    expect(err?.status).toBe(400);
    expect((err?.error as { metadata?: { field?: string } }).metadata?.field).toBe("plugins[0].allowed_models");
    expect(upstream.requests.length).toBe(before);
  });

  it("exact slugs narrow the choice; excluded_models removes; a second router is refused", async () => {
    const res = await create({ plugins: [{ id: "auto-router", allowed_models: ["openai/gpt-4o", "openai/gpt-4o-mini", "openai/gpt-4.1*"], excluded_models: ["openai/gpt-4.1"], cost_quality_tradeoff: 0 }] });
    const report = res.plugins!.find((p) => p.id === "auto-router")!;
    expect(report.candidates!.map((c) => c.model).sort()).toEqual(["openai/gpt-4.1-mini", "openai/gpt-4.1-nano", "openai/gpt-4o", "openai/gpt-4o-mini"]);
    expect(upstream.requests.at(-1)!.body.model).toBe("gpt-4o");
    const err = await create({ plugins: [{ id: "auto-router" }, { id: "pareto-router" }] }).then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    expect(err?.status).toBe(400);
    expect((err?.error as { metadata?: { field?: string } }).metadata?.field).toBe("plugins[1].id");
  });

  it("auto-beta-router: a coding request with tradeoff 0 gets the cheapest of the best coders", async () => {
    const res = await create({ messages: [{ role: "user", content: "Fix this:\n```js\nconst x = ;\n```" }], plugins: [{ id: "auto-beta-router", cost_quality_tradeoff: 0 }] });
    const report = res.plugins!.find((p) => p.id === "auto-beta-router")!;
    expect(report.task).toBe("coding");
    expect(report.chosen).toBe("openai/o4-mini");
    expect(upstream.requests.at(-1)!.body.model).toBe("o4-mini");
    expect((await generation(res.id)).model).toContain("o4-mini");
  });

  it("pareto-router: the cheapest model of the asked coding tier, by prompt price", async () => {
    for (const [min, want] of [[undefined, "o4-mini"], [0.5, "gpt-4o-mini"], [0.1, "gpt-5-nano"]] as const) {
      const res = await create({ plugins: [{ id: "pareto-router", ...(min === undefined ? {} : { min_coding_score: min }) }] });
      expect(upstream.requests.at(-1)!.body.model, String(min)).toBe(want);
      expect(res.plugins!.find((p) => p.id === "pareto-router")!.chosen).toBe(`openai/${want}`);
    }
    const err = await create({ plugins: [{ id: "pareto-router", max_price: 0.01 }] }).then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    expect(err?.status).toBe(400);
    expect((err?.error as { metadata?: { field?: string } }).metadata?.field).toBe("plugins[0].max_price");
  });

  it("from a preset; with `models` it is refused naming models", async () => {
    const created = await api(h, "POST", "/presets/cheap-coder/chat/completions", {
      key: h.tenant.managementKey,
      body: { model: "openai/gpt-4o", messages, plugins: [{ id: "pareto-router", min_coding_score: 0.1 }] },
    });
    expect(created.status, created.text).toBe(200);
    const res = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "@preset/cheap-coder", messages } });
    expect(res.status, res.text).toBe(200);
    expect(upstream.requests.at(-1)!.body.model).toBe("gpt-5-nano");
    expect(res.json.plugins[0]).toMatchObject({ id: "pareto-router", chosen: "openai/gpt-5-nano", tier: "low" });
    const refused = await create({ models: ["openai/gpt-4o-mini"], plugins: [{ id: "auto-router" }] }).then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    expect(refused?.status).toBe(400);
    expect((refused?.error as { metadata?: { field?: string } }).metadata?.field).toBe("models");
    const pinned = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "openai/gpt-4o", messages, plugins: [{ id: "auto-router", pin_model: true }] } });
    expect(pinned.status).toBe(400);
    expect(pinned.json.error.metadata.field).toBe("plugins[0].pin_model");
  });

  it("the Messages and Responses dialects route the same way (recorded on the generation)", async () => {
    const plugins = [{ id: "auto-router", allowed_models: ["openai/*"], cost_tier: "low" }];
    const msg = await api(h, "POST", "/messages", { key: h.tenant.apiKey, body: { model: "openai/gpt-4o", max_tokens: 50, messages: [{ role: "user", content: "hi" }], plugins } });
    expect(msg.status, msg.text).toBe(200);
    expect(upstream.requests.at(-1)!.body.model).toBe("gpt-5-nano");
    const resp = await api(h, "POST", "/responses", { key: h.tenant.apiKey, body: { model: "openai/gpt-4o", input: "hi", plugins } });
    expect(resp.status, resp.text).toBe(200);
    expect(upstream.requests.at(-1)!.body.model).toBe("gpt-5-nano");
  });

  it("over gRPC: the same choice, and a refusal is INVALID_ARGUMENT naming the field", async () => {
    const chat = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
    const call = (plugins: unknown[]) =>
      new Promise<{ err: any; res: any }>((resolve) => chat.CreateChatCompletion({ body: struct({ model: "openai/gpt-4o", messages, plugins }) }, bearer(h.tenant.apiKey), (err: unknown, res: unknown) => resolve({ err, res })));
    const ok = await call([{ id: "pareto-router", min_coding_score: 0.5 }]);
    expect(ok.err).toBeNull();
    expect(upstream.requests.at(-1)!.body.model).toBe("gpt-4o-mini");
    const refused = await call([{ id: "auto-router", allowed_models: ["nobody/*"] }]);
    expect(refused.err?.code).toBe(3);
    expect(String(refused.err?.details)).toContain("plugins[0].allowed_models");
  });

  it("the quality table is served by the catalog API, and an override changes the choice at once", async () => {
    const got = await api(h, "GET", "/catalog/models/openai/gpt-4o-mini", { key: h.tenant.managementKey });
    expect(got.status, got.text).toBe(200);
    expect(got.json.data).toMatchObject({ quality: 0.5, coding_score: 0.5 });
    expect(got.json.data.ratings_source).toContain("not a benchmark");
    const { overridden: _o, ...model } = got.json.data;
    const put = await api(h, "PUT", "/catalog/models/openai/gpt-4o-mini", { key: h.tenant.managementKey, body: { ...model, quality: 1, ratings_source: "our evaluation, 2026-11" } });
    expect(put.status, put.text).toBe(200);
    // (the last test of the file: the override stays)
    const res = await create({ plugins: [{ id: "auto-router", allowed_models: ["openai/*"], cost_quality_tradeoff: 0 }] });
    expect(upstream.requests.at(-1)!.body.model).toBe("gpt-4o-mini");
    const report = res.plugins!.find((p) => p.id === "auto-router")!;
    expect(report.candidates![0]).toMatchObject({ model: "openai/gpt-4o-mini", score: 1 });
  });
});
