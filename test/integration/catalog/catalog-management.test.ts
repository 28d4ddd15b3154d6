/**
 * Changing the model catalog while it serves (docs/catalog.md): the management API adds a model, changes,
 * disables and removes endpoints, removes a model, each audited and refused with a 400 naming the field when a
 * rule of the catalog file is broken. The instance that took the change serves it at once (its `/models`,
 * its endpoints list, the price on the next answer); a second instance on the same database and Redis serves
 * it through the invalidation bus (its own re-read is set to 10 minutes, so only the bus can explain it); a
 * third one whose bus never hears (another Redis prefix) serves it after its one-second re-read.
 * `/models` and `/models/{author}/{slug}/endpoints` are read with the `openai` client and `@openrouter/sdk`,
 * and over gRPC. SQLite and PostgreSQL.
 */
import { randomUUID } from "node:crypto";
import OpenAI from "openai";
import { OpenRouter } from "@openrouter/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { bearer, grpcClient } from "../../helpers/grpc.js";
import { errorDetailOf } from "../../../src/lib/service-error.js";
import { waitFor } from "../../helpers/wait.js";

const REDIS_URL = process.env.PORTICO_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const LLAMA = "meta-llama/llama-3.3-70b-instruct";

/** A JSON value in proto-loader's google.protobuf.Value form. */
function toValue(v: unknown): Record<string, unknown> {
  if (v === null) return { nullValue: "NULL_VALUE" };
  if (typeof v === "number") return { numberValue: v };
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } };
  return { structValue: toStruct(v as Record<string, unknown>) };
}
function toStruct(o: Record<string, unknown>): Record<string, unknown> {
  return { fields: Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined).map(([k, v]) => [k, toValue(v)])) };
}

const tiny = {
  name: "Acme Tiny (self-hosted)",
  description: "A small model on our own vLLM",
  architecture: { input_modalities: ["text"], output_modalities: ["text"], tokenizer: "Llama3" },
  supported_parameters: ["max_tokens", "temperature"],
  endpoints: [
    { provider: "ollama", model_id: "tiny", context_length: 8192, max_completion_tokens: 2048, pricing: { prompt: "0.000001", completion: "0.000002" }, quantization: "fp8", zdr: true, data_policy: { training: false, retains_prompts: false } },
  ],
};

