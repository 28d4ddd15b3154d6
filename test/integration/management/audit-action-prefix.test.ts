/**
 * The audit log filtered by the start of the action (`action_prefix`), over HTTP and gRPC, on SQLite and
 * PostgreSQL: `key.` is every key change, `pre` every preset event; the prefix is literal (`%` and `_`
 * are no wildcards), combines with `action`, and over 100 characters is a 400 naming it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, grpc, grpcClient, unary } from "../../helpers/grpc.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";

describe.each(["sqlite", "postgresql"] as const)("audit log filtered by action prefix (%s)", (provider) => {
  let h: Harness;
  let auditGrpc: any;

  beforeAll(async () => {
    h = await startHarness({ provider });
    auditGrpc = grpcClient("portico/audit/v1/audit_service.proto", "portico.audit.v1.AuditService", h.coreUrl);
    const mk = h.tenant.managementKey;
    const key = await api(h, "POST", "/keys", { key: mk, body: { name: "prefix-test" } });
    expect(key.status).toBe(201);
    expect((await api(h, "PATCH", `/keys/${key.json.data.hash}`, { key: mk, body: { disabled: true } })).status).toBe(200);
    expect((await api(h, "POST", "/workspaces", { key: mk, body: { name: "Prefix Space" } })).status).toBe(201);
    const preset = await api(h, "POST", "/presets/prefix-bot/chat/completions", { key: mk, body: { model: "openai/gpt-4o", messages: [{ role: "user", content: "x" }] } });
    expect(preset.status).toBe(200);
    expect((await api(h, "PATCH", "/presets/prefix-bot", { key: mk, body: { name: "Prefix bot" } })).status).toBe(200);
  });
  afterAll(async () => {
    auditGrpc?.close();
    await h?.close();
  });

  const actions = async (query: string) => {
    const res = await api(h, "GET", `/audit?limit=100&${query}`, { key: h.tenant.managementKey });
    expect(res.status, res.text).toBe(200);
    expect(res.json.total_count).toBe(res.json.data.length);
    return (res.json.data as { action: string }[]).map((e) => e.action).sort();
  };

  it("matches every action starting with the prefix over HTTP", async () => {
    expect(await actions("action_prefix=key.")).toEqual(["key.create", "key.update"]);
    expect(await actions("action_prefix=pre")).toEqual(["preset.update", "preset.version.create"]);
    expect(await actions("action_prefix=preset.version")).toEqual(["preset.version.create"]);
    // Combined with an exact action, both apply.
    expect(await actions("action_prefix=key.&action=key.update")).toEqual(["key.update"]);
    expect(await actions("action_prefix=key.&action=workspace.create")).toEqual([]);
    // Literal: SQL wildcards match nothing, and the prefix is case-sensitive.
    expect(await actions("action_prefix=%25")).toEqual([]);
    expect(await actions("action_prefix=key_")).toEqual([]);
    expect(await actions("action_prefix=KEY.")).toEqual([]);
    const tooLong = await api(h, "GET", `/audit?action_prefix=${"k".repeat(101)}`, { key: h.tenant.managementKey });
    expect(tooLong.status).toBe(400);
    expect(tooLong.json.error.metadata.field).toBe("action_prefix");
    expect((await api(h, "GET", "/audit?action_prefix=key.", { key: h.tenant.apiKey })).status).toBe(403);
  });

  it("matches by prefix over gRPC with the same rules", async () => {
    const res = await unary(auditGrpc, "ListAuditEvents", { action_prefix: "key.", limit: 100 }, bearer(h.tenant.managementKey));
    expect(res.error).toBeUndefined();
    expect(res.response.events.map((e: { action: string }) => e.action).sort()).toEqual(["key.create", "key.update"]);
    expect(res.response.total_count).toBe(2);
    const refused = await unary(auditGrpc, "ListAuditEvents", { action_prefix: "k".repeat(101) }, bearer(h.tenant.managementKey));
    expect(refused.error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(refused.error?.details).toMatch(/action_prefix/);
  });
});
