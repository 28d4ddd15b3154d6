/**
 * The request log (docs/operations.md, "Request log"), on SQLite and PostgreSQL: a chat request's `user`,
 * session (`session_id`, else `x-session-id`), `trace` and `metadata` are recorded on its generation and
 * returned by `GET /api/v1/generation`; `GET /api/v1/generations` lists the organization's generations newest
 * first, pages by cursor without repeating or losing one, filters them, scopes them (a management key: the
 * organization's; another key: its own; another organization: none), refuses filters it cannot apply naming
 * them; `GenerationsService.ListGenerations` answers the same over gRPC (grpc-js). Requests are made with
 * the `openai` SDK against a fake OpenAI upstream.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { bearer, grpcClient, unary } from "../../helpers/grpc.js";

describe.each(["sqlite", "postgresql"] as const)("the request log (%s)", (provider) => {
  let h: Harness;
  let openai: FakeUpstream;
  let client: OpenAI;
  let mgmtClient: OpenAI;
  let generations: any;
  const ids: Record<string, string> = {};
  let start: Date;

  const messages = [{ role: "user" as const, content: "hi" }];
  const list = (query: string, key = h.tenant.managementKey) => api(h, "GET", `/generations${query}`, { key });

  beforeAll(async () => {
    openai = await startFakeOpenAI({ text: ["Hel", "lo"], finish: "stop", usage: { input: 20, output: 5 } });
    h = await startHarness({ provider, env: { PORTICO_PROVIDER_OPENAI_BASE_URL: `${openai.url}/v1` } });
    const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "openai", key: "sk-test" } });
    expect(res.status, res.text).toBe(200);
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
    mgmtClient = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.managementKey, maxRetries: 0 });
    generations = grpcClient("portico/generations/v1/generations_service.proto", "portico.generations.v1.GenerationsService", h.coreUrl);

    start = new Date(Date.now() - 1000);
    // 1: everything a request may say about itself, streamed.
    // session_id and trace are fields of the service's chat request the SDK does not type.
    const full = {
      model: "openai/gpt-4o-mini",
      messages,
      stream: true as const,
      user: "alice",
      metadata: { team: "search", run: "7" },
      session_id: "sess-1",
      trace: { trace_id: "trace-1", trace_name: "nightly", span_name: "rank", custom_key: "custom value" },
    };
    const stream = await client.chat.completions.create(full);
    for await (const chunk of stream) ids.full = chunk.id;
    // 2: the session from the header alone.
    ids.header = (await client.chat.completions.create({ model: "openai/gpt-4o-mini", messages }, { headers: { "x-session-id": "sess-header" } })).id;
    // 3: body and header: the body wins.
    ids.both = (
      await client.chat.completions.create(
        { model: "openai/gpt-4o-mini", messages, session_id: "sess-body", user: "bob" } as OpenAI.ChatCompletionCreateParamsNonStreaming,
        { headers: { "x-session-id": "sess-header-loses" } },
      )
    ).id;
    // 4: an error (the provider refuses it).
    openai.knobs.failStatus = 400;
    const failed = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "openai/gpt-4o-mini", messages, user: "alice" } });
    openai.knobs.failStatus = undefined;
    expect(failed.status).toBe(502);
    // 5: made with the management key.
    ids.mgmt = (await mgmtClient.chat.completions.create({ model: "openai/gpt-4o-mini", messages, user: "carol" })).id;
  });
  afterAll(async () => {
    generations?.close();
    await h?.close();
    await openai?.close();
  });

  it("records user, session, trace and metadata and returns them by id", async () => {
    const got = await api(h, "GET", `/generation?id=${ids.full}`, { key: h.tenant.apiKey });
    expect(got.status, got.text).toBe(200);
    expect(got.json.data).toMatchObject({
      id: ids.full,
      workspace_id: h.tenant.workspaceId,
      user: "alice",
      session_id: "sess-1",
      trace_id: "trace-1",
      trace: { trace_id: "trace-1", trace_name: "nightly", span_name: "rank", custom_key: "custom value" },
      metadata: { team: "search", run: "7" },
      streamed: true,
      status: "success",
    });
    const header = (await api(h, "GET", `/generation?id=${ids.header}`, { key: h.tenant.apiKey })).json.data;
    expect(header).toMatchObject({ session_id: "sess-header", user: null, trace: null, trace_id: null, metadata: null });
    const both = (await api(h, "GET", `/generation?id=${ids.both}`, { key: h.tenant.apiKey })).json.data;
    expect(both).toMatchObject({ session_id: "sess-body", user: "bob" });
  });

  it("refuses oversized user, trace and session fields with 400 naming them, recording none of them", async () => {
    // Another organization, so these refusals (recorded as errors) stay out of the lists below.
    const other = await h.createTenant();
    const body = (extra: Record<string, unknown>) => ({ model: "openai/gpt-4o-mini", messages, ...extra });
    const cases: Array<[Record<string, unknown>, string, Record<string, string>?]> = [
      [{ user: "u".repeat(257) }, "user"],
      [{ trace: { trace_id: "t".repeat(257) } }, "trace.trace_id"],
      [{ trace: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, "v"])) }, "trace"],
      [{ trace: { blob: "x".repeat(5000) } }, "trace"],
      [{ metadata: { k: "v".repeat(513) } }, "metadata.k"],
      [{ session_id: "s".repeat(257) }, "session_id"],
      [{}, "x-session-id", { "x-session-id": "s".repeat(257) }],
    ];
    for (const [extra, field, headers] of cases) {
      const res = await api(h, "POST", "/chat/completions", { key: other.apiKey, body: body(extra), ...(headers ? { headers } : {}) });
      expect(res.status, `${field}: ${res.text}`).toBe(400);
      expect(res.json.error.metadata?.field, res.text).toBe(field);
    }
    const recorded = await list("?limit=100", other.managementKey);
    expect(recorded.json.data.length).toBe(cases.length - 1); // the header is refused before the pipeline
    for (const g of recorded.json.data) expect(g).toMatchObject({ status: "error", error_code: 400, user: null, session_id: null, trace: null, metadata: null });
  });

  it("lists newest first and pages by cursor without repeats or gaps", async () => {
    const all = await list("?limit=100");
    expect(all.status, all.text).toBe(200);
    const every = all.json.data.map((g: { id: string }) => g.id);
    expect(every.length).toBeGreaterThanOrEqual(5);
    const times = all.json.data.map((g: { created_at: string }) => Date.parse(g.created_at));
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    expect(every[0]).toBe(ids.mgmt);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 20; i++) {
      const page = await list(`?limit=2${cursor ? `&starting_after=${cursor}` : ""}`);
      expect(page.status, page.text).toBe(200);
      seen.push(...page.json.data.map((g: { id: string }) => g.id));
      if (!page.json.has_more) break;
      cursor = page.json.next_cursor;
    }
    expect(seen).toEqual(every);
    const foreign = await api(h, "GET", "/audit?starting_after=" + cursor, { key: h.tenant.managementKey });
    expect(foreign.status).toBe(400);
  });

  it("filters by user, session, trace, status, model, provider, key, workspace and time", async () => {
    const idsOf = async (query: string, key?: string) => {
      const res = await list(query, key);
      expect(res.status, `${query}: ${res.text}`).toBe(200);
      return res.json.data.map((g: { id: string }) => g.id);
    };
    expect(await idsOf("?user=alice&status=success")).toEqual([ids.full]);
    expect((await idsOf("?user=alice")).length).toBe(2);
    expect(await idsOf("?session_id=sess-header")).toEqual([ids.header]);
    expect(await idsOf("?session_id=sess-body")).toEqual([ids.both]);
    expect(await idsOf("?trace_id=trace-1")).toEqual([ids.full]);
    expect(await idsOf("?trace_name=nightly&span_name=rank")).toEqual([ids.full]);
    expect(await idsOf("?trace_name=Nightly")).toEqual([]);
    const meta = (o: Record<string, string>) => `?metadata=${encodeURIComponent(JSON.stringify(o))}`;
    expect(await idsOf(meta({ team: "search" }))).toEqual([ids.full]);
    expect(await idsOf(meta({ run: "7", team: "search" }))).toEqual([ids.full]);
    // Exact pairs: not another case, not a prefix, not the value under another key.
    expect(await idsOf(meta({ team: "Search" }))).toEqual([]);
    expect(await idsOf(meta({ team: "sea" }))).toEqual([]);
    expect(await idsOf(meta({ run: "search" }))).toEqual([]);
    const errors = await list("?status=error");
    expect(errors.json.data).toHaveLength(1);
    expect(errors.json.data[0]).toMatchObject({ status: "error", error_code: 502, user: "alice" });
    expect((await idsOf("?model=openai/gpt-4o-mini")).length).toBe(5);
    expect(await idsOf("?model=openai/none")).toEqual([]);
    expect((await idsOf("?provider=openai&status=success")).length).toBe(4);
    expect(await idsOf(`?key=${h.tenant.managementKeyHash}`)).toEqual([ids.mgmt]);
    const keys = await api(h, "GET", "/keys", { key: h.tenant.managementKey });
    const label = keys.json.data.find((k: { hash: string }) => k.hash === h.tenant.managementKeyHash).label;
    expect(await idsOf(`?key=${encodeURIComponent(label)}`)).toEqual([ids.mgmt]);
    expect((await idsOf(`?workspace_id=${h.tenant.workspaceId}`)).length).toBe(5);
    expect((await idsOf(`?from=${encodeURIComponent(start.toISOString())}`)).length).toBe(5);
    expect(await idsOf(`?to=${encodeURIComponent(start.toISOString())}`)).toEqual([]);
    expect(await idsOf(`?from=2020-01-01&to=2020-01-02`)).toEqual([]);
  });

  it("refuses what it cannot apply, naming the parameter", async () => {
    for (const [query, field, status] of [
      [`?plugin=${"p".repeat(65)}`, "plugin", 400],
      ["?status=done", "status", 400],
      ["?metadata=nope", "metadata", 400],
      [`?metadata=${encodeURIComponent('{"team":1}')}`, "metadata", 400],
      ["?from=yesterday", "from", 400],
      ["?from=0000-01-01T00:00:00Z", "from", 400],
      ["?to=2026-02-30", "to", 400],
      ["?from=2026-11-26T10:00:00Z&to=2026-11-26T09:00:00Z", "to", 400],
      ["?limit=101", "limit", 400],
      ["?starting_after=nope", "starting_after", 400],
      ["?workspace_id=00000000-0000-0000-0000-000000000000", undefined, 404],
    ] as const) {
      const res = await list(query);
      expect(res.status, `${query}: ${res.text}`).toBe(status);
      if (field) expect(res.json.error.metadata?.field, res.text).toBe(field);
    }
  });

  it("scopes the list: an ordinary key lists its own, another organization none", async () => {
    const own = await list("?limit=100", h.tenant.apiKey);
    expect(own.status, own.text).toBe(200);
    expect(own.json.data.length).toBe(4);
    expect(own.json.data.every((g: { key_hash: string }) => g.key_hash === h.tenant.apiKeyHash)).toBe(true);
    expect((await list(`?key=${h.tenant.apiKeyHash}`, h.tenant.apiKey)).status).toBe(200);
    const other = await list(`?key=${h.tenant.managementKeyHash}`, h.tenant.apiKey);
    expect(other.status).toBe(403);
    const stranger = await h.createTenant();
    const theirs = await list("?limit=100", stranger.managementKey);
    expect(theirs.status).toBe(200);
    expect(theirs.json.data).toEqual([]);
    expect((await api(h, "GET", `/generation?id=${ids.full}`, { key: stranger.managementKey })).status).toBe(404);
  });

  // Last: it adds a generation the counts above do not expect.
  it("records the same through the Messages dialect (metadata.user_id is the user; the x-session-id header)", async () => {
    const res = await api(h, "POST", "/messages", {
      headers: { "x-api-key": h.tenant.apiKey, "anthropic-version": "2023-06-01", "x-session-id": "sess-messages" },
      body: { model: "openai/gpt-4o-mini", max_tokens: 10, messages: [{ role: "user", content: "hi" }], metadata: { user_id: "dana" }, trace: { trace_id: "trace-m" } },
    });
    expect(res.status, res.text).toBe(200);
    const found = await list("?user=dana");
    expect(found.json.data).toHaveLength(1);
    expect(found.json.data[0]).toMatchObject({ user: "dana", session_id: "sess-messages", trace_id: "trace-m", status: "success" });
  });

  it("answers the same over gRPC (grpc-js)", async () => {
    const { response, error } = await unary(generations, "ListGenerations", { user: "alice", status: "success" }, bearer(h.tenant.managementKey));
    expect(error).toBeUndefined();
    expect(response.generations).toHaveLength(1);
    expect(response.generations[0]).toMatchObject({
      id: ids.full,
      user: "alice",
      session_id: "sess-1",
      trace_id: "trace-1",
      metadata: { team: "search", run: "7" },
    });
    expect(response.generations[0].trace.fields.custom_key).toMatchObject({ stringValue: "custom value" });
    const first = await unary(generations, "ListGenerations", { limit: 3 }, bearer(h.tenant.managementKey));
    expect(first.response.has_more).toBe(true);
    const second = await unary(generations, "ListGenerations", { limit: 3, starting_after: first.response.next_cursor }, bearer(h.tenant.managementKey));
    expect(second.error).toBeUndefined();
    const both = [...first.response.generations, ...second.response.generations].map((g: { id: string }) => g.id);
    expect(new Set(both).size).toBe(6);
    const byMeta = await unary(generations, "ListGenerations", { metadata: { team: "search" }, trace_name: "nightly" }, bearer(h.tenant.managementKey));
    expect(byMeta.response.generations.map((g: { id: string }) => g.id)).toEqual([ids.full]);
    const ancient = await unary(generations, "ListGenerations", { from: { seconds: "-62167219200", nanos: 0 } }, bearer(h.tenant.managementKey));
    expect(ancient.error?.code).toBe(3);
    // cache_hit filters on the generation's cacheHit column (the response cache, docs/operations.md): none here were hits.
    const hits = await unary(generations, "ListGenerations", { cache_hit: true }, bearer(h.tenant.managementKey));
    expect(hits.error).toBeUndefined();
    expect(hits.response.generations).toEqual([]);
    const denied = await unary(generations, "ListGenerations", { key: h.tenant.managementKeyHash }, bearer(h.tenant.apiKey));
    expect(denied.error?.code).toBe(7);
  });
});
