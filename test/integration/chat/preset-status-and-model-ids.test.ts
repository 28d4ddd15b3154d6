/**
 * Two refusals of POST /api/v1/chat/completions and ChatService (HTTP and grpc-js, SQLite and PostgreSQL):
 *
 * - a preset whose status is `disabled` or `archived` serves no request: naming it (`@preset/<slug>`, with a
 *   version or not, or the `preset` field) is a 409 `conflict` naming the preset and the field, before any
 *   upstream call, and it is left out of GET /models; set back to `active` it serves again at once;
 * - a model id without a provider prefix (`gpt-4o-mini`), or whose provider is served by no adapter, is a 400
 *   naming `model` (or `models[i]`) that says ids are `<provider>/<model>`, not "no credential may serve".
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { bearer, grpc, grpcClient } from "../../helpers/grpc.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";

/** google.protobuf.Struct as proto-loader represents it. */
const value = (v: unknown): unknown =>
  typeof v === "string" ? { stringValue: v }
  : typeof v === "number" ? { numberValue: v }
  : typeof v === "boolean" ? { boolValue: v }
  : Array.isArray(v) ? { listValue: { values: v.map(value) } }
  : { structValue: struct(v as Record<string, unknown>) };
const struct = (o: Record<string, unknown>): unknown => ({ fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, value(v)])) });

const hi = [{ role: "user", content: "hi" }];

