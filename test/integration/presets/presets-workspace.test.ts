/**
 * Presets of another workspace (`workspace_id`), over HTTP and gRPC, on SQLite and PostgreSQL: a
 * management key creates, reads, lists and updates presets in any live workspace of its organization;
 * an ordinary key may name only its own (403 otherwise); a workspace that is unknown, deleted or of
 * another organization is a 400 naming workspace_id; without workspace_id nothing changes.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, grpc, grpcClient, unary } from "../../helpers/grpc.js";
import { api, startHarness, type Harness, type Tenant } from "../../helpers/harness.js";

describe.each(["sqlite", "postgresql"] as const)("presets in a chosen workspace (%s)", (provider) => {
  let h: Harness;
  let other: Tenant;
  let ws: string;
  let presetsGrpc: any;
  const body = (temperature: number) => ({ model: "openai/gpt-4o", temperature, messages: [{ role: "user", content: "x" }] });

  beforeAll(async () => {
    h = await startHarness({ provider });
    other = await h.createTenant();
    presetsGrpc = grpcClient("portico/presets/v1/presets_service.proto", "portico.presets.v1.PresetsService", h.coreUrl);
    const made = await api(h, "POST", "/workspaces", { key: h.tenant.managementKey, body: { name: "Second" } });
    expect(made.status).toBe(201);
    ws = made.json.data.id;
  });
  afterAll(async () => {
    presetsGrpc?.close();
    await h?.close();
  });

  it("acts in the named workspace over HTTP, and only there", async () => {
    const mk = h.tenant.managementKey;
    const q = `?workspace_id=${ws}`;
    const created = await api(h, "POST", `/presets/ws-bot/chat/completions${q}`, { key: mk, body: body(0.3) });
    expect(created.status, created.text).toBe(200);
    expect(created.json.data.workspace_id).toBe(ws);
    // The key's own workspace does not have it.
    expect((await api(h, "GET", "/presets/ws-bot", { key: mk })).status).toBe(404);
    expect((await api(h, "GET", "/presets", { key: mk })).json.data.map((p: any) => p.slug)).not.toContain("ws-bot");
    // The named workspace does.
    const listed = await api(h, "GET", `/presets${q}&limit=10`, { key: mk });
    expect(listed.json.data.map((p: any) => p.slug)).toEqual(["ws-bot"]);
    expect((await api(h, "GET", `/presets/ws-bot${q}`, { key: mk })).json.data.designated_version.config.temperature).toBe(0.3);
    expect((await api(h, "POST", `/presets/ws-bot/chat/completions${q}`, { key: mk, body: body(0.5) })).json.data.designated_version.version).toBe(2);
    expect((await api(h, "GET", `/presets/ws-bot/versions${q}`, { key: mk })).json.total_count).toBe(2);
    expect((await api(h, "GET", `/presets/ws-bot/versions/1${q}`, { key: mk })).json.data.config.temperature).toBe(0.3);
    const patched = await api(h, "PATCH", `/presets/ws-bot${q}`, { key: mk, body: { designated_version: 1 } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.json.data.designated_version.version).toBe(1);
    // Its own workspace, named, is the same as none.
    expect((await api(h, "GET", `/presets?workspace_id=${h.tenant.workspaceId}`, { key: h.tenant.apiKey })).status).toBe(200);

    // An ordinary key may not reach another workspace.
    const forbidden = await api(h, "GET", `/presets${q}`, { key: h.tenant.apiKey });
    expect(forbidden.status).toBe(403);
    // Unknown, foreign and deleted workspaces: 400 naming workspace_id.
    for (const id of [randomUUID(), other.workspaceId, "not-a-uuid"]) {
      const res = await api(h, "GET", `/presets?workspace_id=${id}`, { key: mk });
      expect(res.status, id).toBe(400);
      expect(res.json.error.metadata.field).toBe("workspace_id");
    }
    const gone = await api(h, "POST", "/workspaces", { key: mk, body: { name: "Gone" } });
    expect((await api(h, "DELETE", `/workspaces/${gone.json.data.id}`, { key: mk })).status).toBe(200);
    const deleted = await api(h, "POST", `/presets/x/chat/completions?workspace_id=${gone.json.data.id}`, { key: mk, body: body(0.1) });
    expect(deleted.status).toBe(400);
    expect(deleted.json.error.metadata.field).toBe("workspace_id");
  });

  it("acts in the named workspace over gRPC with the same rules", async () => {
    const mk = bearer(h.tenant.managementKey);
    const listed = await unary(presetsGrpc, "ListPresets", { workspace_id: ws }, mk);
    expect(listed.error).toBeUndefined();
    expect(listed.response.presets.map((p: any) => p.slug)).toEqual(["ws-bot"]);
    const got = await unary(presetsGrpc, "GetPreset", { slug: "ws-bot", workspace_id: ws }, mk);
    expect(got.response.preset.workspace_id).toBe(ws);
    expect((await unary(presetsGrpc, "GetPreset", { slug: "ws-bot" }, mk)).error?.code).toBe(grpc.status.NOT_FOUND);
    const updated = await unary(presetsGrpc, "UpdatePreset", { slug: "ws-bot", workspace_id: ws, name: "Second bot", update_mask: { paths: ["name"] } }, mk);
    expect(updated.error).toBeUndefined();
    expect(updated.response.preset.name).toBe("Second bot");
    expect((await unary(presetsGrpc, "ListPresets", { workspace_id: ws }, bearer(h.tenant.apiKey))).error?.code).toBe(grpc.status.PERMISSION_DENIED);
    const unknown = await unary(presetsGrpc, "ListPresetVersions", { slug: "ws-bot", workspace_id: randomUUID() }, mk);
    expect(unknown.error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(unknown.error?.details).toMatch(/workspace_id/);
  });
});
