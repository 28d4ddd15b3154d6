/**
 * Operator-configured providers end to end:
 *
 * - `PORTICO_OPENAI_COMPATIBLE_PROVIDERS=vllm=…` (the documented example) takes credentials: BYOK over HTTP
 *   and gRPC and `portico admin provider-key add`, and requests for `vllm/<model>` are served with them;
 * - `PORTICO_KEYLESS_PROVIDERS=ollama` routes `ollama/<model>` with no credential at all and no
 *   Authorization header (a local Ollama or vLLM started without a key), streamed or not, and lists
 *   `ollama/*` in /models;
 * - a slug no adapter serves is refused at creation (400 on `provider`) instead of being stored and never
 *   routed;
 * - `GET /api/v1/providers` (and `ProvidersService/ListProviders` over gRPC) lists what can be served, with
 *   `keyless` and, for the calling key, `configured`; the served OpenAPI document describes it.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { bearer, grpc, grpcClient, unary } from "../../helpers/grpc.js";
import { PORTICO_BIN } from "../../helpers/cli.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";

const secret = (tag: string) => `sk-${tag}-${randomBytes(12).toString("hex")}`;

function cli(args: string[], env: Record<string, string>, input = ""): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [PORTICO_BIN, "admin", ...args], { env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

describe("operator-configured and keyless providers, and GET /providers", () => {
  let h: Harness;
  let vllm: FakeUpstream;
  let ollama: FakeUpstream;
  let providersEnv: Record<string, string>;
  let grpcProviders: any;

  const chat = (model: string, key = h.tenant.apiKey) =>
    api(h, "POST", "/chat/completions", { key, body: { model, messages: [{ role: "user", content: "hi" }] } });
  const listed = async (key = h.tenant.apiKey) => {
    const res = await api(h, "GET", "/providers", { key });
    expect(res.status, res.text).toBe(200);
    return res.json.data as Array<{ slug: string; name: string; keyless: boolean; configured: boolean }>;
  };

  beforeAll(async () => {
    [vllm, ollama] = await Promise.all([startFakeOpenAI(), startFakeOpenAI()]);
    providersEnv = {
      PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `vllm=${vllm.url}/v1,ollama=${ollama.url}/v1`,
      PORTICO_KEYLESS_PROVIDERS: "ollama",
    };
    h = await startHarness({ env: providersEnv });
    grpcProviders = grpcClient("portico/providers/v1/providers_service.proto", "portico.providers.v1.ProvidersService", h.coreUrl);
  });
  afterAll(async () => {
    grpcProviders?.close();
    await h?.close();
    await Promise.all([vllm?.close(), ollama?.close()]);
  });

  it("GET /providers lists built-in and configured providers, sorted, with keyless and configured", async () => {
    const data = await listed();
    expect(data.map((p) => p.slug)).toEqual([...data.map((p) => p.slug)].sort());
    expect(data.map((p) => p.slug)).toEqual(expect.arrayContaining(["openai", "anthropic", "google-ai-studio", "groq", "vllm", "ollama"]));
    expect(data.find((p) => p.slug === "openai")).toEqual({ slug: "openai", name: "OpenAI", keyless: false, configured: false });
    expect(data.find((p) => p.slug === "vllm")).toEqual({ slug: "vllm", name: "vllm", keyless: false, configured: false });
    expect(data.find((p) => p.slug === "ollama")).toEqual({ slug: "ollama", name: "ollama", keyless: true, configured: true });
    // Slugs of the published list without an adapter are not offered.
    expect(data.map((p) => p.slug)).not.toContain("amazon-bedrock");
    expect((await api(h, "GET", "/providers")).status).toBe(401);
  });

  it("a keyless provider serves requests with no credential and no Authorization header, streamed or not", async () => {
    const from = ollama.requests.length;
    const res = await chat("ollama/llama3.2");
    expect(res.status, res.text).toBe(200);
    expect(res.json.provider).toBe("ollama");
    expect(res.json.choices[0].message.content).toBe("Hello, world");
    const client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: "ollama/llama3.2", stream: true, messages: [{ role: "user", content: "hi" }] });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe("Hello, world");
    const seen = ollama.requests.slice(from);
    expect(seen).toHaveLength(2);
    for (const r of seen) {
      expect(r.headers.authorization).toBeUndefined();
      expect(r.body.model).toBe("llama3.2");
    }
    const models = await api(h, "GET", "/models", { key: h.tenant.apiKey });
    expect(models.json.data.map((m: { id: string }) => m.id)).toContain("ollama/*");
  });

  it("a configured slug takes BYOK credentials (HTTP and gRPC) and is served with them", async () => {
    expect((await chat("vllm/qwen")).json.error.metadata.reason).toBe("no_credential");
    const key = secret("vllm");
    const created = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "vllm", key } });
    expect(created.status, created.text).toBe(200);
    expect(created.json.data.provider).toBe("vllm");
    expect((await listed()).find((p) => p.slug === "vllm")?.configured).toBe(true);
    const from = vllm.requests.length;
    const res = await chat("vllm/qwen");
    expect(res.status, res.text).toBe(200);
    expect(vllm.requests.slice(from).map((r) => r.headers.authorization)).toEqual([`Bearer ${key}`]);

    const grpcByok = grpcClient("portico/byok/v1/byok_service.proto", "portico.byok.v1.ByokService", h.coreUrl) as any;
    try {
      const viaGrpc = await unary(grpcByok, "CreateByokCredential", { key: secret("g"), provider: "vllm" }, bearer(h.tenant.managementKey));
      expect(viaGrpc.error).toBeUndefined();
      expect(viaGrpc.response.credential.provider).toBe("vllm");
      const refused = await unary(grpcByok, "CreateByokCredential", { key: secret("g"), provider: "amazon-bedrock" }, bearer(h.tenant.managementKey));
      expect(refused.error?.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(refused.error?.details).toContain("provider");
    } finally {
      grpcByok.close();
    }
  });

  it("a slug no adapter serves is refused at creation with 400 on provider", async () => {
    for (const provider of ["amazon-bedrock", "not-a-provider", "openrouter"]) {
      const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider, key: secret("x") } });
      expect(res.status, provider).toBe(400);
      expect(res.json.error.metadata).toMatchObject({ reason: "bad_request", field: "provider" });
      expect(res.json.error.message).toContain("GET /api/v1/providers");
    }
  });

  it("portico admin provider-key add takes a configured slug, and refuses one no adapter serves", async () => {
    const env = { ...providersEnv, PORTICO_DATA_DIR: h.config.dataDir, DATABASE_URL: h.database.url, PORTICO_LOG_LEVEL: "error" };
    const added = await cli(["provider-key", "add", "--provider", "vllm", "--json"], env, `${secret("shared")}\n`);
    expect(added.code, added.stderr).toBe(0);
    expect(JSON.parse(added.stdout).provider).toBe("vllm");
    const refused = await cli(["provider-key", "add", "--provider", "amazon-bedrock"], env, `${secret("shared")}\n`);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("provider");
  });

  it("gRPC ListProviders answers the same list; without a key it is UNAUTHENTICATED", async () => {
    const res = await unary(grpcProviders, "ListProviders", {}, bearer(h.tenant.apiKey));
    expect(res.error).toBeUndefined();
    const http = await listed();
    expect(res.response.providers).toEqual(http);
    const none = await unary(grpcProviders, "ListProviders", {});
    expect(none.error?.code).toBe(grpc.status.UNAUTHENTICATED);
  });

  it("the served OpenAPI document describes GET /providers", async () => {
    const doc = (await api(h, "GET", "/openapi.json")).json;
    const op = doc.paths["/api/v1/providers"]?.get;
    expect(op?.operationId).toBe("listProviders");
    expect(Object.keys(op.responses["200"].content["application/json"].schema.properties.data.items.properties).sort()).toEqual([
      "configured",
      "keyless",
      "name",
      "slug",
    ]);
  });
});
