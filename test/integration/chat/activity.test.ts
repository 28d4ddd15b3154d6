/**
 * `GET /api/v1/activity` and gRPC `ActivityService.GetActivity` (docs/api.md, "Activity") on SQLite and
 * PostgreSQL: generations written with known costs, tokens, times, keys and workspaces, then totalled by the one
 * aggregate query. Exact sums (0.1 + 0.2 is 0.3; $5,000 + $5,000 past SQLite's 64-bit SUM; one femto-dollar),
 * UTC day boundaries (00:00:00.000 and 23:59:59.999 of a day, the first day of the window in, the day before it
 * out, today only with include_today), every filter and split, canonical slugs from the catalog (a dated
 * alias merged with its model), organization isolation, what an ordinary key may read, refusals naming the
 * field, and the `@openrouter/sdk` client reading it.
 */
import { randomUUID } from "node:crypto";
import { OpenRouter } from "@openrouter/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness, type Tenant } from "../../helpers/harness.js";
import { bearer, grpcClient, unary } from "../../helpers/grpc.js";
import { validateAgainstOpenApi, type OpenApiDoc } from "../../helpers/openapi.js";

const DAY = 86_400_000;
const day = (t: number) => new Date(t).toISOString().slice(0, 10);
const utcToday = () => {
  const n = new Date();
  return Date.UTC(n.getUTCFullYear(), n.getUTCMonth(), n.getUTCDate());
};

interface Gen {
  at: number;
  org?: Tenant;
  key: string;
  workspaceId?: string;
  provider: string | null;
  model: string | null;
  cost: bigint | null;
  upstream?: bigint | null;
  byok?: boolean;
  prompt?: number;
  completion?: number;
  reasoning?: number;
  cached?: number;
}

