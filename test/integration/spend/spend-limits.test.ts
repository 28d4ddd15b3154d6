/**
 * Spend limits, workspace budgets, request/token rates and key expiry (docs/limits.md), on SQLite and PostgreSQL,
 * through the HTTP management API and the `openai` client against a fake OpenAI-compatible provider that reports
 * usage: a key's limit is never overshot and its settled spend equals its generations' costs exactly; a request
 * that does not fit answers 402 naming the limit; an uncatalogued model is refused under a limit; a reservation
 * left by a dead process is released after its expiry; a cancelled stream is billed for what was relayed;
 * RPM/TPM answer 429 with Retry-After; an expired key answers 401; @openrouter/sdk reads the key's usage.
 */
import OpenAI from "openai";
import { OpenRouter } from "@openrouter/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";
import { bearer, grpcClient, unary } from "../../helpers/grpc.js";
import { writeCatalogFile } from "../../helpers/catalog-file.js";
import { createSpendStore, keyCounterId } from "../../../src/core/spend/spend-store.js";

const FEMTO = 1e15;

describe.each(["sqlite", "postgresql"] as const)("spend limits (%s)", (provider) => {
  let h: Harness;
  let fake: FakeUpstream;

  beforeAll(async () => {
    // 10 prompt tokens (fewer than the body's bytes, as a real tokenizer gives), 50 completion tokens.
    fake = await startFakeOpenAI({ text: ["Hel", "lo", " there"], finish: "stop", usage: { input: 10, output: 50 } });
    const catalogFile = writeCatalogFile([
      {
        slug: "acme/tiny",
        name: "Acme Tiny",
        endpoints: [{ provider: "ollama", model_id: "tiny", context_length: 8192, max_completion_tokens: 1000, pricing: { prompt: "0.000001", completion: "0.000002" } }],
      },
    ]);
    h = await startHarness({
      provider,
      env: {
        PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `ollama=${fake.url}/v1`,
        PORTICO_KEYLESS_PROVIDERS: "ollama",
        PORTICO_CATALOG_FILE: catalogFile,
        PORTICO_SPEND_RESERVATION_TTL_MS: "600",
      },
    });
  });
  afterAll(async () => {
    await h?.close();
    await fake?.close();
  });

  async function newKey(body: Record<string, unknown>): Promise<{ key: string; hash: string; data: any }> {
    const res = await api(h, "POST", "/keys", { key: h.tenant.managementKey, body: { name: "limited", ...body } });
    expect(res.status, res.text).toBe(201);
    return { key: res.json.key, hash: res.json.data.hash, data: res.json.data };
  }
  const chat = (key: string, extra: Record<string, unknown> = {}) =>
    api(h, "POST", "/chat/completions", { key, body: { model: "ollama/tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 100, ...extra } });
  const keyInfo = async (key: string) => (await api(h, "GET", "/key", { key })).json.data;
  const generationsOf = (hash: string) => h.database.db.generation.findMany({ where: { keyHash: hash } });
  /** Waits until every generation of the key is recorded (the record stage writes after the answer). */
  const recorded = (hash: string, n: number) => waitFor(`${n} generations of the key recorded`, async () => (await generationsOf(hash)).length >= n);

  it("sets limit, limit_reset and expires_at on create and update, audited, and reports them", async () => {
    const expires = new Date(Date.now() + 3_600_000).toISOString();
    const k = await newKey({ limit: 0.5, limit_reset: "monthly", expires_at: expires, rate_limit_rpm: 100 });
    expect(k.data).toMatchObject({ limit: 0.5, limit_reset: "monthly", expires_at: expires, rate_limit_rpm: 100, rate_limit_tpm: null });
    const upd = await api(h, "PATCH", `/keys/${k.hash}`, { key: h.tenant.managementKey, body: { limit: 0.25, limit_reset: "daily" } });
    expect(upd.status, upd.text).toBe(200);
    expect(upd.json.data).toMatchObject({ limit: 0.25, limit_reset: "daily", expires_at: expires });
    const info = await keyInfo(k.key);
    expect(info).toMatchObject({ limit: 0.25, limit_remaining: 0.25, limit_reset: "daily", expires_at: expires, usage: 0, rate_limit_rpm: 100 });
    const audit = await h.database.db.auditEvent.findMany({ where: { targetId: k.hash } });
    expect(audit.map((a) => a.action).sort()).toEqual(["key.create", "key.update"]);
    expect(JSON.stringify(audit)).toContain("limit_femto_usd");
    // Bad input: 400 naming the field.
    for (const [body, field] of [
      [{ limit: -1 }, "limit"],
      [{ limit_reset: "hourly" }, "limit_reset"],
      [{ expires_at: "2001-01-01T00:00:00Z" }, "expires_at"],
      [{ rate_limit_tpm: 0 }, "rate_limit_tpm"],
    ] as const) {
      const bad = await api(h, "PATCH", `/keys/${k.hash}`, { key: h.tenant.managementKey, body });
      expect(bad.status, bad.text).toBe(400);
      expect(bad.json.error.message).toContain(field);
    }
  });

  it("never overshoots: requests run until the next reservation does not fit, then 402 naming the limit; spend equals the generations' costs", async () => {
    const limit = 0.001;
    const k = await newKey({ limit });
    let ok = 0;
    let refused: Awaited<ReturnType<typeof chat>> | undefined;
    for (let i = 0; i < 30 && !refused; i++) {
      const res = await chat(k.key);
      if (res.status === 200) ok++;
      else refused = res;
    }
    expect(ok).toBeGreaterThan(0);
    expect(refused?.status, refused?.text).toBe(402);
    expect(refused!.json.error.metadata.reason).toBe("spend_limit_exceeded");
    expect(refused!.json.error.message).toMatch(/this API key's spend limit \(\$0\.001\)/);
    await recorded(k.hash, ok + 1);
    const gens = await generationsOf(k.hash);
    const total = gens.reduce((s, g) => s + (g.costFemtoUsd ?? 0n), 0n);
    // 10 × $1/M + 50 × $2/M per generation.
    expect(total).toBe(BigInt(ok) * 110_000_000_000n);
    expect(total <= BigInt(limit * FEMTO)).toBe(true);
    const counter = await h.database.db.spendCounter.findUnique({ where: { id: keyCounterId(gens[0]!.keyHash === k.hash ? (await h.database.db.apiKey.findUnique({ where: { hash: k.hash } }))!.id : "") } });
    expect(counter?.spentFemtoUsd).toBe(total);
    expect(counter?.reservedFemtoUsd).toBe(0n);
    const info = await keyInfo(k.key);
    expect(info.usage).toBeCloseTo(Number(total) / FEMTO, 12);
    expect(info.limit_remaining).toBeCloseTo(limit - Number(total) / FEMTO, 12);
    // The published SDK reads the same figures.
    const sdk = new OpenRouter({ apiKey: k.key, serverURL: `${h.baseUrl}/api/v1`, retryConfig: { strategy: "none" } });
    const meta = (await sdk.apiKeys.getCurrentKeyMetadata()).data as any;
    expect(meta.limit).toBe(limit);
    expect(meta.usage).toBeCloseTo(Number(total) / FEMTO, 12);
    expect(meta.limitRemaining).toBeCloseTo(limit - Number(total) / FEMTO, 12);
  });

  it("sets and reads the limits over gRPC (KeysService, IdentityService.GetCaller)", async () => {
    const keys = grpcClient("portico/keys/v1/keys_service.proto", "portico.keys.v1.KeysService", h.coreUrl);
    const identity = grpcClient("portico/identity/v1/identity_service.proto", "portico.identity.v1.IdentityService", h.coreUrl);
    try {
      const created = await unary(keys, "CreateKey", { name: "grpc", limit_femto_usd: "2000000000000000", limit_reset: "weekly", rate_limit_tpm: 1000 }, bearer(h.tenant.managementKey));
      expect(created.error).toBeUndefined();
      expect(created.response.key).toMatchObject({ limit_femto_usd: "2000000000000000", limit_reset: "weekly", rate_limit_tpm: 1000 });
      const hash = created.response.key.hash;
      const upd = await unary(keys, "UpdateKey", { hash, limit_femto_usd: "3000000000000000", update_mask: { paths: ["limit_femto_usd"] } }, bearer(h.tenant.managementKey));
      expect(upd.error).toBeUndefined();
      expect(upd.response.key.limit_femto_usd).toBe("3000000000000000");
      // A path whose optional field is absent clears it.
      const cleared = await unary(keys, "UpdateKey", { hash, update_mask: { paths: ["rate_limit_tpm"] } }, bearer(h.tenant.managementKey));
      expect(cleared.response.key.rate_limit_tpm ?? null).toBeNull();
      const bad = await unary(keys, "UpdateKey", { hash, limit_reset: "hourly", update_mask: { paths: ["limit_reset"] } }, bearer(h.tenant.managementKey));
      expect(bad.error?.code).toBe(3); // INVALID_ARGUMENT
      const me = await unary(identity, "GetCaller", {}, bearer(created.response.secret));
      expect(me.error).toBeUndefined();
      expect(me.response.spend).toMatchObject({ limit_femto_usd: "3000000000000000", limit_remaining_femto_usd: "3000000000000000", limit_reset: "weekly", usage_femto_usd: "0" });
    } finally {
      keys.close();
      identity.close();
    }
  });

  it("refuses an uncatalogued model under a limit (400 naming model)", async () => {
    const k = await newKey({ limit: 1 });
    const res = await api(h, "POST", "/chat/completions", { key: k.key, body: { model: "ollama/unknown-model", messages: [{ role: "user", content: "hi" }] } });
    expect(res.status, res.text).toBe(400);
    expect(res.json.error.metadata.field).toBe("model");
    expect(res.json.error.message).toMatch(/no price in the model catalog/);
  });

  it("releases a dead process's reservation after its expiry", async () => {
    const k = await newKey({ limit: 0.001 });
    const row = (await h.database.db.apiKey.findUnique({ where: { hash: k.hash } }))!;
    // Another "process" reserves the whole limit and dies before settling.
    const dead = createSpendStore({ db: h.database.db, reservationTtlMs: 600 });
    const r = await dead.reserve({ key: keyCounterId(row.id), workspace: null, amount: 1_000_000_000_000n });
    expect(r.ok).toBe(true);
    const refused = await chat(k.key);
    expect(refused.status, refused.text).toBe(402);
    const res = await waitFor("the dead reservation to expire", async () => {
      const x = await chat(k.key);
      return x.status === 200 ? x : undefined;
    });
    expect(res.status).toBe(200);
    await recorded(k.hash, 2);
    const counter = await h.database.db.spendCounter.findUnique({ where: { id: keyCounterId(row.id) } });
    expect(counter?.reservedFemtoUsd).toBe(0n);
    expect(counter?.spentFemtoUsd).toBe(110_000_000_000n);
  });

  it("bills a stream the client cancels for what was relayed, the same on the counter and the generation", async () => {
    const k = await newKey({ limit: 1 });
    const row = (await h.database.db.apiKey.findUnique({ where: { hash: k.hash } }))!;
    fake.knobs.chunkDelayMs = 200;
    try {
      const client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: k.key, maxRetries: 0 });
      const stream = await client.chat.completions.create({ model: "ollama/tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 100, stream: true });
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta?.content) break; // first content chunk: leave
      }
      await recorded(k.hash, 1);
    } finally {
      fake.knobs.chunkDelayMs = 0;
    }
    const [g] = await generationsOf(k.hash);
    expect(g!.status).toBe("cancelled");
    expect(g!.costFemtoUsd).not.toBeNull();
    expect(g!.costFemtoUsd! > 0n).toBe(true);
    const counter = await waitFor("the settlement", async () => {
      const c = await h.database.db.spendCounter.findUnique({ where: { id: keyCounterId(row.id) } });
      return c && c.reservedFemtoUsd === 0n ? c : undefined;
    });
    expect(counter.spentFemtoUsd).toBe(g!.costFemtoUsd);
  });

  it("enforces a workspace budget over its keys (402 naming the workspace's budget)", async () => {
    const ws = await api(h, "POST", "/workspaces", { key: h.tenant.managementKey, body: { name: `budgeted ${provider}`, budget: 0.00033 } });
    expect(ws.status, ws.text).toBe(201);
    expect(ws.json.data).toMatchObject({ budget: 0.00033, budget_reset: "none" });
    const k = await newKey({ workspace_id: ws.json.data.id });
    // The reservation: ~80 body bytes × $1/M + 100 × $2/M ≈ $0.00028 fits once; with $0.00011 spent it no longer does.
    expect((await chat(k.key)).status).toBe(200);
    const res = await chat(k.key);
    expect(res.status, res.text).toBe(402);
    expect(res.json.error.message).toMatch(/the workspace's budget/);
    // Raised through PATCH: the next request fits.
    const upd = await api(h, "PATCH", `/workspaces/${ws.json.data.id}`, { key: h.tenant.managementKey, body: { budget: 1, budget_reset: "monthly" } });
    expect(upd.status, upd.text).toBe(200);
    await waitFor("the raised budget to apply", async () => (await chat(k.key)).status === 200);
    await recorded(k.hash, 3);
    // The settlement follows the answer: read the counter once nothing is reserved on it any more.
    const counter = await waitFor("the workspace counter settled", async () => {
      const c = await h.database.db.spendCounter.findUnique({ where: { id: `ws:${ws.json.data.id}` } });
      return c && c.reservedFemtoUsd === 0n ? c : undefined;
    });
    const spent = (await generationsOf(k.hash)).reduce((s, g) => s + (g.costFemtoUsd ?? 0n), 0n);
    expect(counter.spentFemtoUsd).toBe(spent);
  });

  it("answers 429 with Retry-After past the key's requests or tokens per minute", async () => {
    const k = await newKey({ rate_limit_rpm: 2 });
    expect((await chat(k.key)).status).toBe(200);
    expect((await chat(k.key)).status).toBe(200);
    const third = await chat(k.key);
    expect(third.status, third.text).toBe(429);
    expect(third.json.error.metadata.reason).toBe("rate_limited");
    expect(third.json.error.message).toMatch(/2 requests per minute/);
    expect(Number(third.headers.get("retry-after"))).toBeGreaterThan(0);

    const t = await newKey({ rate_limit_tpm: 50 });
    expect((await chat(t.key)).status).toBe(200); // 60 tokens: the minute's bound is now reached
    const over = await chat(t.key);
    expect(over.status, over.text).toBe(429);
    expect(over.json.error.message).toMatch(/50 tokens per minute/);
    expect(Number(over.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("an expired key answers 401 like a revoked one", async () => {
    const k = await newKey({ expires_at: new Date(Date.now() + 1_500).toISOString() });
    expect((await chat(k.key)).status).toBe(200);
    const res = await waitFor("the key to expire", async () => {
      const r = await api(h, "GET", "/key", { key: k.key });
      return r.status === 401 ? r : undefined;
    });
    expect(res.json.error.message).toMatch(/expired/);
    expect((await chat(k.key)).status).toBe(401);
  });
});
