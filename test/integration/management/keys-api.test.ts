import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness, type Tenant } from "../../helpers/harness.js";
import { bearer, grpcClient, unary } from "../../helpers/grpc.js";

describe.each(["sqlite", "postgresql"] as const)("API key management (%s)", (provider) => {
  let h: Harness;
  let other: Tenant;
  let keysGrpc: any;

  beforeAll(async () => {
    h = await startHarness({ provider });
    other = await h.createTenant();
    keysGrpc = grpcClient("portico/keys/v1/keys_service.proto", "portico.keys.v1.KeysService", h.coreUrl);
  });
  afterAll(async () => {
    keysGrpc?.close();
    await h?.close();
  });

  it("creates a key (201, plaintext once), lists, gets, renames, disables and deletes it with immediate effect", async () => {
    const mk = h.tenant.managementKey;
    const created = await api(h, "POST", "/keys", { key: mk, body: { name: "ci runner" } });
    expect(created.status).toBe(201);
    const plaintext: string = created.json.key;
    expect(plaintext).toMatch(/^pk-v1-[0-9a-f]{64}$/);
    const hash: string = created.json.data.hash;
    expect(created.json.data).toMatchObject({
      name: "ci runner",
      disabled: false,
      is_management_key: false,
      workspace_id: h.tenant.workspaceId,
      creator_user_id: h.tenant.userId,
    });
    expect(created.json.data.label).toMatch(/^pk-v1-[0-9a-f]{3}\.\.\.[0-9a-f]{4}$/);
    expect((await api(h, "GET", "/key", { key: plaintext })).status).toBe(200);

    const got = await api(h, "GET", `/keys/${hash}`, { key: mk });
    expect(got.status).toBe(200);
    expect(got.text).not.toContain(plaintext);
    expect(got.json.data).toEqual(created.json.data);

    const list = await api(h, "GET", "/keys?limit=100", { key: mk });
    expect(list.status).toBe(200);
    expect(list.json.data.map((k: any) => k.hash)).toContain(hash);
    expect(list.json.total_count).toBe(list.json.data.length);
    expect(list.text).not.toContain(plaintext);

    const renamed = await api(h, "PATCH", `/keys/${hash}`, { key: mk, body: { name: "ci runner 2" } });
    expect(renamed.status).toBe(200);
    expect(renamed.json.data).toMatchObject({ name: "ci runner 2", disabled: false });

    const disabled = await api(h, "PATCH", `/keys/${hash}`, { key: mk, body: { disabled: true } });
    expect(disabled.json.data.disabled).toBe(true);
    expect((await api(h, "GET", "/key", { key: plaintext })).status).toBe(401);
    const listed = await api(h, "GET", "/keys?limit=100", { key: mk });
    expect(listed.json.data.map((k: any) => k.hash)).not.toContain(hash);
    const withDisabled = await api(h, "GET", "/keys?limit=100&include_disabled=true", { key: mk });
    expect(withDisabled.json.data.map((k: any) => k.hash)).toContain(hash);

    await api(h, "PATCH", `/keys/${hash}`, { key: mk, body: { disabled: false } });
    expect((await api(h, "GET", "/key", { key: plaintext })).status).toBe(200);

    const deleted = await api(h, "DELETE", `/keys/${hash}`, { key: mk });
    expect(deleted.status).toBe(200);
    expect(deleted.json).toEqual({ deleted: true });
    expect((await api(h, "GET", "/key", { key: plaintext })).status).toBe(401);
    expect((await api(h, "GET", `/keys/${hash}`, { key: mk })).status).toBe(404);
    expect((await api(h, "DELETE", `/keys/${hash}`, { key: mk })).status).toBe(404);
  });

  it("creates management keys and keys in another workspace of the organization", async () => {
    const mk = h.tenant.managementKey;
    const ws = await api(h, "POST", "/workspaces", { key: mk, body: { name: "Key Lab" } });
    expect(ws.status).toBe(201);
    const created = await api(h, "POST", "/keys", {
      key: mk,
      body: { name: "lab admin", workspace_id: ws.json.data.id, is_management_key: true },
    });
    expect(created.status).toBe(201);
    expect(created.json.data).toMatchObject({ is_management_key: true, workspace_id: ws.json.data.id });
    const me = await api(h, "GET", "/key", { key: created.json.key });
    expect(me.json.data).toMatchObject({ is_management_key: true, workspace_id: ws.json.data.id });
    const filtered = await api(h, "GET", `/keys?workspace_id=${ws.json.data.id}`, { key: mk });
    expect(filtered.json.data.map((k: any) => k.hash)).toEqual([created.json.data.hash]);
  });

  it("refuses ordinary keys with 403 and missing keys with 401 on every key route", async () => {
    const hash = h.tenant.apiKeyHash;
    const calls: Array<[string, string, unknown?]> = [
      ["GET", "/keys"],
      ["POST", "/keys", { name: "x" }],
      ["GET", `/keys/${hash}`],
      ["PATCH", `/keys/${hash}`, { name: "x" }],
      ["DELETE", `/keys/${hash}`],
    ];
    for (const [method, path, body] of calls) {
      const forbidden = await api(h, method, path, { key: h.tenant.apiKey, ...(body ? { body } : {}) });
      expect(forbidden.status, `${method} ${path}`).toBe(403);
      expect(forbidden.json).toEqual({ error: { code: 403, message: "Only management keys can perform this operation" } });
      const anonymous = await api(h, method, path, body ? { body } : {});
      expect(anonymous.status).toBe(401);
    }
    // Even a malformed body is judged on credentials first.
    expect((await api(h, "POST", "/keys", { key: h.tenant.apiKey, body: { name: 7 } })).status).toBe(403);
  });

  it("answers another organization's key exactly like a missing one", async () => {
    const mk = h.tenant.managementKey;
    const foreign = await api(h, "GET", `/keys/${other.apiKeyHash}`, { key: mk });
    const missing = await api(h, "GET", `/keys/${"0".repeat(64)}`, { key: mk });
    const malformed = await api(h, "GET", "/keys/not-a-hash", { key: mk });
    expect(foreign.status).toBe(404);
    expect(foreign.json).toEqual(missing.json);
    expect(malformed.json).toEqual(missing.json);
    for (const [method, body] of [["PATCH", { disabled: true }], ["DELETE", undefined]] as const) {
      const res = await api(h, method, `/keys/${other.apiKeyHash}`, { key: mk, ...(body ? { body } : {}) });
      expect(res.json).toEqual(missing.json);
    }
    expect((await api(h, "GET", "/key", { key: other.apiKey })).status).toBe(200);
    const list = await api(h, "GET", "/keys?limit=100", { key: mk });
    expect(list.json.data.map((k: any) => k.hash)).not.toContain(other.apiKeyHash);
    const foreignWs = await api(h, "POST", "/keys", { key: mk, body: { name: "x", workspace_id: other.workspaceId } });
    expect(foreignWs.status).toBe(400);
    expect(foreignWs.json.error.metadata.field).toBe("workspace_id");
  });

  it("refuses bad input with 400 naming the field", async () => {
    const mk = h.tenant.managementKey;
    const cases: Array<[string, string, unknown, string]> = [
      ["POST", "/keys", { name: "" }, "name"],
      ["POST", "/keys", { name: "x".repeat(256) }, "name"],
      ["POST", "/keys", {}, "name"],
      ["PATCH", `/keys/${h.tenant.apiKeyHash}`, { name: "  " }, "name"],
      ["PATCH", `/keys/${h.tenant.apiKeyHash}`, { credits: 10 }, "credits"],
      ["PATCH", `/keys/${h.tenant.apiKeyHash}`, { limit_reset: "yearly" }, "limit_reset"],
    ];
    for (const [method, path, body, field] of cases) {
      const res = await api(h, method, path, { key: mk, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.code).toBe(400);
      if (res.json.error.metadata?.field !== undefined) expect(res.json.error.metadata.field).toContain(field);
    }
    expect((await api(h, "GET", "/keys?limit=0", { key: mk })).status).toBe(400);
    expect((await api(h, "GET", "/keys?include_disabled=maybe", { key: mk })).status).toBe(400);
  });

  it("offers the same operations over gRPC with the same rules", async () => {
    const created = await unary(keysGrpc, "CreateKey", { name: "grpc key" }, bearer(h.tenant.managementKey));
    expect(created.error).toBeUndefined();
    expect(created.response.secret).toMatch(/^pk-v1-/);
    const hash = created.response.key.hash;
    const got = await unary(keysGrpc, "GetKey", { hash }, bearer(h.tenant.managementKey));
    expect(got.response.key.name).toBe("grpc key");
    const upd = await unary(
      keysGrpc,
      "UpdateKey",
      { hash, name: "renamed", update_mask: { paths: ["name"] } },
      bearer(h.tenant.managementKey),
    );
    expect(upd.response.key.name).toBe("renamed");
    const forbidden = await unary(keysGrpc, "ListKeys", {}, bearer(h.tenant.apiKey));
    expect(forbidden.error?.code).toBe(7); // PERMISSION_DENIED
    const foreign = await unary(keysGrpc, "GetKey", { hash: other.apiKeyHash }, bearer(h.tenant.managementKey));
    expect(foreign.error?.code).toBe(5); // NOT_FOUND
    const del = await unary(keysGrpc, "DeleteKey", { hash }, bearer(h.tenant.managementKey));
    expect(del.response.deleted).toBe(true);
    const gone = await unary(keysGrpc, "ListKeys", {}, bearer(created.response.secret));
    expect(gone.error?.code).toBe(16); // UNAUTHENTICATED
  });
});