describe.each(["sqlite", "postgresql"] as const)("catalog management (%s)", (provider) => {
  let a: Harness;
  let b: Harness;
  let c: Harness;
  let up: FakeUpstream;

  beforeAll(async () => {
    // 1000 prompt tokens, 100 completion tokens per answer.
    up = await startFakeOpenAI({ text: ["Hi"], finish: "stop", usage: { input: 1000, output: 100 } });
    const prefix = `test-${randomUUID()}:`;
    const env = {
      REDIS_URL,
      PORTICO_REDIS_PREFIX: prefix,
      PORTICO_CATALOG_REFRESH_MS: "600000",
      PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `ollama=${up.url}/v1`,
      PORTICO_KEYLESS_PROVIDERS: "ollama",
      PORTICO_PROVIDER_GROQ_BASE_URL: `${up.url}/v1`,
    };
    a = await startHarness({ provider, env });
    b = await startHarness({ sameDatabaseAs: a, env });
    c = await startHarness({ sameDatabaseAs: a, env: { ...env, PORTICO_REDIS_PREFIX: `test-${randomUUID()}:`, PORTICO_CATALOG_REFRESH_MS: "1000" } });
    const res = await api(a, "POST", "/byok", { key: a.tenant.managementKey, body: { provider: "groq", key: "gsk-test" } });
    expect(res.status, res.text).toBe(200);
  });
  afterAll(async () => {
    for (const h of [c, b, a]) await h?.close();
    await up?.close();
  });

  const models = async (h: Harness) => {
    const client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
    const page = await client.models.list();
    return new Map(page.data.map((m) => [m.id, m as unknown as Record<string, any>]));
  };
  const endpoints = async (h: Harness, slug: string) => api(h, "GET", `/models/${slug}/endpoints`, { key: h.tenant.apiKey });
  const mgmt = (h: Harness, method: string, path: string, body?: unknown) => api(h, method, `/catalog/models/${path}`, { key: h.tenant.managementKey, body });

  it("refuses a change that breaks a rule of the catalog file with 400 naming the field, and keys that are not management keys with 403", async () => {
    const cases: Array<[string, string, unknown, string]> = [
      ["PUT", "acme/bad", { ...tiny, endpoints: [{ ...tiny.endpoints[0], pricing: { prompt: 3e-6, completion: "0" } }] }, "endpoints[0].pricing.prompt"],
      ["PUT", "acme/bad", { ...tiny, endpoints: [{ ...tiny.endpoints[0], provider: "nowhere" }] }, "endpoints[0].provider"],
      ["PUT", "acme/bad", { ...tiny, name: undefined }, "name"],
      ["PUT", "acme/bad", { ...tiny, endpoints: [] }, "endpoints"],
      ["PUT", "acme/bad", { ...tiny, endpoints: [{ ...tiny.endpoints[0], model_id: undefined }] }, "endpoints[0].model_id"],
      ["PUT", "acme/bad", { ...tiny, colour: "red" }, "colour"],
      ["PUT", "acme/bad", { ...tiny, endpoints: [{ ...tiny.endpoints[0], quantization: "int3" }] }, "endpoints[0].quantization"],
      // Another model already owns Groq's id: a price would be a guess.
      ["PUT", "acme/bad", { ...tiny, endpoints: [{ provider: "groq", model_id: "llama-3.3-70b-versatile", context_length: 1000, pricing: { prompt: "0", completion: "0" } }] }, "model_id"],
      ["PATCH", `${LLAMA}/endpoints/groq`, { status: "paused" }, "status"],
      ["PATCH", `${LLAMA}/endpoints/groq`, { provider: "together" }, "provider"],
      ["PATCH", `${LLAMA}/endpoints/groq`, {}, "body"],
      ["PATCH", `${LLAMA}/endpoints/xai`, { status: "active" }, "model_id"],
    ];
    for (const [method, path, body, field] of cases) {
      const res = await mgmt(a, method, path, body);
      expect(res.status, `${method} ${path} ${res.text}`).toBe(400);
      expect(res.json.error.metadata.field, res.text).toBe(field);
      expect(res.json.error.message).toContain(field === "body" ? "" : field);
    }
    expect((await mgmt(a, "PATCH", "acme/none/endpoints/groq", { status: "disabled" })).status).toBe(404);
    expect((await mgmt(a, "DELETE", "acme/none")).status).toBe(404);
    expect((await mgmt(a, "DELETE", "openai/gpt-4o/endpoints/openai")).json.error.metadata.field).toBe("provider"); // its last endpoint
    const plain = await api(a, "PUT", "/catalog/models/acme/tiny", { key: a.tenant.apiKey, body: tiny });
    expect(plain.status).toBe(403);
    expect((await api(a, "GET", "/catalog/models", { key: a.tenant.apiKey })).status).toBe(403);
    // Nothing was written.
    expect((await mgmt(a, "GET", "acme/bad")).status).toBe(404);
    expect((await api(a, "GET", "/audit?action_prefix=catalog.", { key: a.tenant.managementKey })).json.total_count).toBe(0);
  });

  it("adds a model: served at once by the instance that took it (listed, priced), through the bus by the second, after its re-read by the third", async () => {
    const put = await mgmt(a, "PUT", "acme/tiny", tiny);
    expect(put.status, put.text).toBe(200);
    expect(put.json.data).toMatchObject({ slug: "acme/tiny", name: tiny.name, overridden: true, endpoints: [{ provider: "ollama", model_id: "tiny", status: "active", zdr: true }] });

    expect((await models(a)).get("acme/tiny")).toMatchObject({
      canonical_slug: "acme/tiny",
      name: tiny.name,
      description: tiny.description,
      owned_by: "acme",
      context_length: 8192,
      architecture: { modality: "text->text", tokenizer: "Llama3" },
      pricing: { prompt: "0.000001", completion: "0.000002", request: "0", image: "0" },
      top_provider: { context_length: 8192, max_completion_tokens: 2048, is_moderated: false },
      supported_parameters: ["max_tokens", "temperature"],
    });
    // The next answer is priced at the new model's prices: 1000 × 0.000001 + 100 × 0.000002.
    const client = new OpenAI({ baseURL: `${a.baseUrl}/api/v1`, apiKey: a.tenant.apiKey, maxRetries: 0 });
    const answer = await client.chat.completions.create({ model: "ollama/tiny", messages: [{ role: "user", content: "hi" }] });
    expect((answer.usage as unknown as { cost: number }).cost).toBeCloseTo(0.0012, 12);

    await waitFor("the second instance to list acme/tiny (bus)", async () => (await models(b)).get("acme/tiny")?.pricing.prompt === "0.000001");
    await waitFor("the third instance to list acme/tiny (re-read)", async () => (await models(c)).has("acme/tiny"));
  });

  it("changes an endpoint's price and disables it: the endpoints list and /models follow on every instance", async () => {
    const before = await endpoints(a, LLAMA);
    expect(before.status, before.text).toBe(200);
    expect(before.json.data.endpoints.map((e: { provider: string }) => e.provider)).toEqual(expect.arrayContaining(["groq", "together", "fireworks"]));

    const cheaper = await mgmt(a, "PATCH", `${LLAMA}/endpoints/groq`, { pricing: { prompt: "0.0000001", completion: "0.0000002" } });
    expect(cheaper.status, cheaper.text).toBe(200);
    const groq = (await endpoints(a, LLAMA)).json.data.endpoints[0];
    expect(groq).toMatchObject({ provider: "groq", tag: expect.stringMatching(/^groq/), pricing: { prompt: "0.0000001", completion: "0.0000002" }, catalog_status: "active", status: 0, latency_last_30m: null, throughput_last_30m: null, uptime_last_30m: null });
    expect((await models(a)).get(LLAMA)).toMatchObject({ pricing: { prompt: "0.0000001", completion: "0.0000002" } });
    const answer = await new OpenAI({ baseURL: `${a.baseUrl}/api/v1`, apiKey: a.tenant.apiKey, maxRetries: 0 }).chat.completions.create({
      model: "groq/llama-3.3-70b-versatile",
      messages: [{ role: "user", content: "hi" }],
    });
    // BYOK: the account pays 0; the provider's price is 1000 × 0.0000001 + 100 × 0.0000002.
    expect((answer.usage as any).cost_details.upstream_inference_cost).toBeCloseTo(0.00012, 12);
    await waitFor("the second instance to serve Groq's new price", async () => (await endpoints(b, LLAMA)).json.data.endpoints[0].pricing.prompt === "0.0000001");

    expect((await mgmt(a, "PATCH", `${LLAMA}/endpoints/groq`, { status: "disabled" })).status).toBe(200);
    expect((await endpoints(a, LLAMA)).json.data.endpoints.map((e: { provider: string }) => e.provider)).not.toContain("groq");
    // Groq was the only provider the key reaches for this model.
    expect((await models(a)).has(LLAMA)).toBe(false);
    await waitFor("the second instance to drop the disabled endpoint", async () => !(await models(b)).has(LLAMA));
    await waitFor("the third instance to drop the disabled endpoint", async () => !(await models(c)).has(LLAMA));
    // The management list still shows it, disabled, and marked as changed.
    const listed = await api(a, "GET", `/catalog/models?limit=100`, { key: a.tenant.managementKey });
    const llama = listed.json.data.find((m: { slug: string }) => m.slug === LLAMA);
    expect(llama).toMatchObject({ overridden: true });
    expect(llama.endpoints.find((e: { provider: string }) => e.provider === "groq")).toMatchObject({ status: "disabled", pricing: { prompt: "0.0000001" } });
    expect((await mgmt(a, "PATCH", `${LLAMA}/endpoints/groq`, { status: "active" })).status).toBe(200);
    expect((await models(a)).has(LLAMA)).toBe(true);
  });

  it("removes an endpoint and a model; every change is in the audit log", async () => {
    const removed = await mgmt(a, "DELETE", `${LLAMA}/endpoints/fireworks`);
    expect(removed.status, removed.text).toBe(200);
    expect(removed.json.data.endpoints.map((e: { provider: string }) => e.provider)).not.toContain("fireworks");
    expect((await endpoints(a, LLAMA)).json.data.endpoints.map((e: { provider: string }) => e.provider)).not.toContain("fireworks");
    // The Groq change made earlier is kept beside the removal.
    expect((await endpoints(a, LLAMA)).json.data.endpoints[0].pricing.prompt).toBe("0.0000001");

    expect((await mgmt(a, "DELETE", "acme/tiny")).json).toEqual({ deleted: true });
    expect((await models(a)).has("acme/tiny")).toBe(false);
    expect((await endpoints(a, "acme/tiny")).status).toBe(404);
    await waitFor("the second instance to drop acme/tiny", async () => (await endpoints(b, "acme/tiny")).status === 404);
    // A built-in model is removed for good (until it is put back).
    expect((await mgmt(a, "DELETE", "openai/gpt-4o-mini")).status).toBe(200);
    expect((await mgmt(a, "GET", "openai/gpt-4o-mini")).status).toBe(404);

    const audit = await api(a, "GET", "/audit?action_prefix=catalog.&limit=100", { key: a.tenant.managementKey });
    const actions = audit.json.data.map((e: { action: string; target_id: string }) => `${e.action} ${e.target_id}`).reverse();
    expect(actions).toEqual([
      "catalog.model.add acme/tiny",
      `catalog.endpoint.update ${LLAMA}`,
      `catalog.endpoint.update ${LLAMA}`,
      `catalog.endpoint.update ${LLAMA}`,
      `catalog.endpoint.remove ${LLAMA}`,
      "catalog.model.remove acme/tiny",
      "catalog.model.remove openai/gpt-4o-mini",
    ]);
    expect(audit.json.data.at(-1)).toMatchObject({ actor: { type: "api_key", key_hash: a.tenant.managementKeyHash }, target_type: "catalog_model", details: { model: { name: tiny.name } } });
  });

  it("@openrouter/sdk reads the model list and a model's endpoints", async () => {
    const sdk = new OpenRouter({ apiKey: a.tenant.apiKey, serverURL: `${a.baseUrl}/api/v1` });
    const list = await sdk.models.list();
    const page = (list as unknown as { result: { data: Array<{ id: string; pricing: { prompt: string }; topProvider: { contextLength?: number | null }; links: { details: string } }>; totalCount: number } }).result;
    const llama = page.data.find((m) => m.id === LLAMA);
    expect(llama).toMatchObject({ pricing: { prompt: "0.0000001" }, topProvider: { contextLength: expect.any(Number) }, links: { details: `/api/v1/models/${LLAMA}/endpoints` } });
    expect(page.totalCount).toBe(page.data.length);
    const eps = await sdk.endpoints.list({ author: "meta-llama", slug: "llama-3.3-70b-instruct" });
    expect(eps.data.id).toBe(LLAMA);
    expect(eps.data.endpoints.map((e) => e.tag)).toEqual(expect.arrayContaining([expect.stringMatching(/^groq/), expect.stringMatching(/^together/)]));
    expect(eps.data.endpoints[0]).toMatchObject({ pricing: { prompt: "0.0000001" }, contextLength: expect.any(Number), uptimeLast30m: null });
  });

  it("pages /models with offset and limit, and refuses a query parameter it does not know", async () => {
    const all = await api(a, "GET", "/models", { key: a.tenant.apiKey });
    expect(all.json.total_count).toBe(all.json.data.length);
    const second = await api(a, "GET", "/models?offset=1&limit=1", { key: a.tenant.apiKey });
    expect(second.json.data.map((m: { id: string }) => m.id)).toEqual([all.json.data[1].id]);
    expect(second.json.links.next).toBe(all.json.data.length > 2 ? "/api/v1/models?offset=2&limit=1" : null);
    const bad = await api(a, "GET", "/models?supported_parameters=tools", { key: a.tenant.apiKey });
    expect(bad.status).toBe(400);
    expect(bad.json.error.metadata.field).toBe("supported_parameters");
    expect((await api(a, "GET", "/models?limit=0", { key: a.tenant.apiKey })).json.error.metadata.field).toBe("limit");
    const endpointsQuery = await api(a, "GET", `/models/${all.json.data[0].id}/endpoints?sort=price`, { key: a.tenant.apiKey });
    expect(endpointsQuery.status).toBe(400);
    expect(endpointsQuery.json.error).toMatchObject({ message: "sort is not a query parameter of this operation (none)", metadata: { field: "sort" } });
  });

  it("pages /catalog/models by cursor (docs/api.md#pagination): a walk sees every model once while models are added, offset kept, bad values named", async () => {
    const whole = await api(a, "GET", "/catalog/models?limit=100", { key: a.tenant.managementKey });
    expect(whole.status, whole.text).toBe(200);
    const before: string[] = whole.json.data.map((m: { slug: string }) => m.slug);
    expect(before.length).toBeGreaterThan(6);
    expect(whole.json).toMatchObject({ has_more: false, total_count: before.length });

    const seen: string[] = [];
    let cursor: string | undefined;
    let added = 0;
    for (;;) {
      const res = await api(a, "GET", `/catalog/models?limit=3${cursor ? `&starting_after=${cursor}` : ""}`, { key: a.tenant.managementKey });
      expect(res.status, res.text).toBe(200);
      seen.push(...res.json.data.map((m: { slug: string }) => m.slug));
      // A model sorted before the walk's position and one after it, added between pages.
      if (added < 2) {
        for (const slug of [`aaa-${added}/walk`, `zzz-${added}/walk`]) {
          const put = await mgmt(a, "PUT", slug, { ...tiny, endpoints: [{ ...tiny.endpoints[0], model_id: `tiny-${slug}` }] });
          expect(put.status, put.text).toBe(200);
        }
        added++;
      }
      if (!res.json.has_more) {
        expect(res.json.next_cursor).toBeUndefined();
        break;
      }
      cursor = res.json.next_cursor;
    }
    // Every model that existed when the walk began exactly once; the later ones after the position too, none twice.
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.filter((s) => before.includes(s))).toEqual(before);
    expect(seen).toEqual(expect.arrayContaining(["zzz-0/walk", "zzz-1/walk"]));
    expect(seen).not.toContain("aaa-1/walk");

    const byOffset = await api(a, "GET", "/catalog/models?offset=2&limit=2", { key: a.tenant.managementKey });
    const now = [...before, "aaa-0/walk", "aaa-1/walk", "zzz-0/walk", "zzz-1/walk"].sort();
    expect(byOffset.json.data.map((m: { slug: string }) => m.slug)).toEqual(now.slice(2, 4));
    expect(byOffset.json.has_more).toBe(true);
    const bad = async (query: string) => (await api(a, "GET", `/catalog/models?${query}`, { key: a.tenant.managementKey })).json.error.metadata.field;
    expect(await bad("limit=101")).toBe("limit");
    expect(await bad("starting_after=nonsense")).toBe("starting_after");
    expect(await bad(`offset=1&starting_after=${byOffset.json.next_cursor}`)).toBe("offset");
    expect(await bad("sort=slug")).toBe("sort");
    for (const slug of ["aaa-0/walk", "zzz-0/walk", "aaa-1/walk", "zzz-1/walk"]) expect((await mgmt(a, "DELETE", slug)).status).toBe(200);
  });

  it("over gRPC: ListModelEndpoints for any key, the management methods for management keys only", async () => {
    const catalog = grpcClient("portico/catalog/v1/catalog_service.proto", "portico.catalog.v1.CatalogService", a.coreUrl);
    const call = (method: string, req: unknown, key: string) =>
      new Promise<any>((resolve, reject) => catalog[method](req, bearer(key), (err: Error | null, r: unknown) => (err ? reject(err) : resolve(r))));
    const eps = await call("ListModelEndpoints", { slug: LLAMA }, a.tenant.apiKey);
    expect(eps.endpoints[0]).toMatchObject({ provider: "groq", provider_model_id: "llama-3.3-70b-versatile", pricing: { prompt: "0.0000001" }, catalog_status: "active" });
    await expect(call("ListCatalogModels", { limit: 5 }, a.tenant.apiKey)).rejects.toMatchObject({ code: 7 });
    const listed = await call("ListCatalogModels", { limit: 5 }, a.tenant.managementKey);
    expect(listed.models).toHaveLength(5);
    expect(listed.total_count).toBeGreaterThan(5);
    expect(listed.has_more).toBe(true);
    const next = await call("ListCatalogModels", { limit: 5, starting_after: listed.next_cursor }, a.tenant.managementKey);
    expect(next.models[0].model.fields.slug.stringValue > listed.models[4].model.fields.slug.stringValue).toBe(true);
    await expect(call("ListCatalogModels", { limit: 101 }, a.tenant.managementKey)).rejects.toMatchObject({ code: 3 });
    const after = await call("DeleteCatalogEndpoint", { slug: LLAMA, provider: "together" }, a.tenant.managementKey);
    expect(after.model.overridden).toBe(true);
    expect((await endpoints(a, LLAMA)).json.data.endpoints.map((e: { provider: string }) => e.provider)).not.toContain("together");
    await expect(call("ListModelEndpoints", { slug: "acme/none" }, a.tenant.apiKey)).rejects.toMatchObject({ code: 5 });

    // A model and an endpoint change as google.protobuf.Struct, encoded on the wire (grpc-js, proto-loader's Struct form).
    const put = await call("PutCatalogModel", { slug: "acme/grpc", model: toStruct({ ...tiny, name: "Over gRPC", endpoints: [{ ...tiny.endpoints[0], model_id: "grpc-tiny" }] }) }, a.tenant.managementKey);
    expect(put.model.overridden).toBe(true);
    expect((await endpoints(a, "acme/grpc")).json.data.endpoints[0]).toMatchObject({ provider_model_id: "grpc-tiny", context_length: 8192, pricing: { prompt: "0.000001" } });
    await expect(call("UpdateCatalogEndpoint", { slug: "acme/grpc", provider: "ollama", changes: toStruct({ pricing: { prompt: "cheap", completion: "0" } }) }, a.tenant.managementKey)).rejects.toMatchObject({
      code: 3,
      details: expect.stringContaining("pricing.prompt must be a decimal string"),
    });
    expect((await call("UpdateCatalogEndpoint", { slug: "acme/grpc", provider: "ollama", changes: toStruct({ max_completion_tokens: 1024 }) }, a.tenant.managementKey)).model.overridden).toBe(true);
    expect((await endpoints(a, "acme/grpc")).json.data.endpoints[0].max_completion_tokens).toBe(1024);

    const chat = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", a.coreUrl);
    const res = await new Promise<any>((resolve, reject) => chat.ListModels({}, bearer(a.tenant.apiKey), (err: Error | null, r: unknown) => (err ? reject(err) : resolve(r))));
    expect(res.models.find((m: any) => m.id === LLAMA)).toMatchObject({ canonical_slug: LLAMA, owned_by: "meta-llama", pricing: { prompt: "0.0000001" } });

    // ListModels' offset paging has the same rule at both edges (src/contract/requests/paging.ts,
    // ModelsPageFields): limit 1 to 1000 (gRPC 0: the whole list), offset at least 0; the same refusal and
    // message over gRPC (INVALID_ARGUMENT naming the field) as over HTTP (400 naming it).
    const listModels = (req: unknown) => new Promise<any>((resolve, reject) => chat.ListModels(req, bearer(a.tenant.apiKey), (err: Error | null, r: unknown) => (err ? reject(err) : resolve(r))));
    // The field the ErrorDetail in grpc-status-details-bin names (decoded as connect's gRPC client decodes it).
    const fieldOf = (err: any) => {
      const trailer = new Headers({ "grpc-status": String(err.code), "grpc-status-details-bin": Buffer.from(err.metadata.get("grpc-status-details-bin")[0]).toString("base64") });
      const detail = errorDetailOf(findTrailerError(trailer)!);
      return detail?.field;
    };
    for (const [req, query, field] of [[{ limit: 1001 }, "limit=1001", "limit"], [{ limit: -1 }, "limit=-1", "limit"], [{ offset: -1 }, "offset=-1", "offset"]] as const) {
      const http = await api(a, "GET", `/models?${query}`, { key: a.tenant.apiKey });
      expect(http.status, http.text).toBe(400);
      expect(http.json.error.metadata.field).toBe(field);
      const err = await listModels(req).then(() => undefined, (e: any) => e);
      expect(err, query).toMatchObject({ code: 3, details: http.json.error.message });
      expect(fieldOf(err), query).toBe(field);
    }
    expect((await listModels({ limit: 1000 })).models.length).toBe(res.models.length > 1000 ? 1000 : res.models.length);
    expect((await listModels({ offset: 1, limit: 1 })).models.map((m: any) => m.id)).toEqual([res.models[1].id]);
  });

  it("concurrent changes to one model from two instances: each is applied or refused with 409, never lost", async () => {
    const providers = ["ollama", "groq", "together", "fireworks"];
    const race = {
      name: "Race",
      context_length: 4096,
      endpoints: providers.map((p) => ({ provider: p, model_id: `race-${p}`, pricing: { prompt: "0", completion: "0" } })),
    };
    expect((await mgmt(a, "PUT", "acme/race", race)).status).toBe(200);
    const results = await Promise.all(providers.map((p, i) => mgmt(i % 2 ? b : a, "PATCH", `acme/race/endpoints/${p}`, { status: "deprecated" })));
    expect(results.every((r) => r.status === 200 || r.status === 409), results.map((r) => r.text).join("\n")).toBe(true);
    expect(results.some((r) => r.status === 200)).toBe(true);
    for (const r of results.filter((x) => x.status === 409)) expect(r.json.error.message).toContain("try again");
    // The changes made through b reach a on the bus: wait for a to serve them (a lost change never arrives).
    const expected = providers.map((p, i) => [p, results[i]!.status === 200 ? "deprecated" : "active"]);
    const statuses = async () => {
      const final = (await mgmt(a, "GET", "acme/race")).json.data;
      return providers.map((p) => [p, final.endpoints.find((e: { provider: string }) => e.provider === p).status]);
    };
    await waitFor("instance a to serve every applied change", async () => JSON.stringify(await statuses()) === JSON.stringify(expected));
    expect(await statuses()).toEqual(expected);
  });
});
