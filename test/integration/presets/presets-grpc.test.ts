/**
 * PresetsService through a real @grpc/grpc-js client built from the .proto files, against the core's
 * gRPC listener: internal callers meet the same validation, auth and isolation as HTTP callers.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, grpc, grpcClient, unary } from "../../helpers/grpc.js";
import { startHarness, type Harness, type Tenant } from "../../helpers/harness.js";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** JSON → google.protobuf.Value in proto-loader's object form. */
function toValue(v: Json): Record<string, unknown> {
  if (v === null) return { nullValue: "NULL_VALUE" };
  if (typeof v === "number") return { numberValue: v };
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } };
  return { structValue: toStruct(v) };
}
function toStruct(o: { [k: string]: Json }): Record<string, unknown> {
  return { fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, toValue(v)])) };
}
function fromValue(v: any): Json {
  switch (v.kind) {
    case "nullValue": return null;
    case "numberValue": return v.numberValue;
    case "stringValue": return v.stringValue;
    case "boolValue": return v.boolValue;
    case "listValue": return (v.listValue.values ?? []).map(fromValue);
    default: return fromStruct(v.structValue);
  }
}
function fromStruct(s: any): { [k: string]: Json } {
  return Object.fromEntries(Object.entries(s?.fields ?? {}).map(([k, v]) => [k, fromValue(v)]));
}