describe.each(["sqlite", "postgresql"] as const)("preset status and model ids in chat completions (%s)", (provider) => {
  let h: Harness;
  let groq: FakeUpstream;
  let chatRpc: any;

  const chat = (body: Record<string, unknown>) => api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body });
  const rpc = (body: Record<string, unknown>, method: "CreateChatCompletion" | "StreamChatCompletion" = "CreateChatCompletion") =>
    new Promise<grpc.ServiceError | null>((resolve) => {
      if (method === "CreateChatCompletion") {
        chatRpc.CreateChatCompletion({ body: struct(body) }, bearer(h.tenant.apiKey), (err: grpc.ServiceError | null) => resolve(err));
        return;
      }
      const call = chatRpc.StreamChatCompletion({ body: struct(body) }, bearer(h.tenant.apiKey));
      call.on("data", () => {});
      call.on("error", (err: grpc.ServiceError) => resolve(err));
      call.on("end", () => resolve(null));
    });
  const setStatus = async (slug: string, status: string) => {
    const res = await api(h, "PATCH", `/presets/${slug}`, { key: h.tenant.managementKey, body: { status } });
    expect(res.status, res.text).toBe(200);
    expect(res.json.data.status).toBe(status);
  };
  const modelIds = async () => {
    const res = await api(h, "GET", "/models", { key: h.tenant.apiKey });
    expect(res.status, res.text).toBe(200);
    return res.json.data.map((m: { id: string }) => m.id) as string[];
  };

  beforeAll(async () => {
    groq = await startFakeOpenAI();
    h = await startHarness({ provider, env: { PORTICO_PROVIDER_GROQ_BASE_URL: `${groq.url}/v1` } });
    expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "groq", key: "gsk-test-groq" } })).status).toBe(200);
    for (const slug of ["brief", "kept"]) {
      const res = await api(h, "POST", `/presets/${slug}/chat/completions`, {
        key: h.tenant.managementKey,
        body: { model: "groq/llama-3.3-70b", messages: [{ role: "system", content: "Be brief." }, ...hi] },
      });
      expect(res.status, res.text).toBe(200);
    }
    chatRpc = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
  });
  afterAll(async () => {
    chatRpc?.close();
    await h?.close();
    await groq?.close();
  });

  it("an active preset serves requests and is listed in /models", async () => {
    const res = await chat({ model: "@preset/brief", messages: hi });
    expect(res.status, res.text).toBe(200);
    expect(await modelIds()).toEqual(expect.arrayContaining(["@preset/brief", "@preset/kept"]));
  });

  for (const status of ["disabled", "archived"] as const) {
    it(`a ${status} preset is refused with 409 naming it (HTTP, streamed or not, and gRPC), and left out of /models`, async () => {
      await setStatus("brief", status);
      const before = groq.requests.length;
      for (const [body, field] of [
        [{ model: "@preset/brief", messages: hi }, "model"],
        [{ model: "@preset/brief@1", messages: hi }, "model"],
        [{ model: "@preset/brief", messages: hi, stream: true }, "model"],
        [{ model: "groq/llama-3.3-70b", preset: "brief", messages: hi }, "preset"],
      ] as const) {
        const res = await chat(body);
        expect(res.status, res.text).toBe(409);
        expect(res.json.error.metadata).toEqual({ reason: "conflict", retryable: false, field });
        expect(res.json.error.message).toContain(`Preset "brief" is ${status}`);
        expect(res.json.error.message).toContain("active");
      }
      // The openai SDK sees the same refusal.
      const client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
      const err = await client.chat.completions.create({ model: "@preset/brief", messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e);
      expect(err).toMatchObject({ status: 409 });
      for (const method of ["CreateChatCompletion", "StreamChatCompletion"] as const) {
        const refused = await rpc({ model: "@preset/brief", messages: hi }, method);
        expect(refused?.code, method).toBe(grpc.status.FAILED_PRECONDITION);
        expect(refused?.details).toContain(`Preset "brief" is ${status}`);
      }
      expect(groq.requests.length).toBe(before);
      const ids = await modelIds();
      expect(ids).not.toContain("@preset/brief");
      expect(ids).toContain("@preset/kept");
      // Still readable and manageable through the presets API.
      const got = await api(h, "GET", "/presets/brief", { key: h.tenant.apiKey });
      expect(got.status).toBe(200);
      expect(got.json.data.status).toBe(status);
    });
  }

  it("set back to active, the preset serves again at once", async () => {
    await setStatus("brief", "active");
    expect((await chat({ model: "@preset/brief", messages: hi })).status).toBe(200);
    expect((await rpc({ model: "@preset/brief", messages: hi }))).toBeNull();
    expect(await modelIds()).toContain("@preset/brief");
  });

  it("a model id without a provider is a 400 on model saying ids are <provider>/<model> (HTTP and gRPC)", async () => {
    for (const [body, field] of [
      [{ model: "gpt-4o-mini", messages: hi }, "model"],
      [{ model: "gpt-4o-mini", messages: hi, stream: true }, "model"],
      [{ model: "groq/", messages: hi }, "model"],
      [{ model: "groq/llama-3.3-70b", models: ["groq/llama-3.1-8b", "llama3"], messages: hi }, "models[1]"],
      [{ model: "nowhere/some-model", messages: hi }, "model"],
    ] as const) {
      const res = await chat(body);
      expect(res.status, res.text).toBe(400);
      expect(res.json.error.metadata).toEqual({ reason: "bad_request", retryable: false, field });
      expect(res.json.error.message).toContain("<provider>/<model>");
      expect(res.json.error.message).not.toContain("credential");
    }
    for (const method of ["CreateChatCompletion", "StreamChatCompletion"] as const) {
      const refused = await rpc({ model: "gpt-4o-mini", messages: hi }, method);
      expect(refused?.code, method).toBe(grpc.status.INVALID_ARGUMENT);
      // The core encodes grpc-message as the gRPC spec says, so grpc-js (which decodes with decodeURI) shows
      // the message as written: no "%2F" for "/" or "%3A" for ":".
      const details = refused?.details ?? "";
      expect(details).not.toMatch(/%[0-9A-F]{2}/);
      expect(details).toContain("<provider>/<model>");
      expect(details).toContain("gpt-4o-mini");
    }
    // A bare id a preset's configuration set: the message says the preset was applied.
    const made = await api(h, "POST", "/presets/bare/chat/completions", { key: h.tenant.managementKey, body: { model: "llama3", messages: hi } });
    expect(made.status, made.text).toBe(200);
    const viaPreset = await chat({ model: "@preset/bare", messages: hi });
    expect(viaPreset.status, viaPreset.text).toBe(400);
    expect(viaPreset.json.error.metadata.field).toBe("model");
    expect(viaPreset.json.error.message).toContain('model "llama3" (after preset "bare" was applied');
    expect(viaPreset.json.error.message).toContain("<provider>/<model>");
    // A provider order can still send an unknown vendor's model to a known provider.
    const routed = await chat({ model: "meta/llama-3.3-70b", provider: { order: ["groq"] }, messages: hi });
    expect(routed.status, routed.text).toBe(200);
    expect(routed.json.provider).toBe("groq");
  });
});
