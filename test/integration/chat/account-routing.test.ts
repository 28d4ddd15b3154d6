/**
 * Account-wide routing settings end to end (docs/routing.md#account-wide-settings), on SQLite and PostgreSQL:
 * a management key sets an organization's or a workspace's settings over HTTP (`PUT /api/v1/routing-settings`)
 * and the `openai` client's requests are routed under them (three fake OpenAI-compatible upstreams play groq,
 * together and fireworks): the organization's ignore list keeps a provider out, a workspace's allow list and
 * quantizations narrow, a request cannot loosen them, a filter that empties the list is a 400 naming the
 * account setting, every change is audited, bad bodies are 400 naming the field (HTTP and gRPC), and a change
 * reaches a second core instance sharing the database.
 */
import OpenAI from "openai";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { bearer, grpcClient, unary } from "../../helpers/grpc.js";
import { waitFor } from "../../helpers/wait.js";

const LLAMA = "meta-llama/llama-3.3-70b-instruct";
const NAMES = ["groq", "together", "fireworks"] as const;
type Name = (typeof NAMES)[number];
const CLEAR = { allowed_providers: null, ignored_providers: null, allowed_quantizations: null, data_collection: "allow", zdr: false };

describe.each(["sqlite", "postgresql"] as const)("account-wide routing settings (%s)", (db) => {
  let h: Harness;
  const fakes = {} as Record<Name, FakeUpstream>;
  let client: OpenAI;
  const messages = [{ role: "user" as const, content: "hi" }];

  beforeAll(async () => {
    for (const name of NAMES) fakes[name] = await startFakeOpenAI({ text: [name], finish: "stop", usage: { input: 10, output: 20 } });
    h = await startHarness({
      provider: db,
      env: {
        PORTICO_PROVIDER_GROQ_BASE_URL: `${fakes.groq.url}/v1`,
        PORTICO_PROVIDER_TOGETHER_BASE_URL: `${fakes.together.url}/v1`,
        PORTICO_PROVIDER_FIREWORKS_BASE_URL: `${fakes.fireworks.url}/v1`,
      },
    });
    for (const provider of NAMES) {
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
    for (const f of Object.values(fakes)) f.requests.length = 0;
  });
  afterEach(async () => {
    for (const q of ["", `?workspace_id=${h.tenant.workspaceId}`]) {
      const res = await api(h, "PUT", `/routing-settings${q}`, { key: h.tenant.managementKey, body: CLEAR });
      expect(res.status, res.text).toBe(200);
    }
  });

  const put = async (body: Record<string, unknown>, workspace = false) => {
    const res = await api(h, "PUT", `/routing-settings${workspace ? `?workspace_id=${h.tenant.workspaceId}` : ""}`, { key: h.tenant.managementKey, body });
    expect(res.status, res.text).toBe(200);
    return res.json.data as Record<string, unknown>;
  };
  const create = (provider?: Record<string, unknown>) =>
    client.chat.completions.create({ model: LLAMA, messages, ...(provider ? { provider } : {}) } as never) as unknown as Promise<OpenAI.ChatCompletion & { provider: string }>;
  const received = () => Object.fromEntries(NAMES.map((n) => [n, fakes[n].requests.length]));
  const refusal = async (provider: Record<string, unknown>) => {
    const res = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: LLAMA, messages, provider } });
    expect(res.status, res.text).toBe(400);
    return res.json.error as { message: string; metadata?: { field?: string } };
  };

  it("the organization's ignored_providers keeps a provider out; a request naming only it is a 400 naming the setting", async () => {
    expect((await create({ sort: "price" })).provider).toBe("groq");
    const saved = await put({ ignored_providers: ["Groq"] });
    expect(saved).toMatchObject({ workspace_id: null, ignored_providers: ["groq"], allowed_providers: null, data_collection: "allow", zdr: false });
    expect(typeof saved.updated_at).toBe("string");
    fakes.groq.requests.length = 0;
    // The change was made through this instance: its bus message dropped the cached settings at once.
    expect((await create({ sort: "price" })).provider).toBe("together");
    // The request's own ignore is joined to the account's.
    expect((await create({ sort: "price", ignore: ["together"] })).provider).toBe("fireworks");
    // The request's only removed the last endpoint once the account's ignore list applied: its field is named,
    // and the message names the account setting that applied first.
    const err = await refusal({ only: ["groq"] });
    expect(err.metadata?.field).toBe("provider.only");
    expect(err.message).toContain("organization.routing_settings.ignored_providers");
    // An id only the ignored provider serves (uncatalogued groq/…): the account setting itself empties the list.
    const own = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "groq/brand-new-model", messages } });
    expect(own.status, own.text).toBe(400);
    expect(own.json.error.metadata?.field).toBe("organization.routing_settings.ignored_providers");
    expect(own.json.error.message).toContain("the organization's routing settings ignore groq");
    expect(received().groq).toBe(0);
    const read = await api(h, "GET", "/routing-settings", { key: h.tenant.managementKey });
    expect(read.status, read.text).toBe(200);
    expect(read.json.data).toMatchObject({ ignored_providers: ["groq"] });
  });

  it("a workspace's allowed_providers and allowed_quantizations narrow; a request's only intersects, and cannot loosen", async () => {
    await put({ allowed_providers: ["together", "fireworks"] }, true);
    expect((await create({ sort: "price" })).provider).toBe("together");
    expect((await create({ only: ["fireworks", "groq"] })).provider).toBe("fireworks");
    // The intersection is empty: the request's only is named, and the message says the account's settings applied first.
    const err = await refusal({ only: ["groq"] });
    expect(err.metadata?.field).toBe("provider.only");
    expect(err.message).toContain("workspace.routing_settings.allowed_providers");
    // Quantizations: only together's endpoint is fp8 in the catalog; a request listing more cannot widen it.
    await put({ allowed_providers: null, allowed_quantizations: ["fp8"] }, true);
    expect((await create({ sort: "price", quantizations: ["unknown", "fp8"] })).provider).toBe("together");
    expect(received()).toEqual({ groq: 0, together: 2, fireworks: 1 });
  });

  it("the organization's data-policy defaults apply whatever the request says (zdr, data_collection)", async () => {
    await put({ zdr: true });
    const err = await refusal({ zdr: false, data_collection: "allow" });
    expect(err.metadata?.field).toBe("organization.routing_settings.zdr");
    expect(received()).toEqual({ groq: 0, together: 0, fireworks: 0 });
    // data_collection "deny": the built-in catalog's llama providers do not train on prompts, so they stay.
    await put({ zdr: false, data_collection: "deny" });
    expect((await create({ data_collection: "allow", sort: "price" })).provider).toBe("groq");
    const read = await api(h, "GET", "/routing-settings", { key: h.tenant.managementKey });
    expect(read.json.data).toMatchObject({ data_collection: "deny", zdr: false });
  });

  it("every change is audited with what changed; a key that is not a management key is 403", async () => {
    await put({ ignored_providers: ["fireworks"], zdr: false });
    await put({ allowed_quantizations: ["fp8", "bf16"] }, true);
    const res = await api(h, "GET", "/audit?action=routing_settings.update&limit=100", { key: h.tenant.managementKey });
    expect(res.status, res.text).toBe(200);
    const events = res.json.data as Array<{ action: string; target_type: string; target_id: string; details: { changed: Record<string, unknown> } }>;
    const org = events.find((e) => e.target_type === "organization" && JSON.stringify(e.details.changed) === JSON.stringify({ ignored_providers: ["fireworks"] }));
    expect(org?.target_id).toBe(h.tenant.organizationId);
    const ws = events.find((e) => e.target_type === "workspace" && JSON.stringify(e.details.changed) === JSON.stringify({ allowed_quantizations: ["fp8", "bf16"] }));
    expect(ws?.target_id).toBe(h.tenant.workspaceId);
    const denied = await api(h, "PUT", "/routing-settings", { key: h.tenant.apiKey, body: { zdr: true } });
    expect(denied.status).toBe(403);
  });

  it.each([
    [{ zdr: "yes" }, "zdr"],
    [{ data_collection: "never" }, "data_collection"],
    [{ allowed_providers: "groq" }, "allowed_providers"],
    [{ ignored_providers: ["nobody-serves-this"] }, "ignored_providers[0]"],
    [{ allowed_quantizations: ["fp7"] }, "allowed_quantizations[0]"],
    [{ only: ["groq"] }, "only"],
  ])("a bad body is a 400 naming the field (%j) and changes nothing", async (body, field) => {
    const res = await api(h, "PUT", "/routing-settings", { key: h.tenant.managementKey, body });
    expect(res.status, res.text).toBe(400);
    expect(res.json.error.metadata?.field).toBe(field);
    const read = await api(h, "GET", "/routing-settings", { key: h.tenant.managementKey });
    expect(read.json.data).toMatchObject({ ...CLEAR, updated_at: expect.anything() });
  });

  it("a workspace that is not the organization's is 404", async () => {
    const res = await api(h, "GET", "/routing-settings?workspace_id=00000000-0000-4000-8000-000000000000", { key: h.tenant.managementKey });
    expect(res.status, res.text).toBe(404);
  });

  it("gRPC: the same settings and the same rule", async () => {
    await put({ ignored_providers: ["together"] });
    const svc = grpcClient("portico/routing/v1/routing_settings.proto", "portico.routing.v1.RoutingSettingsService", h.coreUrl);
    const got = await unary(svc, "GetRoutingSettings", {}, bearer(h.tenant.managementKey));
    expect(got.error).toBeFalsy();
    expect(got.response.settings.ignored_providers.values).toEqual(["together"]);
    const bad = await unary(svc, "UpdateRoutingSettings", { patch: { fields: { zdr: { stringValue: "yes" } } } }, bearer(h.tenant.managementKey));
    expect(bad.error?.code).toBe(3); // INVALID_ARGUMENT
    expect(bad.error?.message).toContain("zdr must be a boolean, got a string");
    const ok = await unary(svc, "UpdateRoutingSettings", { workspace_id: h.tenant.workspaceId, patch: { fields: { zdr: { boolValue: true } } } }, bearer(h.tenant.managementKey));
    expect(ok.error).toBeFalsy();
    expect(ok.response.settings).toMatchObject({ workspace_id: h.tenant.workspaceId, zdr: true });
  });

  it("a change reaches a second core instance sharing the database", async () => {
    const other = await startHarness({ sameDatabaseAs: h });
    try {
      const second = new OpenAI({ baseURL: `${other.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
      const ask = () => second.chat.completions.create({ model: LLAMA, messages, provider: { sort: "price" } } as never) as unknown as Promise<{ provider: string }>;
      // The second instance has read (and cached) the empty settings.
      expect((await ask()).provider).toBe("groq");
      await put({ ignored_providers: ["groq"] });
      // No shared bus between these two: the second instance's cache ends within its bound (PORTICO_AUTH_CACHE_TTL_MS).
      await waitFor("the second instance to route under the new settings", async () => (await ask()).provider === "together");
    } finally {
      await other.close();
    }
  });
});