describe.each(["sqlite", "postgresql"] as const)("PresetsService over gRPC (%s)", (provider) => {
  let h: Harness;
  let other: Tenant;
  let client: any;
  const call = (method: string, req: unknown, key?: string) => unary(client, method, req, key ? bearer(key) : new grpc.Metadata());

  beforeAll(async () => {
    h = await startHarness({ provider });
    other = await h.createTenant();
    client = grpcClient("portico/presets/v1/presets_service.proto", "portico.presets.v1.PresetsService", h.coreUrl);
  });
  afterAll(async () => {
    client?.close();
    await h?.close();
  });

  it("creates from the typed request", async () => {
    const { response, error } = await call(
      "CreatePresetVersion",
      {
        slug: "typed",
        chat_request: {
          messages: [
            { role: "system", content: { stringValue: "Be brief." } },
            { role: "user", content: { stringValue: "Hi" } },
          ],
          model: "openai/gpt-4o",
          temperature: 0.25,
          seed: "7",
          provider: { only: ["OpenAI"], sort: { stringValue: "price" } },
          plugins: [{ id: "fusion", max_tool_calls: 4, analysis_models: ["a", "b"] }],
          stream: false,
          user: "not stored",
        },
      },
      h.tenant.managementKey,
    );
    expect(error).toBeUndefined();
    expect(response.preset).toMatchObject({
      slug: "typed",
      name: "typed",
      status: "active",
      workspace_id: h.tenant.workspaceId,
      creator_user_id: h.tenant.userId,
      latest_version: 1,
    });
    expect(response.preset.designated_version_id).toBe(response.designated_version.id);
    expect(response.designated_version.version).toBe(1);
    expect(response.designated_version.system_prompt).toBe("Be brief.");
    expect(fromStruct(response.designated_version.config)).toEqual({
      model: "openai/gpt-4o",
      plugins: [{ id: "fusion", analysis_models: ["a", "b"], max_tool_calls: 4 }],
      provider: { only: ["OpenAI"], sort: "price" },
      seed: 7,
      temperature: 0.25,
    });
    expect(Number(response.preset.created_at.seconds)).toBeGreaterThan(1_600_000_000);
  });

  it("creates from the JSON form with values exactly as sent", async () => {
    const body: { [k: string]: Json } = {
      messages: [{ role: "user", content: "x" }],
      model: "m",
      stop: null,
      seed: 3,
      tools: [],
      metadata: { a: "b" },
    };
    const { response, error } = await call(
      "CreatePresetVersion",
      { slug: "typed", chat_request_json: toStruct(body) },
      h.tenant.managementKey,
    );
    expect(error).toBeUndefined();
    expect(response.designated_version.version).toBe(2);
    expect(fromStruct(response.designated_version.config)).toEqual({ model: "m", stop: null, seed: 3, tools: [] });
    // proto3 optional: absent (null in the public JSON) when there is no system or developer message.
    expect(response.designated_version.system_prompt ?? null).toBeNull();
    expect(Object.hasOwn(response.designated_version, "system_prompt") && response.designated_version.system_prompt !== undefined).toBe(false);
  });

  it.each<[string, Record<string, unknown>, string]>([
    ["JSON seed 1.5", { chat_request_json: toStruct({ messages: [{ role: "user", content: "x" }], seed: 1.5 }) }, "seed"],
    ["typed temperature 3", { chat_request: { messages: [{ role: "user", content: { stringValue: "x" } }], temperature: 3 } }, "temperature"],
    ["typed function name", { chat_request: { messages: [{ role: "user", content: { stringValue: "x" } }], tools: [{ type: "function", function: { name: "bad name" } }] } }, "tools[0].function.name"],
    ["typed provider data_collection", { chat_request: { messages: [{ role: "user", content: { stringValue: "x" } }], provider: { data_collection: "maybe" } } }, "provider.data_collection"],
    ["typed no messages", { chat_request: { model: "m" } }, "messages"],
    ["neither form", {}, "messages"],
  ])("rejects %s with INVALID_ARGUMENT", async (_n, req, field) => {
    const { error } = await call("CreatePresetVersion", { slug: "bad", ...req }, h.tenant.managementKey);
    expect(error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(error?.details).toContain(field);
  });

  it("applies the slug rule", async () => {
    const { error } = await call(
      "CreatePresetVersion",
      { slug: "x".repeat(101), chat_request_json: toStruct({ messages: [{ role: "user", content: "x" }] }) },
      h.tenant.managementKey,
    );
    expect(error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(error?.details).toContain("slug");
  });

  it("authenticates and requires a management key to create", async () => {
    const req = { slug: "auth", chat_request_json: toStruct({ messages: [{ role: "user", content: "x" }] }) };
    expect((await call("CreatePresetVersion", req)).error?.code).toBe(grpc.status.UNAUTHENTICATED);
    const denied = await call("CreatePresetVersion", req, h.tenant.apiKey);
    expect(denied.error?.code).toBe(grpc.status.PERMISSION_DENIED);
    expect(denied.error?.details).toBe("Only management keys can perform this operation");
    expect((await call("GetPreset", { slug: "typed" })).error?.code).toBe(grpc.status.UNAUTHENTICATED);
  });

  it("reads with any key and hides other workspaces", async () => {
    const got = await call("GetPreset", { slug: "typed" }, h.tenant.apiKey);
    expect(got.error).toBeUndefined();
    expect(got.response.designated_version.version).toBe(2);
    const list = await call("ListPresets", { offset: 0, limit: 0 }, h.tenant.apiKey);
    expect(list.response.total_count).toBeGreaterThanOrEqual(1);
    const versions = await call("ListPresetVersions", { slug: "typed", offset: 0, limit: 10 }, h.tenant.apiKey);
    expect(versions.response.versions.map((v: { version: number }) => v.version)).toEqual([1, 2]);
    expect(versions.response.total_count).toBe(2);
    const v1 = await call("GetPresetVersion", { slug: "typed", version: "1" }, h.tenant.apiKey);
    expect(v1.response.version.version).toBe(1);
    expect((await call("GetPresetVersion", { slug: "typed", version: "one" }, h.tenant.apiKey)).error?.code).toBe(
      grpc.status.INVALID_ARGUMENT,
    );
    expect((await call("ListPresets", { offset: 0, limit: 101 }, h.tenant.apiKey)).error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    for (const [method, req] of [
      ["GetPreset", { slug: "typed" }],
      ["ListPresetVersions", { slug: "typed" }],
      ["GetPresetVersion", { slug: "typed", version: "1" }],
    ] as const) {
      const res = await call(method, req, other.apiKey);
      expect(res.error?.code, method).toBe(grpc.status.NOT_FOUND);
    }
    const theirs = await call("ListPresets", {}, other.apiKey);
    expect(theirs.response.presets).toEqual([]);
    expect(theirs.response.total_count).toBe(0);
  });
});