describe.each(["sqlite", "postgresql"] as const)("activity (%s)", (provider) => {
  let h: Harness;
  let other: Tenant;
  let secondWs: string;
  let today: number;
  let generations: any;
  const D = (n: number) => today - n * DAY;
  const get = (path: string, key = h.tenant.managementKey) => api(h, "GET", path, { key });

  beforeAll(async () => {
    h = await startHarness({ provider });
    other = await h.createTenant();
    secondWs = (await h.identity.createWorkspace({ organizationId: h.tenant.organizationId, name: "Second", slug: "second", isDefault: false })).id;
    generations = grpcClient("portico/activity/v1/activity_service.proto", "portico.activity.v1.ActivityService", h.coreUrl);
    today = utcToday();
    const t = h.tenant;
    const rows: Gen[] = [
      // Yesterday, its first and last millisecond: a dated alias and the model id itself (one model).
      { at: D(1), key: t.apiKeyHash, provider: "openai", model: "gpt-4o-2024-08-06", cost: 100_000_000_000_000n, prompt: 1000, completion: 200, reasoning: 50, cached: 300 },
      { at: D(1) + DAY - 1, key: t.apiKeyHash, provider: "openai", model: "gpt-4o", cost: 200_000_000_000_000n, prompt: 10, completion: 20 },
      // A request that no upstream served: not activity.
      { at: D(1) + 5, key: t.apiKeyHash, provider: null, model: null, cost: null },
      // The day before yesterday (its last millisecond, and noon): $5,000 twice and a BYOK-served one.
      { at: D(1) - 1, key: t.managementKeyHash, workspaceId: secondWs, provider: "anthropic", model: "claude-sonnet-4-20250514", cost: 0n, upstream: 5_000_000_000_000_000_000n, byok: true, prompt: 7 },
      { at: D(2) + DAY / 2, key: t.managementKeyHash, workspaceId: secondWs, provider: "anthropic", model: "claude-sonnet-4-20250514", cost: 5_000_000_000_000_000_000n, prompt: 1 },
      { at: D(2) + DAY / 2 + 1, key: t.managementKeyHash, workspaceId: secondWs, provider: "anthropic", model: "claude-sonnet-4-20250514", cost: 5_000_000_000_000_000_000n, prompt: 1 },
      // The first day of the window: one femto-dollar, by a key that is not in the key table (no creator).
      { at: D(30), key: "f".repeat(64), provider: "groq", model: "llama-3.3-70b-versatile", cost: 1n, prompt: 3, completion: 4 },
      // The day before the window: never counted.
      { at: D(30) - 1, key: t.apiKeyHash, provider: "openai", model: "gpt-4o", cost: 700_000_000_000_000n },
      // Today: only with include_today; a model the catalog lacks, unpriced.
      { at: D(0), key: t.apiKeyHash, provider: "vllm", model: "my-model", cost: null, prompt: 5, completion: 6 },
      // Another organization, yesterday.
      { at: D(1) + 10, org: other, key: other.apiKeyHash, provider: "openai", model: "gpt-4o", cost: 900_000_000_000_000n, prompt: 99 },
    ];
    await h.database.db.generation.createMany({
      data: rows.map((r) => ({
        id: `gen-${randomUUID()}`,
        organizationId: (r.org ?? t).organizationId,
        workspaceId: r.workspaceId ?? (r.org ?? t).workspaceId,
        keyHash: r.key,
        requestedModel: r.provider ? `${r.provider}/${r.model}` : "openai/none",
        model: r.model,
        provider: r.provider,
        credentialSource: r.provider ? (r.byok ? "byok" : "shared") : null,
        streamed: false,
        promptTokens: r.prompt ?? null,
        completionTokens: r.completion ?? null,
        totalTokens: r.prompt !== undefined ? r.prompt + (r.completion ?? 0) : null,
        latencyMs: 5,
        status: r.provider ? "success" : "error",
        attempts: 1,
        createdAt: new Date(r.at),
        reasoningTokens: r.reasoning ?? null,
        cachedTokens: r.cached ?? null,
        costFemtoUsd: r.cost,
        upstreamCostFemtoUsd: r.upstream ?? r.cost,
      })),
    });
  });
  afterAll(async () => {
    generations?.close();
    await h?.close();
  });

  /** The window's days were computed once: a run that crossed UTC midnight would compare other days. */
  function sameDay(): void {
    expect(utcToday(), "the test ran across UTC midnight; run it again").toBe(today);
  }

  it("default: one row per UTC day and model endpoint of the last 30 completed days, in the real-world shape", async () => {
    const res = await get("/activity");
    expect(res.status, res.text).toBe(200);
    sameDay();
    expect(res.json.data).toEqual([
      {
        date: day(D(30)), model: "meta-llama/llama-3.3-70b-instruct", model_permaslug: "groq/llama-3.3-70b-versatile", endpoint_id: "groq/llama-3.3-70b-versatile",
        provider_name: "groq", usage: 1e-15, byok_usage_inference: 0, requests: 1, prompt_tokens: 3, completion_tokens: 4, reasoning_tokens: 0, cached_tokens: 0,
      },
      {
        date: day(D(2)), model: "anthropic/claude-sonnet-4", model_permaslug: "anthropic/claude-sonnet-4-20250514", endpoint_id: "anthropic/claude-sonnet-4-20250514",
        provider_name: "anthropic", usage: 10000, byok_usage_inference: 5000, requests: 3, prompt_tokens: 9, completion_tokens: 0, reasoning_tokens: 0, cached_tokens: 0,
      },
      {
        date: day(D(1)), model: "openai/gpt-4o", model_permaslug: "openai/gpt-4o", endpoint_id: "openai/gpt-4o",
        provider_name: "openai", usage: 0.2, byok_usage_inference: 0, requests: 1, prompt_tokens: 10, completion_tokens: 20, reasoning_tokens: 0, cached_tokens: 0,
      },
      {
        date: day(D(1)), model: "openai/gpt-4o", model_permaslug: "openai/gpt-4o-2024-08-06", endpoint_id: "openai/gpt-4o-2024-08-06",
        provider_name: "openai", usage: 0.1, byok_usage_inference: 0, requests: 1, prompt_tokens: 1000, completion_tokens: 200, reasoning_tokens: 50, cached_tokens: 300,
      },
    ]);
  });

  it("group_by model merges a model's ids exactly (0.1 + 0.2 = 0.3), provider and key give one row per day and that", async () => {
    const byModel = await get("/activity?group_by=model");
    expect(byModel.status, byModel.text).toBe(200);
    sameDay();
    expect(byModel.text).toContain('"usage":0.3,');
    expect(byModel.json.data.map((r: any) => [r.date, r.model, r.provider_name, r.endpoint_id, r.usage, r.requests, r.prompt_tokens, r.completion_tokens])).toEqual([
      [day(D(30)), "meta-llama/llama-3.3-70b-instruct", null, null, 1e-15, 1, 3, 4],
      [day(D(2)), "anthropic/claude-sonnet-4", null, null, 10000, 3, 9, 0],
      [day(D(1)), "openai/gpt-4o", null, null, 0.3, 2, 1010, 220],
    ]);
    const byProvider = await get("/activity?group_by=provider");
    expect(byProvider.json.data.map((r: any) => [r.date, r.provider_name, r.model, r.usage, r.byok_usage_inference])).toEqual([
      [day(D(30)), "groq", null, 1e-15, 0],
      [day(D(2)), "anthropic", null, 10000, 5000],
      [day(D(1)), "openai", null, 0.3, 0],
    ]);
    const byKey = await get("/activity?group_by=key");
    expect(byKey.json.data.map((r: any) => [r.date, r.api_key_hash, r.model, r.provider_name, r.usage, r.requests])).toEqual([
      [day(D(30)), "f".repeat(64), null, null, 1e-15, 1],
      [day(D(2)), h.tenant.managementKeyHash, null, null, 10000, 3],
      [day(D(1)), h.tenant.apiKeyHash, null, null, 0.3, 2],
    ]);
    const byWorkspace = await get("/activity?group_by=workspace");
    expect(byWorkspace.json.data.map((r: any) => [r.date, r.endpoint_id, r.workspace_id])).toEqual([
      [day(D(30)), "groq/llama-3.3-70b-versatile", h.tenant.workspaceId],
      [day(D(2)), "anthropic/claude-sonnet-4-20250514", secondWs],
      [day(D(1)), "openai/gpt-4o", h.tenant.workspaceId],
      [day(D(1)), "openai/gpt-4o-2024-08-06", h.tenant.workspaceId],
    ]);
    sameDay();
  });

  it("filters: date (one UTC day, today included), include_today, api_key_hash, workspace_id, user_id", async () => {
    const rowsOf = async (q: string, key?: string) => {
      const res = await get(`/activity?${q}`, key);
      expect(res.status, res.text).toBe(200);
      return res.json.data.map((r: any) => [r.date, r.model ?? r.api_key_hash, r.usage]);
    };
    expect(await rowsOf(`date=${day(D(1))}&group_by=model`)).toEqual([[day(D(1)), "openai/gpt-4o", 0.3]]);
    expect(await rowsOf(`date=${day(D(30))}&group_by=model`)).toEqual([[day(D(30)), "meta-llama/llama-3.3-70b-instruct", 1e-15]]);
    expect(await rowsOf(`date=${day(D(0))}&group_by=model`)).toEqual([[day(D(0)), "vllm/my-model", 0]]);
    // include_today: the 30 days ending today (the first completed day of the default window falls out).
    expect(await rowsOf("include_today=true&group_by=model")).toEqual([
      [day(D(2)), "anthropic/claude-sonnet-4", 10000],
      [day(D(1)), "openai/gpt-4o", 0.3],
      [day(D(0)), "vllm/my-model", 0],
    ]);
    expect(await rowsOf(`api_key_hash=${h.tenant.apiKeyHash}&group_by=model`)).toEqual([[day(D(1)), "openai/gpt-4o", 0.3]]);
    expect(await rowsOf(`workspace_id=${secondWs}&group_by=model`)).toEqual([[day(D(2)), "anthropic/claude-sonnet-4", 10000]]);
    expect(await rowsOf(`user_id=${h.tenant.userId}&group_by=key`)).toEqual([
      [day(D(2)), h.tenant.managementKeyHash, 10000],
      [day(D(1)), h.tenant.apiKeyHash, 0.3],
    ]);
    expect(await rowsOf(`user_id=${other.userId}&group_by=key`)).toEqual([]);
    sameDay();
  });

  it("organization isolation and what an ordinary key reads: its own generations only", async () => {
    const theirs = await get("/activity?group_by=model", other.managementKey);
    expect(theirs.status, theirs.text).toBe(200);
    expect(theirs.json.data.map((r: any) => [r.date, r.model, r.usage, r.prompt_tokens])).toEqual([[day(D(1)), "openai/gpt-4o", 0.9, 99]]);
    // Another organization's key hash and workspace: nothing of theirs, and their workspace is not ours.
    expect((await get(`/activity?api_key_hash=${other.apiKeyHash}`)).json.data).toEqual([]);
    const ws = await get(`/activity?workspace_id=${other.workspaceId}`);
    expect(ws.status, ws.text).toBe(404);

    const own = await get("/activity?group_by=key", h.tenant.apiKey);
    expect(own.status, own.text).toBe(200);
    expect(own.json.data.map((r: any) => [r.api_key_hash, r.usage])).toEqual([[h.tenant.apiKeyHash, 0.3]]);
    const ownByHash = await get(`/activity?api_key_hash=${h.tenant.apiKeyHash}&group_by=model`, h.tenant.apiKey);
    expect(ownByHash.json.data.map((r: any) => r.usage)).toEqual([0.3]);
    const another = await get(`/activity?api_key_hash=${h.tenant.managementKeyHash}`, h.tenant.apiKey);
    expect(another.status, another.text).toBe(403);
    expect(another.json.error.message).toMatch(/another key's activity/);
    sameDay();
  });

  it("refusals name the field; no key is 401", async () => {
    const field = async (q: string) => {
      const res = await get(`/activity?${q}`);
      expect(res.status, res.text).toBe(400);
      return res.json.error.metadata?.field;
    };
    expect(await field(`date=${day(D(31))}`)).toBe("date");
    expect(await field(`date=${day(D(-1))}`)).toBe("date");
    expect(await field("date=2026-02-30")).toBe("date");
    expect(await field("date=yesterday")).toBe("date");
    expect(await field("group_by=day")).toBe("group_by");
    expect(await field("api_key_hash=abc")).toBe("api_key_hash");
    expect(await field("include_today=yes")).toBe("include_today");
    expect(await field("limit=10")).toBe("limit");
    // An unknown query key is refused by the route contract's closed query, with the same envelope as any
    // other route's (here /models, another closed query).
    const unknownKey = await get("/activity?bogus=1");
    const elsewhere = await get("/models?bogus=1");
    expect(unknownKey.status, unknownKey.text).toBe(400);
    expect(elsewhere.status, elsewhere.text).toBe(400);
    expect(unknownKey.json.error).toEqual({
      code: 400,
      message: "bogus is not a query parameter of this operation (date, api_key_hash, user_id, workspace_id, group_by, include_today)",
      metadata: elsewhere.json.error.metadata,
    });
    expect(Object.keys(unknownKey.json.error).sort()).toEqual(Object.keys(elsewhere.json.error).sort());
    expect(elsewhere.json.error.message).toBe("bogus is not a query parameter of this operation (offset, limit)");
    expect(await field("workspace_id=%00")).toBe("workspace_id");
    expect(await field(`user_id=${"u".repeat(201)}`)).toBe("user_id");
    // A parameter given twice fails the route's schema (400, the message names it).
    const twice = await get("/activity?group_by=model&group_by=key");
    expect(twice.status, twice.text).toBe(400);
    expect(twice.json.error.message).toMatch(/group_by/);
    const anonymous = await api(h, "GET", "/activity?group_by=day");
    expect(anonymous.status).toBe(401);
  });

  it("the answers, success and error, match the served OpenAPI document", async () => {
    const doc = (await api(h, "GET", "/openapi.json")).json as OpenApiDoc;
    for (const q of ["", "?group_by=model", "?group_by=provider", "?group_by=key", "?group_by=workspace", "?include_today=true", "?date=x", "?limit=1"]) {
      const res = await get(`/activity${q}`);
      expect(validateAgainstOpenApi(doc, "GET", "/api/v1/activity", res.status, res.json), `${q} ${res.status}`).toEqual([]);
    }
    const denied = await get(`/activity?api_key_hash=${h.tenant.managementKeyHash}`, h.tenant.apiKey);
    expect(validateAgainstOpenApi(doc, "GET", "/api/v1/activity", denied.status, denied.json)).toEqual([]);
  });

  it("over gRPC: the same totals, money as exact decimal strings", async () => {
    const { response, error } = await unary(generations, "GetActivity", { group_by: "model" }, bearer(h.tenant.managementKey));
    expect(error).toBeUndefined();
    sameDay();
    expect(response.data.map((r: any) => [r.date, r.model, r.usage_usd, r.byok_usage_inference_usd, r.requests, r.prompt_tokens])).toEqual([
      [day(D(30)), "meta-llama/llama-3.3-70b-instruct", "0.000000000000001", "0", "1", "3"],
      [day(D(2)), "anthropic/claude-sonnet-4", "10000", "5000", "3", "9"],
      [day(D(1)), "openai/gpt-4o", "0.3", "0", "2", "1010"],
    ]);
    const bad = await unary(generations, "GetActivity", { date: "2020-01-01" }, bearer(h.tenant.managementKey));
    expect(bad.error?.code).toBe(3); // INVALID_ARGUMENT
    const denied = await unary(generations, "GetActivity", { api_key_hash: h.tenant.managementKeyHash }, bearer(h.tenant.apiKey));
    expect(denied.error?.code).toBe(7); // PERMISSION_DENIED
  });

  it("the @openrouter/sdk client reads it", async () => {
    const sdk = new OpenRouter({ apiKey: h.tenant.managementKey, serverURL: `${h.baseUrl}/api/v1`, retryConfig: { strategy: "none" } });
    const res = await sdk.analytics.getUserActivity({ date: day(D(2)) });
    sameDay();
    expect(res.data).toEqual([
      {
        date: day(D(2)), model: "anthropic/claude-sonnet-4", modelPermaslug: "anthropic/claude-sonnet-4-20250514", endpointId: "anthropic/claude-sonnet-4-20250514",
        providerName: "anthropic", usage: 10000, byokUsageInference: 5000, requests: 3, promptTokens: 9, completionTokens: 0, reasoningTokens: 0,
      },
    ]);
    const split = await sdk.analytics.getUserActivity({ date: day(D(2)), groupBy: "workspace" });
    expect(split.data.map((r) => r.workspaceId)).toEqual([secondWs]);
  });
});
