/**
 * Presets through the real gateway and core on a fresh database, on SQLite and PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness, type Tenant } from "../../helpers/harness.js";
import { waitFor } from "../../helpers/wait.js";

const PRESET_KEYS = [
  "id", "slug", "name", "description", "status", "status_updated_at", "created_at", "updated_at",
  "creator_user_id", "workspace_id", "designated_version_id",
].sort();
const VERSION_KEYS = ["id", "preset_id", "version", "config", "system_prompt", "creator_id", "created_at", "updated_at"].sort();
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const docBody = {
  messages: [
    { role: "system", content: "You are a helpful assistant." },
    { role: "user", content: "Hello!" },
  ],
  model: "openai/gpt-4o",
  temperature: 0.7,
};

/** Waits until the clock (the server's, in this process) reads later than `time`: the next write is stamped later. */
const clockPast = (time: string) => waitFor(`the clock past ${time}`, () => Date.now() > Date.parse(time), { intervalMs: 1 });

describe.each(["sqlite", "postgresql"] as const)("presets over HTTP (%s)", (provider) => {
  let h: Harness;
  let other: Tenant;
  const create = (slug: string, body: unknown, key = h.tenant.managementKey) =>
    api(h, "POST", `/presets/${slug}/chat/completions`, { key, body });

  beforeAll(async () => {
    h = await startHarness({ provider });
    other = await h.createTenant();
  });
  afterAll(async () => {
    await h?.close();
  });

  it("creates a preset with version 1 from the documented example", async () => {
    const res = await create("doc-example", docBody);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    const p = res.json.data;
    expect(Object.keys(res.json)).toEqual(["data"]);
    expect(Object.keys(p).sort()).toEqual([...PRESET_KEYS, "designated_version"].sort());
    expect(Object.keys(p.designated_version).sort()).toEqual(VERSION_KEYS);
    expect(p).toMatchObject({
      slug: "doc-example",
      name: "doc-example",
      description: null,
      status: "active",
      status_updated_at: null,
      creator_user_id: h.tenant.userId,
      workspace_id: h.tenant.workspaceId,
      designated_version_id: p.designated_version.id,
    });
    expect(p.designated_version).toMatchObject({
      preset_id: p.id,
      version: 1,
      config: { model: "openai/gpt-4o", temperature: 0.7 },
      system_prompt: "You are a helpful assistant.",
      creator_id: h.tenant.userId,
    });
    for (const t of [p.created_at, p.updated_at, p.designated_version.created_at, p.designated_version.updated_at]) {
      expect(t).toMatch(ISO);
    }
  });

  it("adds version n+1 on an existing slug, designates it and advances updated_at", async () => {
    const first = (await create("versioned", { ...docBody, temperature: 0.1 })).json.data;
    await clockPast(first.updated_at);
    const res = await create("versioned", { messages: [{ role: "user", content: "x" }], model: "m2" });
    expect(res.status).toBe(200);
    const second = res.json.data;
    expect(second.id).toBe(first.id);
    expect(second.created_at).toBe(first.created_at);
    expect(Date.parse(second.updated_at)).toBeGreaterThan(Date.parse(first.updated_at));
    expect(second.designated_version.version).toBe(2);
    expect(second.designated_version_id).toBe(second.designated_version.id);
    expect(second.designated_version.id).not.toBe(first.designated_version.id);
    expect(second.designated_version.config).toEqual({ model: "m2" });
    expect(second.designated_version.system_prompt).toBeNull();

    const got = await api(h, "GET", "/presets/versioned", { key: h.tenant.apiKey });
    expect(got.status).toBe(200);
    expect(got.json.data).toEqual(second);
  });

  it("stores only allow-listed keys, as sent, and ignores server-owned fields", async () => {
    const body = {
      ...docBody,
      stop: null,
      seed: 42,
      provider: { only: ["OpenAI"], sort: { by: "price", partition: null } },
      tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }],
      stream: false,
      session_id: "s1",
      user: "u1",
      trace: { trace_id: "t" },
      metadata: { k: "v" },
      debug: { echo_upstream_body: true },
      prompt: "ignored",
      frobnicate: 1,
      id: "00000000-0000-0000-0000-000000000000",
      version: 99,
      workspace_id: other.workspaceId,
      status: "archived",
      name: "other-name",
      designated_version_id: "x",
    };
    const res = await create("faithful", body);
    expect(res.status).toBe(200);
    const p = res.json.data;
    expect(p.id).not.toBe(body.id);
    expect(p.workspace_id).toBe(h.tenant.workspaceId);
    expect(p.status).toBe("active");
    expect(p.name).toBe("faithful");
    expect(p.designated_version.version).toBe(1);
    expect(p.designated_version.config).toEqual({
      model: "openai/gpt-4o",
      temperature: 0.7,
      stop: null,
      seed: 42,
      provider: { only: ["OpenAI"], sort: { by: "price", partition: null } },
      tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }],
    });
    // Raw text: the null survived storage and the integer stayed an integer.
    const raw = await api(h, "GET", "/presets/faithful/versions/1", { key: h.tenant.apiKey });
    expect(raw.text).toContain('"stop":null');
    expect(raw.text).toContain('"seed":42,');
    expect(raw.text).toContain('"temperature":0.7');
  });

  it("uses the developer message when there is no system message", async () => {
    const res = await create("dev-prompt", {
      messages: [{ role: "developer", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }] }, { role: "user", content: "x" }],
    });
    expect(res.json.data.designated_version.system_prompt).toBe("a\nb");
    expect(res.json.data.designated_version.config).toEqual({});
  });

  it.each<[string, Record<string, unknown>, string]>([
    ["seed 1.5", { seed: 1.5 }, "seed"],
    ["temperature 3", { temperature: 3 }, "temperature"],
    ["no messages", { messages: [] }, "messages"],
    ["unknown role", { messages: [{ role: "robot", content: "x" }] }, "messages[0].role"],
    ["provider unknown property", { provider: { fast: true } }, "provider.fast"],
    ["fusion 9 analysis models", { plugins: [{ id: "fusion", analysis_models: Array(9).fill("m") }] }, "plugins[0].analysis_models"],
    ["reasoning mismatch", { reasoning: { effort: "low" }, reasoning_effort: "high" }, "reasoning_effort"],
  ])("rejects %s with 400 naming the field", async (_n, patch, field) => {
    const res = await create("invalid", { ...docBody, ...patch });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe(400);
    expect(res.json.error.message).toContain(field);
    expect(res.json.error.metadata).toMatchObject({ reason: "bad_request", field });
    const gone = await api(h, "GET", "/presets/invalid", { key: h.tenant.apiKey });
    expect(gone.status).toBe(404);
  });

  it("rejects bad slugs and bodies with 400", async () => {
    // A 101-character slug is refused by the core's rule too (see the gRPC test); over HTTP Fastify's
    // router stops it first (maxParamLength 100, a 414 outside the envelope), reported to the lead.
    const longest = await create("x".repeat(100), docBody);
    expect(longest.status).toBe(200);
    for (const slug of ["a%20b", "a%2Fb", "%C3%A9", "x".repeat(101)]) {
      const res = await create(slug, docBody);
      expect(res.status, slug).toBe(400);
      expect(res.json.error.metadata.field).toBe("slug");
    }
    // "URL-safe" is every unreserved character, upper case and "~" included; slugs are case-sensitive.
    for (const slug of ["Upper", "-lead", "~team.Bot_1"]) {
      const res = await create(slug, docBody);
      expect(res.status, slug).toBe(200);
      expect(res.json.data.slug).toBe(slug);
    }
    const lower = await create("upper", docBody);
    expect(lower.json.data.id).not.toBe((await create("Upper", docBody)).json.data.id);
    const arr = await create("arr", [docBody]);
    expect(arr.status).toBe(400);
    expect(arr.json.error.code).toBe(400);
    const malformed = await api(h, "POST", "/presets/x/chat/completions", {
      key: h.tenant.managementKey,
      rawBody: "{",
      headers: { "content-type": "application/json" },
    });
    expect(malformed.status).toBe(400);
  });

  it("rejects NUL characters in what a preset stores with 400 on every backend (PostgreSQL cannot store them)", async () => {
    const cases: Array<[unknown, string]> = [
      [{ ...docBody, model: "m\u0000" }, "model"],
      [{ ...docBody, provider: { only: ["a", "b\u0000"] } }, "provider.only[1]"],
      [{ ...docBody, logit_bias: { "1\u0000": 1 } }, "logit_bias"],
      [{ ...docBody, messages: [{ role: "system", content: "be \u0000 brief" }, { role: "user", content: "hi" }] }, "messages"],
    ];
    for (const [body, field] of cases) {
      const res = await create("nul", body);
      expect(res.status, field).toBe(400);
      expect(res.json.error.metadata).toMatchObject({ reason: "bad_request", field });
    }
    // Fields that are not stored may carry anything.
    const ignored = await create("nul", { ...docBody, user: "u\u0000", messages: [{ role: "user", content: "a\u0000b" }] });
    expect(ignored.status).toBe(200);
  });

  it("requires a key (401) and a management key to create (403)", async () => {
    const none = await api(h, "POST", "/presets/auth/chat/completions", { body: docBody });
    expect(none.status).toBe(401);
    expect(none.json.error.code).toBe(401);
    const bad = await create("auth", docBody, "pk-v1-" + "0".repeat(64));
    expect(bad.status).toBe(401);
    const ordinary = await create("auth", docBody, h.tenant.apiKey);
    expect(ordinary.status).toBe(403);
    expect(ordinary.json.error).toEqual({ code: 403, message: "Only management keys can perform this operation" });
    for (const path of ["/presets", "/presets/doc-example", "/presets/doc-example/versions", "/presets/doc-example/versions/1"]) {
      expect((await api(h, "GET", path)).status, path).toBe(401);
      expect((await api(h, "GET", path, { key: h.tenant.apiKey })).status, path).toBe(200);
    }
  });

  it("isolates workspaces", async () => {
    await create("shared-slug", docBody);
    await create("shared-slug", docBody);
    for (const path of ["/presets/shared-slug", "/presets/shared-slug/versions", "/presets/shared-slug/versions/1"]) {
      const res = await api(h, "GET", path, { key: other.apiKey });
      expect(res.status, path).toBe(404);
      expect(res.json.error.code).toBe(404);
    }
    const theirs = await create("shared-slug", { ...docBody, model: "theirs" }, other.managementKey);
    expect(theirs.status).toBe(200);
    expect(theirs.json.data.designated_version.version).toBe(1);
    expect(theirs.json.data.workspace_id).toBe(other.workspaceId);
    const ours = await api(h, "GET", "/presets/shared-slug", { key: h.tenant.apiKey });
    expect(ours.json.data.id).not.toBe(theirs.json.data.id);
    expect(ours.json.data.designated_version.version).toBe(2);
    const list = await api(h, "GET", "/presets", { key: other.apiKey });
    expect(list.json.data.map((p: { slug: string }) => p.slug)).toEqual(["shared-slug"]);
  });

  it("lists presets most recently updated first, paged, with total_count", async () => {
    const t = await h.createTenant();
    for (const slug of ["p-a", "p-b", "p-c"]) await clockPast((await create(slug, docBody, t.managementKey)).json.data.updated_at);
    await create("p-a", docBody, t.managementKey); // p-a becomes the most recently updated
    const all = await api(h, "GET", "/presets", { key: t.apiKey });
    expect(all.status).toBe(200);
    expect(all.json.total_count).toBe(3);
    expect(all.json.data.map((p: { slug: string }) => p.slug)).toEqual(["p-a", "p-c", "p-b"]);
    for (const item of all.json.data) expect(Object.keys(item).sort()).toEqual(PRESET_KEYS);
    const page = await api(h, "GET", "/presets?offset=1&limit=1", { key: t.apiKey });
    expect(page.json).toMatchObject({ total_count: 3 });
    expect(page.json.data.map((p: { slug: string }) => p.slug)).toEqual(["p-c"]);
    for (const q of ["limit=0", "limit=101", "offset=-1", "limit=abc"]) {
      const res = await api(h, "GET", `/presets?${q}`, { key: t.apiKey });
      expect(res.status, q).toBe(400);
    }
  });

  it("lists versions ascending and fetches one by number", async () => {
    for (let i = 0; i < 3; i++) await create("three", { ...docBody, temperature: i / 10 });
    const list = await api(h, "GET", "/presets/three/versions?limit=2", { key: h.tenant.apiKey });
    expect(list.status).toBe(200);
    expect(list.json.total_count).toBe(3);
    expect(list.json.data.map((v: { version: number }) => v.version)).toEqual([1, 2]);
    for (const item of list.json.data) expect(Object.keys(item).sort()).toEqual(VERSION_KEYS);
    const rest = await api(h, "GET", "/presets/three/versions?offset=2", { key: h.tenant.apiKey });
    expect(rest.json.data.map((v: { version: number }) => v.version)).toEqual([3]);
    const v2 = await api(h, "GET", "/presets/three/versions/2", { key: h.tenant.apiKey });
    expect(v2.status).toBe(200);
    expect(v2.json.data).toMatchObject({ version: 2, config: { temperature: 0.1 } });
    expect(Object.keys(v2.json.data).sort()).toEqual(VERSION_KEYS);
    expect((await api(h, "GET", "/presets/three/versions/abc", { key: h.tenant.apiKey })).status).toBe(400);
    expect((await api(h, "GET", "/presets/three/versions/1.5", { key: h.tenant.apiKey })).status).toBe(400);
    expect((await api(h, "GET", "/presets/three/versions/-1", { key: h.tenant.apiKey })).status).toBe(400);
    expect((await api(h, "GET", "/presets/three/versions/4", { key: h.tenant.apiKey })).status).toBe(404);
    expect((await api(h, "GET", "/presets/three/versions/99999999999", { key: h.tenant.apiKey })).status).toBe(404);
    expect((await api(h, "GET", "/presets/nope/versions/1", { key: h.tenant.apiKey })).status).toBe(404);
    expect((await api(h, "GET", "/presets/nope/versions", { key: h.tenant.apiKey })).status).toBe(404);
    expect((await api(h, "GET", "/presets/nope", { key: h.tenant.apiKey })).status).toBe(404);
  });

  it("documents the routes in the OpenAPI document", async () => {
    const doc = await api(h, "GET", "/openapi.json");
    expect(doc.status).toBe(200);
    const paths = Object.keys(doc.json.paths);
    for (const p of ["/api/v1/presets/{slug}/chat/completions", "/api/v1/presets", "/api/v1/presets/{slug}", "/api/v1/presets/{slug}/versions", "/api/v1/presets/{slug}/versions/{version}"]) {
      expect(paths).toContain(p);
    }
    const create = doc.json.paths["/api/v1/presets/{slug}/chat/completions"].post;
    expect(Object.keys(create.responses).sort()).toEqual(["200", "400", "401", "403", "404", "409", "500"]);
  });

  it("numbers 50 concurrent creates on one slug exactly 1..50", async () => {
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => create("contended", { ...docBody, seed: i })),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s !== 200), JSON.stringify(results.find((r) => r.status !== 200)?.json)).toEqual([]);
    const versions = results.map((r) => r.json.data.designated_version.version).sort((a, b) => a - b);
    expect(versions).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    const ids = new Set(results.map((r) => r.json.data.id));
    expect(ids.size).toBe(1);

    const got = await api(h, "GET", "/presets/contended", { key: h.tenant.apiKey });
    expect(got.json.data.designated_version.version).toBe(50);
    // The designated version is the one whose create call returned version 50, with that call's body.
    const newest = results.find((r) => r.json.data.designated_version.version === 50)!;
    expect(got.json.data.designated_version_id).toBe(newest.json.data.designated_version.id);
    expect(got.json.data.designated_version.config.seed).toBe(newest.json.data.designated_version.config.seed);
    const list = await api(h, "GET", "/presets/contended/versions?limit=100", { key: h.tenant.apiKey });
    expect(list.json.total_count).toBe(50);
    expect(list.json.data.map((v: { version: number }) => v.version)).toEqual(versions);
    expect(new Set(list.json.data.map((v: { config: { seed: number } }) => v.config.seed)).size).toBe(50);
  });
});
