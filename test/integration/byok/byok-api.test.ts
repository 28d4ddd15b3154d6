import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OpenRouter } from "@openrouter/sdk";
import { api, startHarness, type Harness, type Tenant } from "../../helpers/harness.js";
import { bearer, grpcClient, unary, grpc } from "../../helpers/grpc.js";
import { CREDENTIAL_KEYS, UNNAMED_CREDENTIAL_KEYS, canaryKey, credentialKeysFor, harnessKeyring, storedKey } from "./byok-helpers.js";
import type { Keyring } from "../../../src/core/byok/keyring.js";

const MANAGEMENT_ONLY = "Only management keys can perform this operation";
const hex64 = () => randomBytes(32).toString("hex");

describe.each(["sqlite", "postgresql"] as const)("BYOK credentials (%s)", (provider) => {
  let h: Harness;
  let t: Tenant;
  let other: Tenant;
  let keyring: Keyring;
  let grpcByok: any;

  const create = (body: unknown, key = t.managementKey) => api(h, "POST", "/byok", { key, body });

  beforeAll(async () => {
    h = await startHarness({ provider });
    t = h.tenant;
    other = await h.createTenant();
    keyring = harnessKeyring(h);
    grpcByok = grpcClient("portico/byok/v1/byok_service.proto", "portico.byok.v1.ByokService", h.coreUrl);
  });
  afterAll(async () => {
    grpcByok?.close();
    await h?.close();
  });

  describe("create", () => {
    it("answers 200 with exactly the description's fields plus declared_zdr, and a masked label", async () => {
      const key = canaryKey("sk-proj-");
      const res = await create({ key, provider: "openai" });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      const c = res.json.data;
      expect(Object.keys(c).sort()).toEqual(UNNAMED_CREDENTIAL_KEYS);
      expect(c).not.toHaveProperty("name");
      expect(c).toMatchObject({
        provider: "openai",
        label: `sk-proj-...${key.slice(-4)}`,
        workspace_id: t.workspaceId,
        allowed_api_key_hashes: null,
        allowed_models: null,
        allowed_user_ids: null,
        declared_zdr: null,
        disabled: false,
        is_required: false,
        is_fallback: false,
        is_byok_only: false,
      });
      expect(c.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(new Date(c.created_at).toISOString()).toBe(c.created_at);
      expect(Number.isInteger(c.sort_order)).toBe(true);
      expect(res.text).not.toContain(key);
      // Stored encrypted, decryptable only through the decrypt function.
      expect(await storedKey(h, keyring, c.id)).toBe(key);
      const row = await h.database.db.byokCredential.findUniqueOrThrow({ where: { id: c.id } });
      expect(Buffer.from(row.ciphertext!).includes(Buffer.from(key))).toBe(false);
      expect(row.keyId).toBe(keyring.primaryId);
    });

    it("stores every optional field as given", async () => {
      const ws = await h.identity.createWorkspace({ organizationId: t.organizationId, name: `ws ${randomUUID()}` });
      const body = {
        key: canaryKey("sk-ant-"),
        provider: "anthropic",
        name: "Team key",
        workspace_id: ws.id,
        allowed_api_key_hashes: [t.apiKeyHash, t.managementKeyHash],
        allowed_models: ["anthropic/claude-sonnet-4", "anthropic/claude-haiku"],
        allowed_user_ids: ["user-1"],
        disabled: true,
        is_required: true,
        is_byok_only: true,
        declared_zdr: true,
      };
      const res = await create(body);
      expect(res.status).toBe(200);
      expect(res.json.data).toMatchObject({
        name: "Team key",
        workspace_id: ws.id,
        allowed_api_key_hashes: body.allowed_api_key_hashes,
        allowed_models: body.allowed_models,
        allowed_user_ids: ["user-1"],
        disabled: true,
        is_required: true,
        is_fallback: false,
        is_byok_only: true,
        declared_zdr: true,
        sort_order: 0,
        label: `sk-ant-...${body.key.slice(-4)}`,
      });
    });

    it("assigns sort_order as the next number within workspace and provider", async () => {
      const ws = await h.identity.createWorkspace({ organizationId: t.organizationId, name: `ws ${randomUUID()}` });
      const mk = async (p: string, w = ws.id) => (await create({ key: canaryKey(), provider: p, workspace_id: w })).json.data.sort_order;
      expect(await mk("groq")).toBe(0);
      expect(await mk("groq")).toBe(1);
      expect(await mk("mistral")).toBe(0);
      expect(await mk("groq")).toBe(2);
      const concurrent = await Promise.all(Array.from({ length: 6 }, () => mk("xai")));
      expect(concurrent.sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5]);
    });

    it("accepts the limits exactly: 32 KiB key, 255-character name, 100 hashes/models/users", async () => {
      const hashes = [t.apiKeyHash];
      const res = await create({
        key: "k".repeat(32 * 1024),
        provider: "google-ai-studio",
        name: "n".repeat(255),
        allowed_api_key_hashes: hashes,
        allowed_models: Array.from({ length: 100 }, (_, i) => `m/${i}`),
        allowed_user_ids: Array.from({ length: 100 }, (_, i) => `u${i}`),
      });
      expect(res.status).toBe(200);
      expect(res.json.data.label).toBe("...kkkk");
      expect((await create({ key: "short", provider: "anthropic" })).json.data.label).toBe("***");
    });

    const invalid: Array<[string, () => Record<string, unknown>, string]> = [
      ["empty key", () => ({ key: "", provider: "openai" }), "key"],
      ["blank key", () => ({ key: "   ", provider: "openai" }), "key"],
      ["key over 32 KiB", () => ({ key: "k".repeat(32 * 1024 + 1), provider: "openai" }), "key"],
      ["unknown provider", () => ({ key: canaryKey(), provider: "not-a-provider" }), "provider"],
      ["upper-case provider", () => ({ key: canaryKey(), provider: "OpenAI" }), "provider"],
      ["empty provider", () => ({ key: canaryKey(), provider: "" }), "provider"],
      ["name over 255", () => ({ key: canaryKey(), provider: "openai", name: "n".repeat(256) }), "name"],
      ["unknown workspace", () => ({ key: canaryKey(), provider: "openai", workspace_id: randomUUID() }), "workspace_id"],
      ["empty hash list", () => ({ key: canaryKey(), provider: "openai", allowed_api_key_hashes: [] }), "allowed_api_key_hashes"],
      ["101 hashes", () => ({ key: canaryKey(), provider: "openai", allowed_api_key_hashes: Array.from({ length: 101 }, () => t.apiKeyHash) }), "allowed_api_key_hashes"],
      ["upper-case hash", () => ({ key: canaryKey(), provider: "openai", allowed_api_key_hashes: [t.apiKeyHash.toUpperCase()] }), "allowed_api_key_hashes"],
      ["short hash", () => ({ key: canaryKey(), provider: "openai", allowed_api_key_hashes: ["abc"] }), "allowed_api_key_hashes"],
      ["101 models", () => ({ key: canaryKey(), provider: "openai", allowed_models: Array.from({ length: 101 }, (_, i) => `m${i}`) }), "allowed_models"],
      ["101 user ids", () => ({ key: canaryKey(), provider: "openai", allowed_user_ids: Array.from({ length: 101 }, (_, i) => `u${i}`) }), "allowed_user_ids"],
      ["empty model entry", () => ({ key: canaryKey(), provider: "openai", allowed_models: [""] }), "allowed_models"],
      ["NUL in name", () => ({ key: canaryKey(), provider: "openai", name: "a\u0000b" }), "name"],
      ["NUL in a model entry", () => ({ key: canaryKey(), provider: "openai", allowed_models: ["m\u0000"] }), "allowed_models"],
      ["NUL in a user id", () => ({ key: canaryKey(), provider: "openai", allowed_user_ids: ["u\u0000"] }), "allowed_user_ids"],
      ["NUL in workspace_id", () => ({ key: canaryKey(), provider: "openai", workspace_id: "w\u0000" }), "workspace_id"],
      ["is_fallback with is_byok_only", () => ({ key: canaryKey(), provider: "openai", is_fallback: true, is_byok_only: true }), "is_byok_only"],
      ["is_required with is_fallback", () => ({ key: canaryKey(), provider: "openai", is_fallback: true, is_required: true }), "is_required"],
    ];
    it.each(invalid)("400 naming the field: %s", async (_name, body, field) => {
      const before = await h.database.db.byokCredential.count();
      const res = await create(body());
      expect(res.status).toBe(400);
      expect(res.json.error.code).toBe(400);
      expect(res.json.error.metadata).toMatchObject({ reason: "bad_request", field });
      expect(res.json.error.message).toContain(field);
      expect(await h.database.db.byokCredential.count()).toBe(before);
    });

    const badTypes: Array<[string, Record<string, unknown>, string]> = [
      ["missing key", { provider: "openai" }, "key"],
      ["missing provider", { key: "sk-abc" }, "provider"],
      ["numeric key", { key: 123, provider: "openai" }, "key"],
      ["string flag", { key: "sk-abc", provider: "openai", disabled: "yes" }, "disabled"],
      ["hash list of numbers", { key: "sk-abc", provider: "openai", allowed_models: [1] }, "allowed_models"],
    ];
    it.each(badTypes)("400 for wrong JSON types: %s", async (_name, body, field) => {
      const res = await create(body);
      expect(res.status).toBe(400);
      expect(res.json.error.message).toContain(field);
    });

    it("400 for a body that is not a JSON object", async () => {
      for (const rawBody of ["[]", '"sk-abc"', "{not json"]) {
        const res = await api(h, "POST", "/byok", { key: t.managementKey, rawBody, headers: { "content-type": "application/json" } });
        expect(res.status).toBe(400);
        expect(res.json.error.code).toBe(400);
      }
    });

    it("gives byte-identical 400s for another tenant's key hash and a made-up one", async () => {
      const foreign = await create({ key: canaryKey(), provider: "openai", allowed_api_key_hashes: [t.apiKeyHash, other.apiKeyHash] });
      const random = await create({ key: canaryKey(), provider: "openai", allowed_api_key_hashes: [t.apiKeyHash, hex64()] });
      expect(foreign.status).toBe(400);
      expect(foreign.text).toBe(random.text);
      expect(foreign.json.error.metadata.field).toBe("allowed_api_key_hashes");
    });

    it("gives byte-identical 400s for another tenant's workspace, a deleted one and a missing one", async () => {
      const deleted = await h.identity.createWorkspace({ organizationId: t.organizationId, name: `gone ${randomUUID()}` });
      await h.identity.deleteWorkspace(deleted.id);
      const bodies = await Promise.all(
        [other.workspaceId, deleted.id, randomUUID(), "not-a-uuid"].map(async (w) => (await create({ key: canaryKey(), provider: "openai", workspace_id: w })).text),
      );
      expect(new Set(bodies).size).toBe(1);
      expect(JSON.parse(bodies[0]!).error.metadata.field).toBe("workspace_id");
    });

    it("asks for workspace_id when the default workspace was deleted (create and list)", async () => {
      // A management key of a second workspace: a key of the deleted workspace itself is refused outright (401).
      const lone = await h.createTenant();
      const second = await h.identity.createWorkspace({ organizationId: lone.organizationId, name: "second" });
      const { plaintext: mk } = await h.identity.createApiKey({
        organizationId: lone.organizationId,
        workspaceId: second.id,
        creatorUserId: lone.userId,
        name: "second management",
        isManagement: true,
      });
      await h.identity.deleteWorkspace(lone.workspaceId);
      expect((await create({ key: canaryKey(), provider: "openai" }, lone.managementKey)).status).toBe(401);
      const res = await create({ key: canaryKey(), provider: "openai" }, mk);
      expect(res.status).toBe(400);
      expect(res.json.error.metadata.field).toBe("workspace_id");
      expect(res.json.error.message).toMatch(/default workspace was deleted; pass workspace_id/);
      const listed = await api(h, "GET", "/byok", { key: mk });
      expect(listed.status).toBe(400);
      expect(listed.json.error.metadata.field).toBe("workspace_id");
      const ok = await create({ key: canaryKey(), provider: "openai", workspace_id: second.id }, mk);
      expect(ok.status).toBe(200);
    });
  });

  describe("list, get, update, delete", () => {
    let ws: string;
    const ids: string[] = [];
    beforeAll(async () => {
      ws = (await h.identity.createWorkspace({ organizationId: t.organizationId, name: `list ${randomUUID()}` })).id;
      for (const p of ["openai", "openai", "groq", "openai", "deepseek"]) {
        const res = await create({ key: canaryKey(), provider: p, workspace_id: ws });
        ids.push(res.json.data.id);
      }
    });

    it("lists a workspace with offset, limit, provider filter and total_count", async () => {
      const all = await api(h, "GET", `/byok?workspace_id=${ws}`, { key: t.managementKey });
      expect(all.status).toBe(200);
      expect(all.json.total_count).toBe(5);
      expect(all.json.data.map((c: any) => c.id)).toEqual(ids);
      for (const c of all.json.data) {
        expect(Object.keys(c).sort()).toEqual(credentialKeysFor(c));
        if ("name" in c) expect(typeof c.name).toBe("string");
      }
      const page = await api(h, "GET", `/byok?workspace_id=${ws}&offset=1&limit=2`, { key: t.managementKey });
      expect(page.json.data.map((c: any) => c.id)).toEqual(ids.slice(1, 3));
      expect(page.json.total_count).toBe(5);
      const openai = await api(h, "GET", `/byok?workspace_id=${ws}&provider=openai&limit=1`, { key: t.managementKey });
      expect(openai.json.total_count).toBe(3);
      expect(openai.json.data).toHaveLength(1);
      const defaultWs = await api(h, "GET", "/byok?limit=100", { key: t.managementKey });
      expect(defaultWs.json.data.every((c: any) => c.workspace_id === t.workspaceId)).toBe(true);
    });

    it.each([
      ["limit=0", "limit"],
      ["limit=101", "limit"],
      ["offset=-1", "offset"],
      ["provider=nope", "provider"],
    ])("list answers 400 for %s", async (q, field) => {
      const res = await api(h, "GET", `/byok?${q}`, { key: t.managementKey });
      expect(res.status).toBe(400);
      expect(res.json.error.metadata.field).toBe(field);
    });

    it("never shows another tenant's credentials: list, get, update, delete all look missing", async () => {
      const foreignList = await api(h, "GET", `/byok?workspace_id=${ws}`, { key: other.managementKey });
      const missingList = await api(h, "GET", `/byok?workspace_id=${randomUUID()}`, { key: other.managementKey });
      expect(foreignList.status).toBe(400);
      expect(foreignList.text).toBe(missingList.text);
      const id = ids[0]!;
      for (const [method, body] of [["GET", undefined], ["PATCH", { name: "stolen" }], ["DELETE", undefined]] as const) {
        const foreign = await api(h, method, `/byok/${id}`, { key: other.managementKey, body });
        const missing = await api(h, method, `/byok/${randomUUID()}`, { key: other.managementKey, body });
        expect(foreign.status).toBe(404);
        expect(foreign.text).toBe(missing.text);
      }
      const still = await api(h, "GET", `/byok/${id}`, { key: t.managementKey });
      expect(still.status).toBe(200);
      expect(still.json.data).not.toHaveProperty("name");
      expect(await storedKey(h, keyring, id)).toMatch(/CANARY/);
    });

    it("get returns one credential", async () => {
      const res = await api(h, "GET", `/byok/${ids[2]}`, { key: t.managementKey });
      expect(res.status).toBe(200);
      expect(res.json.data).toMatchObject({ id: ids[2], provider: "groq", workspace_id: ws });
      expect((await api(h, "GET", "/byok/not-a-uuid", { key: t.managementKey })).status).toBe(404);
    });

    it("update changes only what is named, null clears, a new key rotates material and label", async () => {
      const id = ids[1]!;
      const before = await h.database.db.byokCredential.findUniqueOrThrow({ where: { id } });
      const res = await api(h, "PATCH", `/byok/${id}`, {
        key: t.managementKey,
        body: { name: "renamed", allowed_models: ["openai/gpt-4o"], declared_zdr: false, is_fallback: true },
      });
      expect(res.status).toBe(200);
      expect(res.json.data).toMatchObject({ name: "renamed", allowed_models: ["openai/gpt-4o"], declared_zdr: false, is_fallback: true, label: before.label });
      const unchanged = await h.database.db.byokCredential.findUniqueOrThrow({ where: { id } });
      expect(Buffer.from(unchanged.ciphertext!).equals(Buffer.from(before.ciphertext!))).toBe(true);

      const cleared = await api(h, "PATCH", `/byok/${id}`, { key: t.managementKey, body: { name: null, allowed_models: null, declared_zdr: null } });
      expect(cleared.json.data).toMatchObject({ allowed_models: null, declared_zdr: null, is_fallback: true });
      expect(cleared.json.data).not.toHaveProperty("name");

      const newKey = canaryKey("xai-");
      const rotated = await api(h, "PATCH", `/byok/${id}`, { key: t.managementKey, body: { key: newKey } });
      expect(rotated.status).toBe(200);
      expect(rotated.json.data.label).toBe(`xai-...${newKey.slice(-4)}`);
      expect(rotated.text).not.toContain(newKey);
      expect(await storedKey(h, keyring, id)).toBe(newKey);
      const after = await h.database.db.byokCredential.findUniqueOrThrow({ where: { id } });
      expect(Buffer.from(after.ciphertext!).equals(Buffer.from(before.ciphertext!))).toBe(false);

      const empty = await api(h, "PATCH", `/byok/${id}`, { key: t.managementKey, body: {} });
      expect(empty.status).toBe(200);
      expect(empty.json.data).toEqual(rotated.json.data);
      const bodiless = await api(h, "PATCH", `/byok/${id}`, { key: t.managementKey });
      expect(bodiless.status).toBe(200);
      expect(bodiless.json.data).toEqual(rotated.json.data);
    });

    it.each([
      [{ is_byok_only: true }, "is_byok_only"],
      [{ is_required: true }, "is_required"],
      [{ key: "" }, "key"],
      [{ name: "n".repeat(256) }, "name"],
      [{ allowed_api_key_hashes: [] }, "allowed_api_key_hashes"],
      [{ allowed_api_key_hashes: [hex64()] }, "allowed_api_key_hashes"],
      [{ allowed_user_ids: Array.from({ length: 101 }, (_, i) => `u${i}`) }, "allowed_user_ids"],
    ])("update validates against the merged state: %j", async (body, field) => {
      const id = ids[1]!; // is_fallback is true from the previous test
      const res = await api(h, "PATCH", `/byok/${id}`, { key: t.managementKey, body });
      expect(res.status).toBe(400);
      expect(res.json.error.metadata.field).toBe(field);
    });

    it("answers 404 (not 500) for an id holding a NUL character, and 400 for such a workspace_id filter", async () => {
      for (const [method, body] of [["GET", undefined], ["PATCH", { name: "x" }], ["DELETE", undefined]] as const) {
        const res = await api(h, method, "/byok/a%00b", { key: t.managementKey, body });
        expect(res.status, method).toBe(404);
      }
      const list = await api(h, "GET", "/byok?workspace_id=a%00b", { key: t.managementKey });
      expect(list.status).toBe(400);
      expect(list.json.error.metadata.field).toBe("workspace_id");
    });

    it("delete wipes the key material, answers {deleted: true}, and the credential is gone", async () => {
      const id = ids[4]!;
      const res = await api(h, "DELETE", `/byok/${id}`, { key: t.managementKey });
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ deleted: true });
      const row = await h.database.db.byokCredential.findUniqueOrThrow({ where: { id } });
      expect(row.ciphertext).toBeNull();
      expect(row.keyId).toBeNull();
      expect(row.deletedAt).not.toBeNull();
      expect((await api(h, "GET", `/byok/${id}`, { key: t.managementKey })).status).toBe(404);
      expect((await api(h, "DELETE", `/byok/${id}`, { key: t.managementKey })).status).toBe(404);
      expect((await api(h, "PATCH", `/byok/${id}`, { key: t.managementKey, body: { name: "x" } })).status).toBe(404);
      const list = await api(h, "GET", `/byok?workspace_id=${ws}`, { key: t.managementKey });
      expect(list.json.data.map((c: any) => c.id)).not.toContain(id);
      await expect(storedKey(h, keyring, id)).rejects.toThrow(/unusable: the credential was deleted/);
    });
  });

  describe("authentication", () => {
    const ops = (id: string): Array<[string, string, unknown]> => [
      ["POST", "/byok", { key: "sk-abc", provider: "openai" }],
      ["GET", "/byok", undefined],
      ["GET", `/byok/${id}`, undefined],
      ["PATCH", `/byok/${id}`, { name: "x" }],
      ["DELETE", `/byok/${id}`, undefined],
    ];

    it("401 without a key or with an unknown key, 403 for a non-management key, on all five operations", async () => {
      const id = (await create({ key: canaryKey(), provider: "openai" })).json.data.id;
      for (const [method, path, body] of ops(id)) {
        const none = await api(h, method, path, { body });
        expect(none.status, `${method} ${path}`).toBe(401);
        expect(none.json.error.code).toBe(401);
        const bad = await api(h, method, path, { body, key: `pk-v1-${hex64()}` });
        expect(bad.status).toBe(401);
        const ordinary = await api(h, method, path, { body, key: t.apiKey });
        expect(ordinary.status).toBe(403);
        expect(ordinary.json).toEqual({ error: { code: 403, message: MANAGEMENT_ONLY } });
      }
      // Nothing changed.
      expect((await api(h, "GET", `/byok/${id}`, { key: t.managementKey })).json.data).not.toHaveProperty("name");
    });

    it("403 comes before validation: a non-management key learns nothing from an invalid body", async () => {
      const res = await create({ key: "", provider: "nope" }, t.apiKey);
      expect(res.status).toBe(403);
    });
  });

  describe("gRPC (@grpc/grpc-js)", () => {
    it("creates, lists, gets, updates with a field mask and deletes; no response carries the key", async () => {
      const key = canaryKey("gsk_");
      const md = bearer(t.managementKey);
      const created = await unary(grpcByok, "CreateByokCredential", { key, provider: "groq", name: "grpc" }, md);
      expect(created.error).toBeUndefined();
      const c = created.response.credential;
      expect(c).toMatchObject({ provider: "groq", name: "grpc", label: `gsk_...${key.slice(-4)}`, workspace_id: t.workspaceId });
      expect(c.allowed_models).toBeNull();
      expect(JSON.stringify(created.response)).not.toContain(key);
      expect(Object.keys(c)).not.toContain("key");

      const listed = await unary(grpcByok, "ListByokCredentials", { limit: 100, provider: "groq" }, md);
      expect(listed.response.credentials.map((x: any) => x.id)).toContain(c.id);
      expect(listed.response.total_count).toBeGreaterThanOrEqual(1);

      const got = await unary(grpcByok, "GetByokCredential", { id: c.id }, md);
      expect(got.response.credential.id).toBe(c.id);

      const updated = await unary(
        grpcByok,
        "UpdateByokCredential",
        { id: c.id, allowed_models: { values: ["groq/llama"] }, disabled: true, update_mask: { paths: ["allowed_models", "disabled", "name"] } },
        md,
      );
      expect(updated.error).toBeUndefined();
      expect(updated.response.credential).toMatchObject({ disabled: true, allowed_models: { values: ["groq/llama"] } });
      expect(updated.response.credential.name ?? null).toBeNull();

      const deleted = await unary(grpcByok, "DeleteByokCredential", { id: c.id }, md);
      expect(deleted.response).toEqual({ deleted: true });
      const gone = await unary(grpcByok, "GetByokCredential", { id: c.id }, md);
      expect(gone.error?.code).toBe(grpc.status.NOT_FOUND);
    });

    it("maps validation, 401 and 403 to gRPC status codes", async () => {
      const invalid = await unary(grpcByok, "CreateByokCredential", { key: "sk-x", provider: "is_fallback", is_fallback: true, is_byok_only: true }, bearer(t.managementKey));
      expect(invalid.error?.code).toBe(grpc.status.INVALID_ARGUMENT);
      const flags = await unary(grpcByok, "CreateByokCredential", { key: "sk-x", provider: "openai", is_fallback: true, is_required: true }, bearer(t.managementKey));
      expect(flags.error?.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(flags.error?.details).toMatch(/is_required/);
      const badMask = await unary(grpcByok, "UpdateByokCredential", { id: randomUUID(), update_mask: { paths: ["provider"] } }, bearer(t.managementKey));
      expect(badMask.error?.code).toBe(grpc.status.INVALID_ARGUMENT);
      const none = await unary(grpcByok, "ListByokCredentials", {});
      expect(none.error?.code).toBe(grpc.status.UNAUTHENTICATED);
      const ordinary = await unary(grpcByok, "ListByokCredentials", {}, bearer(t.apiKey));
      expect(ordinary.error?.code).toBe(grpc.status.PERMISSION_DENIED);
      expect(ordinary.error?.details).toBe(MANAGEMENT_ONLY);
      const foreign = await unary(grpcByok, "GetByokCredential", { id: randomUUID() }, bearer(other.managementKey));
      expect(foreign.error?.code).toBe(grpc.status.NOT_FOUND);
    });
  });

  describe("@openrouter/sdk 1.3.19", () => {
    const sdk = (key: string) => new OpenRouter({ apiKey: key, serverURL: `${h.baseUrl}/api/v1`, retryConfig: { strategy: "none" } });

    it("reads list, get, update and delete responses without error", async () => {
      const key = canaryKey("sk-");
      const id = (await create({ key, provider: "deepseek", name: "sdk" })).json.data.id;
      const client = sdk(t.managementKey);
      const got = await client.byok.get({ id });
      expect(got.data).toMatchObject({ id, provider: "deepseek", name: "sdk", declaredZdr: null, sortOrder: expect.any(Number) });
      const page = await client.byok.list({ provider: "deepseek", limit: 100 });
      expect(page.result.data.map((c) => c.id)).toContain(id);
      expect(page.result.totalCount).toBeGreaterThanOrEqual(1);
      const updated = await client.byok.update({ id, updateBYOKKeyRequest: { name: "sdk2", allowedModels: ["deepseek/chat"], declaredZdr: true } });
      expect(updated.data).toMatchObject({ name: "sdk2", allowedModels: ["deepseek/chat"], declaredZdr: true });
      const rotated = await client.byok.update({ id, updateBYOKKeyRequest: { key: "sk-" + "r".repeat(40) } });
      expect(rotated.data.label).toBe("sk-...rrrr");
      const deleted = await client.byok.delete({ id });
      expect(deleted.deleted).toBe(true);
    });

    it("create answers 200 as the description says, which the SDK (expecting 201) rejects", async () => {
      await expect(sdk(t.managementKey).byok.create({ createBYOKKeyRequest: { key: canaryKey(), provider: "openai" } })).rejects.toThrow(/Unexpected Status/);
      // The credential was created all the same.
      const list = await api(h, "GET", "/byok?provider=openai&limit=100", { key: t.managementKey });
      expect(list.status).toBe(200);
    });

    it("maps 403 to the SDK's typed error", async () => {
      await expect(sdk(t.apiKey).byok.list({})).rejects.toMatchObject({ statusCode: 403 });
    });
  });
});
