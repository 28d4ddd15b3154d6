import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness, type Tenant } from "../../helpers/harness.js";
import { bearer, grpcClient, unary } from "../../helpers/grpc.js";

describe.each(["sqlite", "postgresql"] as const)("workspaces, members and the audit log (%s)", (provider) => {
  let h: Harness;
  let other: Tenant;
  let wsGrpc: any;
  let auditGrpc: any;

  beforeAll(async () => {
    h = await startHarness({ provider });
    other = await h.createTenant();
    wsGrpc = grpcClient("portico/workspaces/v1/workspaces_service.proto", "portico.workspaces.v1.WorkspacesService", h.coreUrl);
    auditGrpc = grpcClient("portico/audit/v1/audit_service.proto", "portico.audit.v1.AuditService", h.coreUrl);
  });
  afterAll(async () => {
    wsGrpc?.close();
    auditGrpc?.close();
    await h?.close();
  });

  it("creates, reads, updates and deletes a workspace", async () => {
    const mk = h.tenant.managementKey;
    const created = await api(h, "POST", "/workspaces", { key: mk, body: { name: "Research Lab", description: "models" } });
    expect(created.status).toBe(201);
    const ws = created.json.data;
    expect(ws).toMatchObject({ name: "Research Lab", slug: "research-lab", description: "models", is_default: false, created_by: h.tenant.userId });
    expect((await api(h, "GET", `/workspaces/${ws.id}`, { key: mk })).json.data).toEqual(ws);
    const list = await api(h, "GET", "/workspaces", { key: mk });
    expect(list.json.data.map((w: any) => w.id)).toEqual(expect.arrayContaining([h.tenant.workspaceId, ws.id]));
    expect(list.json.data.find((w: any) => w.id === h.tenant.workspaceId).is_default).toBe(true);

    const dup = await api(h, "POST", "/workspaces", { key: mk, body: { name: "Other", slug: "research-lab" } });
    expect(dup.status).toBe(409);

    const patched = await api(h, "PATCH", `/workspaces/${ws.id}`, { key: mk, body: { name: "Lab", slug: "lab", description: null } });
    expect(patched.status).toBe(200);
    expect(patched.json.data).toMatchObject({ name: "Lab", slug: "lab", description: null });

    // A workspace with active keys cannot be deleted.
    const key = await api(h, "POST", "/keys", { key: mk, body: { name: "lab key", workspace_id: ws.id } });
    const busy = await api(h, "DELETE", `/workspaces/${ws.id}`, { key: mk });
    expect(busy.status).toBe(409);
    await api(h, "DELETE", `/keys/${key.json.data.hash}`, { key: mk });
    const deleted = await api(h, "DELETE", `/workspaces/${ws.id}`, { key: mk });
    expect(deleted.status).toBe(200);
    expect(deleted.json).toEqual({ deleted: true });
    expect((await api(h, "GET", `/workspaces/${ws.id}`, { key: mk })).status).toBe(404);
    expect((await api(h, "GET", "/workspaces?limit=100", { key: mk })).json.data.map((w: any) => w.id)).not.toContain(ws.id);
  });

  it("adds, lists and removes members", async () => {
    const mk = h.tenant.managementKey;
    const ws = (await api(h, "POST", "/workspaces", { key: mk, body: { name: "Members" } })).json.data;
    const added = await api(h, "POST", `/workspaces/${ws.id}/members/add`, { key: mk, body: { emails: ["Dev@Example.com"] } });
    expect(added.status).toBe(200);
    expect(added.json.data).toHaveLength(1);
    const dev = added.json.data[0];
    expect(dev).toMatchObject({ email: "dev@example.com", role: "member" });
    const again = await api(h, "POST", `/workspaces/${ws.id}/members/add`, { key: mk, body: { user_ids: [dev.user_id] } });
    expect(again.json.data.map((m: any) => m.user_id)).toEqual([dev.user_id]);
    const members = await api(h, "GET", `/workspaces/${ws.id}/members`, { key: mk });
    expect(members.json.total_count).toBe(2); // the creator and dev
    expect(members.json.data.map((m: any) => m.user_id).sort()).toEqual([dev.user_id, h.tenant.userId].sort());

    // A user of another organization cannot be named by id.
    const foreign = await api(h, "POST", `/workspaces/${ws.id}/members/add`, { key: mk, body: { user_ids: [other.userId] } });
    expect(foreign.status).toBe(400);
    expect((await api(h, "POST", `/workspaces/${ws.id}/members/add`, { key: mk, body: {} })).status).toBe(400);
    expect((await api(h, "POST", `/workspaces/${ws.id}/members/add`, { key: mk, body: { emails: ["nope"] } })).status).toBe(400);

    const removed = await api(h, "POST", `/workspaces/${ws.id}/members/remove`, { key: mk, body: { user_ids: [dev.user_id, "nobody"] } });
    expect(removed.json).toEqual({ removed_count: 1 });
    expect((await api(h, "GET", `/workspaces/${ws.id}/members`, { key: mk })).json.total_count).toBe(1);
  });

  it("hides other organizations' workspaces and refuses ordinary keys", async () => {
    const mk = h.tenant.managementKey;
    const missing = await api(h, "GET", "/workspaces/00000000-0000-4000-8000-000000000000", { key: mk });
    expect(missing.status).toBe(404);
    const paths: Array<[string, string, unknown?]> = [
      ["GET", `/workspaces/${other.workspaceId}`],
      ["PATCH", `/workspaces/${other.workspaceId}`, { name: "mine" }],
      ["DELETE", `/workspaces/${other.workspaceId}`],
      ["GET", `/workspaces/${other.workspaceId}/members`],
      ["POST", `/workspaces/${other.workspaceId}/members/add`, { emails: ["x@example.com"] }],
      ["POST", `/workspaces/${other.workspaceId}/members/remove`, { user_ids: [other.userId] }],
    ];
    for (const [method, path, body] of paths) {
      const res = await api(h, method, path, { key: mk, ...(body ? { body } : {}) });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.json).toEqual(missing.json);
      const forbidden = await api(h, method, path, { key: h.tenant.apiKey, ...(body ? { body } : {}) });
      expect(forbidden.status).toBe(403);
    }
    expect((await api(h, "GET", "/workspaces", { key: h.tenant.apiKey })).status).toBe(403);
    expect((await api(h, "POST", "/workspaces", { key: h.tenant.apiKey, body: { name: 5 } })).status).toBe(403);
    expect((await api(h, "GET", "/audit", { key: h.tenant.apiKey })).status).toBe(403);
    expect((await api(h, "GET", "/audit", {})).status).toBe(401);
  });

  it("records every change in the audit log with who, what and when, never a secret", async () => {
    const mk = h.tenant.managementKey;
    const created = await api(h, "POST", "/keys", { key: mk, body: { name: "audited" } });
    const hash = created.json.data.hash;
    await api(h, "PATCH", `/keys/${hash}`, { key: mk, body: { disabled: true } });
    await api(h, "DELETE", `/keys/${hash}`, { key: mk });
    const log = await api(h, "GET", `/audit?target_id=${hash}`, { key: mk });
    expect(log.status).toBe(200);
    expect(log.json.data.map((e: any) => e.action).sort()).toEqual(["key.create", "key.delete", "key.update"]);
    for (const e of log.json.data) {
      expect(e).toMatchObject({
        target_type: "api_key",
        target_id: hash,
        workspace_id: h.tenant.workspaceId,
        actor: { type: "api_key", key_hash: h.tenant.managementKeyHash, user_id: h.tenant.userId },
      });
      expect(Number.isNaN(Date.parse(e.created_at))).toBe(false);
    }
    expect(log.text).not.toContain(created.json.key);
    expect(log.json.data.find((e: any) => e.action === "key.update").details).toEqual({ disabled: true });
    const all = await api(h, "GET", "/audit?limit=100", { key: mk });
    expect(all.json.total_count).toBeGreaterThanOrEqual(3);
    expect(all.text).not.toContain(created.json.key);
    const byAction = await api(h, "GET", "/audit?action=workspace.create", { key: mk });
    expect(byAction.json.data.every((e: any) => e.action === "workspace.create")).toBe(true);
    // Another organization sees none of it.
    const theirs = await api(h, "GET", "/audit?limit=100", { key: other.managementKey });
    expect(theirs.json.data.map((e: any) => e.target_id)).not.toContain(hash);
  });

  it("audits BYOK credential changes (masked label only) and preset version creation", async () => {
    const mk = h.tenant.managementKey;
    const secret = "sk-proj-audit-" + "x".repeat(40);
    const cred = await api(h, "POST", "/byok", { key: mk, body: { provider: "openai", key: secret, name: "audited" } });
    expect(cred.status).toBe(200);
    const id = cred.json.data.id;
    await api(h, "PATCH", `/byok/${id}`, { key: mk, body: { key: secret + "2", disabled: true } });
    await api(h, "DELETE", `/byok/${id}`, { key: mk });
    const log = await api(h, "GET", `/audit?target_id=${id}`, { key: mk });
    expect(log.json.data.map((e: any) => e.action).sort()).toEqual(["byok.create", "byok.delete", "byok.update"]);
    expect(log.json.data.find((e: any) => e.action === "byok.update").details).toMatchObject({ disabled: true, key_rotated: true });
    expect(log.text).not.toContain(secret);
    expect(log.text).not.toContain("audit-");

    const created = await api(h, "POST", "/presets/audited-preset/chat/completions", {
      key: mk,
      body: { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }] },
    });
    const presetLog = await api(h, "GET", `/audit?action=preset.version.create&target_id=${created.json.data.id}`, { key: mk });
    expect(presetLog.json.data.map((e: any) => e.details)).toEqual([{ slug: "audited-preset", version: 1 }]);
  });

  it("offers workspaces and the audit log over gRPC with the same rules", async () => {
    const created = await unary(wsGrpc, "CreateWorkspace", { name: "gRPC Space" }, bearer(h.tenant.managementKey));
    expect(created.error).toBeUndefined();
    expect(created.response.workspace.slug).toBe("grpc-space");
    const id = created.response.workspace.id;
    const upd = await unary(wsGrpc, "UpdateWorkspace", { id, description: "d", update_mask: { paths: ["description"] } }, bearer(h.tenant.managementKey));
    expect(upd.response.workspace.description).toBe("d");
    const foreign = await unary(wsGrpc, "GetWorkspace", { id: other.workspaceId }, bearer(h.tenant.managementKey));
    expect(foreign.error?.code).toBe(5);
    const forbidden = await unary(wsGrpc, "ListWorkspaces", {}, bearer(h.tenant.apiKey));
    expect(forbidden.error?.code).toBe(7);
    const events = await unary(auditGrpc, "ListAuditEvents", { target_id: id }, bearer(h.tenant.managementKey));
    expect(events.response.events.map((e: any) => e.action).sort()).toEqual(["workspace.create", "workspace.update"]);
    const auditForbidden = await unary(auditGrpc, "ListAuditEvents", {}, bearer(h.tenant.apiKey));
    expect(auditForbidden.error?.code).toBe(7);
  });
});
