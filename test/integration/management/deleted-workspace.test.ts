/**
 * A deleted workspace's keys are refused everywhere (over HTTP and gRPC, ordinary and management
 * keys), within the revocation bound; and "a workspace is refused deletion while it holds active
 * keys" holds when DELETE /workspaces/{id} races POST /keys (no active key is ever left in a deleted
 * workspace), on SQLite and PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { bearer, grpc, grpcClient, unary } from "../../helpers/grpc.js";
import { createWorkspacesService } from "../../../src/core/workspaces/workspaces-service.js";
import { waitFor } from "../../helpers/wait.js";

const PAIRS = 40;

describe.each(["sqlite", "postgresql"] as const)("a deleted workspace's keys (%s)", (provider) => {
  let h: Harness;
  let keysGrpc: any;
  let wsGrpc: any;
  let identityGrpc: any;

  beforeAll(async () => {
    h = await startHarness({ provider });
    keysGrpc = grpcClient("portico/keys/v1/keys_service.proto", "portico.keys.v1.KeysService", h.coreUrl);
    wsGrpc = grpcClient("portico/workspaces/v1/workspaces_service.proto", "portico.workspaces.v1.WorkspacesService", h.coreUrl);
    identityGrpc = grpcClient("portico/identity/v1/identity_service.proto", "portico.identity.v1.IdentityService", h.coreUrl);
  });
  afterAll(async () => {
    keysGrpc?.close();
    wsGrpc?.close();
    identityGrpc?.close();
    await h?.close();
  });

  it("are refused everywhere once the workspace is deleted (operator --force), within the revocation bound", async () => {
    const mk = h.tenant.managementKey;
    const ws = (await api(h, "POST", "/workspaces", { key: mk, body: { name: `doomed-${Date.now()}` } })).json.data;
    const plain = (await api(h, "POST", "/keys", { key: mk, body: { name: "plain", workspace_id: ws.id } })).json.key;
    const mgmt = (await api(h, "POST", "/keys", { key: mk, body: { name: "mgmt", workspace_id: ws.id, is_management_key: true } })).json.key;
    expect((await api(h, "GET", "/key", { key: plain })).status).toBe(200);
    expect((await api(h, "GET", "/key", { key: mgmt })).status).toBe(200);

    // The operator's forced delete, through the same service the CLI uses (no bus to this core: the time bound applies).
    const service = createWorkspacesService(h.database.db);
    await service.delete({ type: "cli", organizationId: h.tenant.organizationId } as never, ws.id, { force: true });

    // Judged by when each probe started (what it read is the state of that moment), so a slow answer on a
    // loaded machine does not count against the bound.
    const bound = { timeoutMs: h.config.authCacheTtlMs + 2_000, byProbeStart: true };
    await waitFor("the deleted workspace's key refused (401)", async () => (await api(h, "GET", "/key", { key: plain })).status === 401, bound);
    await waitFor("the deleted workspace's management key refused (401)", async () => (await api(h, "GET", "/key", { key: mgmt })).status === 401, bound);

    const me = await api(h, "GET", "/key", { key: plain });
    expect(me.json.error.message).toMatch(/workspace has been deleted/);
    const chat = await api(h, "POST", "/chat/completions", { key: plain, body: { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }] } });
    expect(chat.status).toBe(401);
    const preset = await api(h, "POST", "/presets/from-deleted/chat/completions", { key: mgmt, body: { model: "openai/gpt-4o-mini", messages: [] } });
    expect(preset.status).toBe(401);
    const orgWide = await api(h, "POST", "/keys", { key: mgmt, body: { name: "escalation" } });
    expect(orgWide.status).toBe(401);
    expect((await api(h, "GET", "/workspaces", { key: mgmt })).status).toBe(401);

    const caller = await unary(identityGrpc, "GetCaller", {}, bearer(plain));
    expect(caller.error?.code).toBe(grpc.status.UNAUTHENTICATED);
    const created = await unary(keysGrpc, "CreateKey", { name: "escalation" }, bearer(mgmt));
    expect(created.error?.code).toBe(grpc.status.UNAUTHENTICATED);

    // The organization's other keys are untouched.
    expect((await api(h, "GET", "/key", { key: h.tenant.apiKey })).status).toBe(200);
    const keys = await h.database.db.apiKey.count({ where: { workspaceId: ws.id, name: "escalation" } });
    expect(keys).toBe(0);
  });

  it("are refused at once when the workspace is deleted through the API", async () => {
    const mk = h.tenant.managementKey;
    const ws = (await api(h, "POST", "/workspaces", { key: mk, body: { name: `api-del-${Date.now()}` } })).json.data;
    const plain = (await api(h, "POST", "/keys", { key: mk, body: { name: "plain", workspace_id: ws.id } })).json;
    expect((await api(h, "GET", "/key", { key: plain.key })).status).toBe(200);
    // Disabled, it still counts as active: the delete is refused.
    await api(h, "PATCH", `/keys/${plain.data.hash}`, { key: mk, body: { disabled: true } });
    expect((await api(h, "DELETE", `/workspaces/${ws.id}`, { key: mk })).status).toBe(409);
    await api(h, "DELETE", `/keys/${plain.data.hash}`, { key: mk });
    expect((await api(h, "DELETE", `/workspaces/${ws.id}`, { key: mk })).status).toBe(200);
    expect((await api(h, "DELETE", `/workspaces/${ws.id}`, { key: mk })).status).toBe(404);
  });

  it("never leaves an active key in a deleted workspace when DELETE races key creation (HTTP and gRPC)", async () => {
    const mk = h.tenant.managementKey;
    const workspaces = await Promise.all(
      Array.from({ length: PAIRS }, async (_, i) => (await api(h, "POST", "/workspaces", { key: mk, body: { name: `race-${Date.now()}-${i}` } })).json.data.id as string),
    );
    const statuses: string[] = [];
    await Promise.all(
      workspaces.map(async (id, i) => {
        if (i % 2 === 0) {
          const [create, del] = await Promise.all([
            api(h, "POST", "/keys", { key: mk, body: { name: `k${i}`, workspace_id: id } }),
            api(h, "DELETE", `/workspaces/${id}`, { key: mk }),
          ]);
          statuses.push(`http create ${create.status}`, `http delete ${del.status}`);
        } else {
          const [create, del] = await Promise.all([
            unary(keysGrpc, "CreateKey", { name: `k${i}`, workspace_id: id }, bearer(mk)),
            unary(wsGrpc, "DeleteWorkspace", { id }, bearer(mk)),
          ]);
          statuses.push(`grpc create ${create.error?.code ?? 0}`, `grpc delete ${del.error?.code ?? 0}`);
        }
      }),
    );
    const allowed = new Set([
      "http create 201",
      "http create 400",
      "http delete 200",
      "http delete 409",
      `grpc create 0`,
      `grpc create ${grpc.status.INVALID_ARGUMENT}`,
      `grpc delete 0`,
      `grpc delete ${grpc.status.FAILED_PRECONDITION}`,
    ]);
    expect(statuses.filter((s) => !allowed.has(s))).toEqual([]);

    const deleted = await h.database.db.workspace.findMany({ where: { id: { in: workspaces }, deletedAt: { not: null } }, select: { id: true } });
    const stranded = await h.database.db.apiKey.count({ where: { workspaceId: { in: deleted.map((w) => w.id) }, revokedAt: null } });
    expect(stranded).toBe(0);
    // Each pair ended one way or the other: the key exists and the workspace too, or the workspace is gone and no key.
    const keys = await h.database.db.apiKey.count({ where: { workspaceId: { in: workspaces }, revokedAt: null } });
    expect(keys + deleted.length).toBe(PAIRS);
  });
});
