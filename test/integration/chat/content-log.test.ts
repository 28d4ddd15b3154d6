/**
 * Content logging (docs/operations.md, "Content logging"), end to end with the `openai` client against a fake
 * OpenAI-compatible upstream, on SQLite and PostgreSQL: off by default; `content_log_retention_days` on a
 * workspace (audited) keeps the request and the answer (non-streamed, and the assembled stream) sealed with the
 * BYOK keyring — the stored row is not plaintext, and a provider key in the request or echoed by the upstream is
 * never stored; only management keys read it (`GET /api/v1/generation/content`, 403 otherwise); the retention
 * sweep deletes expired rows (controlled clock); deleting the workspace deletes its content.
 */
import { randomBytes } from "node:crypto";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { createContentLog } from "../../../src/core/chat/content-log.js";
import { Keyring } from "../../../src/core/byok/keyring.js";
import { bearer, grpc, grpcClient, unary } from "../../helpers/grpc.js";
import { waitFor } from "../../helpers/wait.js";

const PROVIDER_KEY = "gsk-content-log-secret-0123456789abcdefABCDEF";
const DAY_MS = 86_400_000;

describe.each(["sqlite", "postgresql"] as const)("content logging (%s)", (provider) => {
  let h: Harness;
  let upstream: FakeUpstream;
  let tools: FakeUpstream;
  let down: FakeUpstream;
  let client: OpenAI;
  const model = "groq/llama-3.3-70b";

  const setDays = (workspaceId: string, days: number | null) =>
    api(h, "PATCH", `/workspaces/${workspaceId}`, { key: h.tenant.managementKey, body: { content_log_retention_days: days } });
  const content = (id: string, key = h.tenant.managementKey) => api(h, "GET", `/generation/content?id=${id}`, { key });
  const storedRow = (id: string) => h.database.db.generationContent.findUnique({ where: { id } });

  beforeAll(async () => {
    // The upstream echoes the provider key in its answer (a model repeating what it was given).
    upstream = await startFakeOpenAI({ text: ["The key is ", PROVIDER_KEY, ". Bye"], finish: "stop", usage: { input: 7, output: 3 } });
    tools = await startFakeOpenAI({
      text: [],
      toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}', argumentPieces: ['{"city"', ':"Paris"}'] }],
      finish: "tool_calls",
      usage: { input: 9, output: 4 },
    });
    down = await startFakeOpenAI(undefined, { failStatus: 500, failMessage: "upstream is down" });
    h = await startHarness({
      provider,
      env: { PORTICO_PROVIDER_GROQ_BASE_URL: `${upstream.url}/v1`, PORTICO_PROVIDER_OPENAI_BASE_URL: `${tools.url}/v1`, PORTICO_PROVIDER_TOGETHER_BASE_URL: `${down.url}/v1` },
    });
    for (const [slug, key] of [["groq", PROVIDER_KEY], ["openai", "sk-test-openai-tools-0123456789abcdef"], ["together", "tg-test-down-0123456789"]] as const) {
      const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: slug, key } });
      expect(res.status).toBe(200);
    }
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([upstream, tools, down].map((u) => u?.close()));
  });

  /**
   * The content of generation `id` once recorded: a stream's is recorded once it ends, after the last chunk left;
   * the write is queued off the answer path (the read flushes the queue).
   */
  const contentOf = (id: string): Promise<any> =>
    waitFor(`the stored content of ${id}`, async () => {
      const r = await content(id);
      return r.status === 200 && r.json.data;
    });
  /** The stored row of generation `id` once written. */
  const rowOf = (id: string) => waitFor(`the content row of ${id}`, () => storedRow(id));

  it("is off by default: nothing is stored", async () => {
    const ws = await api(h, "GET", `/workspaces/${h.tenant.workspaceId}`, { key: h.tenant.managementKey });
    expect(ws.json.data.content_log_retention_days).toBeNull();
    const res = await client.chat.completions.create({ model, messages: [{ role: "user", content: "off by default" }] });
    // The stage records a non-streamed answer before it returns it, and a read of the content first writes what
    // the log has queued (content-log.ts `read`): a 404 is the log's last word on this request.
    expect((await content(res.id)).status).toBe(404);
    expect(await storedRow(res.id)).toBeNull();
  });

  it("refuses a bad retention naming the field, and audits the change", async () => {
    for (const bad of [0, 3651, 1.5, "7"]) {
      const res = await api(h, "PATCH", `/workspaces/${h.tenant.workspaceId}`, { key: h.tenant.managementKey, body: { content_log_retention_days: bad } });
      expect(res.status).toBe(400);
      expect(JSON.stringify(res.json)).toContain("content_log_retention_days");
    }
    const set = await setDays(h.tenant.workspaceId, 7);
    expect(set.status).toBe(200);
    expect(set.json.data.content_log_retention_days).toBe(7);
    const audit = await h.database.db.auditEvent.findFirst({ where: { action: "workspace.update", targetId: h.tenant.workspaceId }, orderBy: { createdAt: "desc" } });
    expect(JSON.stringify(audit)).toContain("contentLogRetentionDays");
  });

  it("non-streamed: keeps request and answer sealed, without the provider key, for management keys only", async () => {
    await setDays(h.tenant.workspaceId, 7);
    const secretWords = `purple-elephant-${randomBytes(4).toString("hex")}`;
    const res = await client.chat.completions.create({
      model,
      messages: [{ role: "user", content: `${secretWords} and my key ${PROVIDER_KEY}` }],
      temperature: 0.5,
    });
    // The write is queued off the answer path: wait for it.
    const body = await contentOf(res.id);
    expect(body.id).toBe(res.id);
    expect(JSON.stringify(body.request)).toContain(secretWords);
    expect(body.request.temperature).toBe(0.5);
    expect(body.response.choices[0].message.content).toContain("The key is ");
    expect(JSON.stringify(body)).not.toContain(PROVIDER_KEY);
    expect(JSON.stringify(body)).toContain("[redacted]");
    expect(new Date(body.expires_at).getTime() - new Date(body.created_at).getTime()).toBe(7 * DAY_MS);

    // Read the database directly: sealed, not plaintext, bound to the generation.
    const row = (await storedRow(res.id))!;
    expect(row.organizationId).toBe(h.tenant.organizationId);
    const raw = Buffer.from(row.ciphertext);
    expect(raw.includes(Buffer.from(secretWords))).toBe(false);
    expect(raw.includes(Buffer.from(PROVIDER_KEY))).toBe(false);
    expect(raw.includes(Buffer.from("The key is"))).toBe(false);

    // An API key that is not a management key is refused.
    const refused = await content(res.id, h.tenant.apiKey);
    expect(refused.status).toBe(403);
    // Another organization's management key does not see it.
    const other = await h.createTenant();
    expect((await content(res.id, other.managementKey)).status).toBe(404);
  });

  it("streamed: keeps the assembled stream (text, finish, usage)", async () => {
    await setDays(h.tenant.workspaceId, 3);
    const stream = await client.chat.completions.create({ model, stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "stream it" }] });
    let id = "";
    for await (const chunk of stream) id ||= chunk.id;
    const body = await contentOf(id);
    expect(body.response.streamed).toBe(true);
    expect(body.response.choices[0].message.content).toMatch(/^The key is .*\. Bye$/);
    expect(body.response.choices[0].finish_reason).toBe("stop");
    expect(body.response.usage.prompt_tokens).toBe(7);
    expect(JSON.stringify(body)).not.toContain(PROVIDER_KEY);
    expect(body.request.stream).toBe(true);
  });

  it("streamed tool calls are assembled; a failed request keeps its error", async () => {
    await setDays(h.tenant.workspaceId, 3);
    const stream = await client.chat.completions.create({
      model: "openai/gpt-4o-mini",
      stream: true,
      messages: [{ role: "user", content: "weather?" }],
      tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }],
    });
    let id = "";
    for await (const chunk of stream) id ||= chunk.id;
    const body = await contentOf(id);
    expect(body.response.choices[0].message.tool_calls).toEqual([{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }]);
    expect(body.response.choices[0].finish_reason).toBe("tool_calls");
    expect(body.request.tools[0].function.name).toBe("get_weather");

    const failed = await client.chat.completions.create({ model: "together/some-model", messages: [{ role: "user", content: "will fail" }] }).catch((e: unknown) => e);
    expect((failed as { status?: number }).status).toBeGreaterThanOrEqual(500);
    const gens = await api(h, "GET", "/generations?limit=1", { key: h.tenant.managementKey });
    const failedId = gens.json.data[0].id as string;
    expect(gens.json.data[0].status).toBe("error");
    const kept = await contentOf(failedId);
    expect(JSON.stringify(kept.request)).toContain("will fail");
    expect(kept.response.error).toBeDefined();
    expect(JSON.stringify(kept)).not.toContain("tg-test-down");
  });

  it("the Messages dialect is logged too (its request in the canonical form)", async () => {
    await setDays(h.tenant.workspaceId, 3);
    const anthropic = new Anthropic({ baseURL: `${h.baseUrl}/api`, apiKey: h.tenant.apiKey, maxRetries: 0 });
    const msg = await anthropic.messages.create({ model, max_tokens: 50, messages: [{ role: "user", content: "from the messages dialect" }] });
    const body = await contentOf(msg.id);
    expect(JSON.stringify(body.request)).toContain("from the messages dialect");
    expect(body.response.choices[0].message.content).toContain("The key is ");
    expect(JSON.stringify(body)).not.toContain(PROVIDER_KEY);
  });

  it("the retention sweep deletes expired content (controlled clock)", async () => {
    await setDays(h.tenant.workspaceId, 2);
    const res = await client.chat.completions.create({ model, messages: [{ role: "user", content: "sweep me" }] });
    await rowOf(res.id);
    const keyring = new Keyring({ primaryId: "t", keys: new Map([["t", randomBytes(32)]]) });
    const at = (ms: number) => createContentLog({ db: h.database.db, keyring, logger: pino({ level: "silent" }), now: () => ms });
    await at(Date.now() + 1 * DAY_MS).sweep();
    expect(await storedRow(res.id)).not.toBeNull();
    // Bounded: one row per run at most.
    const n = await at(Date.now() + 2 * DAY_MS + 60_000).sweep(1);
    expect(n).toBe(1);
    await at(Date.now() + 2 * DAY_MS + 60_000).sweep();
    expect(await storedRow(res.id)).toBeNull();
    expect((await content(res.id)).status).toBe(404);
  });

  it("deleting a workspace deletes its content", async () => {
    const ws = await api(h, "POST", "/workspaces", { key: h.tenant.managementKey, body: { name: "Logged", slug: `logged-${randomBytes(3).toString("hex")}`, content_log_retention_days: 30 } });
    expect(ws.status).toBe(201);
    expect(ws.json.data.content_log_retention_days).toBe(30);
    const wsId = ws.json.data.id as string;
    const byok = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "groq", key: PROVIDER_KEY, workspace_id: wsId } });
    expect(byok.status).toBe(200);
    const key = await api(h, "POST", "/keys", { key: h.tenant.managementKey, body: { name: "logged", workspace_id: wsId } });
    expect(key.status).toBe(201);
    const wsClient = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: key.json.key, maxRetries: 0 });
    const res = await wsClient.chat.completions.create({ model, messages: [{ role: "user", content: "in a workspace to delete" }] });
    expect((await rowOf(res.id)).workspaceId).toBe(wsId);
    expect((await api(h, "DELETE", `/keys/${key.json.data.hash}`, { key: h.tenant.managementKey })).status).toBe(200);
    const del = await api(h, "DELETE", `/workspaces/${wsId}`, { key: h.tenant.managementKey });
    expect(del.status).toBe(200);
    expect(await storedRow(res.id)).toBeNull();
    expect(await h.database.db.generationContent.count({ where: { workspaceId: wsId } })).toBe(0);
    const audit = await h.database.db.auditEvent.findFirst({ where: { action: "workspace.delete", targetId: wsId } });
    expect(JSON.stringify(audit?.details)).toContain("contentDeleted");
  });

  it("over gRPC: the workspace setting by update mask, and the content for management keys only", async () => {
    const workspaces: any = grpcClient("portico/workspaces/v1/workspaces_service.proto", "portico.workspaces.v1.WorkspacesService", h.coreUrl);
    const generations: any = grpcClient("portico/generations/v1/generations_service.proto", "portico.generations.v1.GenerationsService", h.coreUrl);
    try {
      const set = await unary(workspaces, "UpdateWorkspace", { id: h.tenant.workspaceId, content_log_retention_days: 5, update_mask: { paths: ["content_log_retention_days"] } }, bearer(h.tenant.managementKey));
      expect(set.error).toBeUndefined();
      expect(set.response.workspace.content_log_retention_days).toBe(5);
      const res = await client.chat.completions.create({ model, messages: [{ role: "user", content: "over grpc" }] });
      const got: any = await waitFor(`the content of ${res.id} over gRPC`, async () => (await unary(generations, "GetGenerationContent", { id: res.id }, bearer(h.tenant.managementKey))).response);
      expect(got.id).toBe(res.id);
      expect(JSON.stringify(got.request)).toContain("over grpc");
      const refused = await unary(generations, "GetGenerationContent", { id: res.id }, bearer(h.tenant.apiKey));
      expect(refused.error?.code).toBe(grpc.status.PERMISSION_DENIED);
      const off = await unary(workspaces, "UpdateWorkspace", { id: h.tenant.workspaceId, update_mask: { paths: ["content_log_retention_days"] } }, bearer(h.tenant.managementKey));
      expect(off.response.workspace.content_log_retention_days ?? null).toBeNull();
    } finally {
      workspaces.close();
      generations.close();
    }
  });

  it("turned off again: new requests are not stored", async () => {
    await setDays(h.tenant.workspaceId, null);
    const res = await client.chat.completions.create({ model, messages: [{ role: "user", content: "off again" }] });
    // A later request of a workspace that logs content is stored: the log writes its queue in order (content-log.ts),
    // so a row for the first request, recorded before the second was sent, would be there by now.
    const ws = await api(h, "POST", "/workspaces", { key: h.tenant.managementKey, body: { name: "Marker", slug: `marker-${randomBytes(3).toString("hex")}`, content_log_retention_days: 1 } });
    expect(ws.status).toBe(201);
    const wsId = ws.json.data.id as string;
    expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "groq", key: PROVIDER_KEY, workspace_id: wsId } })).status).toBe(200);
    const key = await api(h, "POST", "/keys", { key: h.tenant.managementKey, body: { name: "marker", workspace_id: wsId } });
    expect(key.status).toBe(201);
    const marker = await new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: key.json.key, maxRetries: 0 }).chat.completions.create({ model, messages: [{ role: "user", content: "logged after" }] });
    await rowOf(marker.id);
    expect(await storedRow(res.id)).toBeNull();
    expect((await content(res.id)).status).toBe(404);
  });
});
