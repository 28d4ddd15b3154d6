import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { bearer, grpc, grpcClient, unary } from "../../helpers/grpc.js";

const DEPARTED =
  "This API key's creator is no longer a member of the organization. Ask an organization admin to reassign the key to an active member.";

describe.each(["sqlite", "postgresql"] as const)("authentication in the core (%s)", (provider) => {
  let h: Harness;
  let identityClient: any;
  const keys: Record<string, string> = {};

  beforeAll(async () => {
    h = await startHarness({ provider });
    identityClient = grpcClient("portico/identity/v1/identity_service.proto", "portico.identity.v1.IdentityService", h.coreUrl);
    const t = h.tenant;
    const mk = async (name: string) =>
      (await h.identity.createApiKey({
        organizationId: t.organizationId,
        workspaceId: t.workspaceId,
        creatorUserId: t.userId,
        name,
        isManagement: false,
      })).plaintext;
    keys.revoked = await mk("to-revoke");
    await h.identity.revokeApiKey((await h.identity.listApiKeys(t.organizationId)).find((k) => k.name === "to-revoke")!.id);
    keys.disabled = await mk("to-disable");
    await h.identity.setApiKeyDisabled((await h.identity.listApiKeys(t.organizationId)).find((k) => k.name === "to-disable")!.id, true);
    // A second member creates a key, then leaves the organization.
    const leaver = await h.identity.findOrCreateUser({ email: `leaver@${t.organizationId}.invalid`, name: "leaver" });
    await h.identity.addMember(t.organizationId, leaver.id);
    keys.departed = (await h.identity.createApiKey({
      organizationId: t.organizationId,
      workspaceId: t.workspaceId,
      creatorUserId: leaver.id,
      name: "departed",
      isManagement: true,
    })).plaintext;
    await h.identity.removeMember(t.organizationId, leaver.id);
  });
  afterAll(async () => {
    identityClient?.close();
    await h?.close();
  });

  it("accepts a valid key over HTTP and describes it without revealing it", async () => {
    const res = await api(h, "GET", "/key", { key: h.tenant.managementKey });
    expect(res.status).toBe(200);
    expect(res.json.data).toMatchObject({
      is_management_key: true,
      organization_id: h.tenant.organizationId,
      workspace_id: h.tenant.workspaceId,
      hash: h.tenant.managementKeyHash,
    });
    expect(res.json.data.label).toMatch(/^pk-v1-[0-9a-f]{3}\.\.\.[0-9a-f]{4}$/);
    expect(res.text).not.toContain(h.tenant.managementKey);
  });

  it.each([
    ["missing", undefined, 401, "Missing Authentication header"],
    ["unknown", "pk-v1-" + "0".repeat(64), 401, "Invalid or missing API key"],
    ["malformed", "not-a-key", 401, "Invalid or missing API key"],
  ])("refuses a %s key with 401 in the envelope", async (_name, key, status, message) => {
    const res = await api(h, "GET", "/key", key ? { key } : {});
    expect(res.status).toBe(status);
    expect(res.json).toEqual({ error: { code: status, message } });
  });

  it("refuses revoked and disabled keys with 401", async () => {
    for (const key of [keys.revoked!, keys.disabled!]) {
      const res = await api(h, "GET", "/key", { key });
      expect(res.status).toBe(401);
      expect(res.json.error.code).toBe(401);
    }
  });

  it("answers 403 with the description's message when the key's creator left the organization", async () => {
    const res = await api(h, "GET", "/key", { key: keys.departed! });
    expect(res.status).toBe(403);
    expect(res.json).toEqual({ error: { code: 403, message: DEPARTED } });
  });

  it("applies the same checks to @grpc/grpc-js callers", async () => {
    const ok = await unary(identityClient, "GetCaller", {}, bearer(h.tenant.apiKey));
    expect(ok.error).toBeUndefined();
    expect(ok.response).toMatchObject({ organization_id: h.tenant.organizationId, is_management_key: false });

    const missing = await unary(identityClient, "GetCaller", {});
    expect(missing.error?.code).toBe(grpc.status.UNAUTHENTICATED);
    const revoked = await unary(identityClient, "GetCaller", {}, bearer(keys.revoked!));
    expect(revoked.error?.code).toBe(grpc.status.UNAUTHENTICATED);
    const departed = await unary(identityClient, "GetCaller", {}, bearer(keys.departed!));
    expect(departed.error?.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(departed.error?.details).toBe(DEPARTED);
  });

  it("never writes a key to the logs", async () => {
    await api(h, "GET", "/key", { key: h.tenant.managementKey });
    await api(h, "GET", "/key", { key: keys.revoked! });
    const all = h.logs.join("\n");
    for (const k of [h.tenant.managementKey, h.tenant.apiKey, ...Object.values(keys)]) expect(all).not.toContain(k);
  });
});
