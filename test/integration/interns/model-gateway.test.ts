/**
 * Interns through the gateway (issue 28; docs/interns.md, "Model calls through Portico"): an intern with a model
 * gets, per run, StartRun.gateway {base_url, token, expires_at_ms, model}. A test-side host attached over the
 * real gRPC link calls Portico's model endpoints with the token, as agents do (official `openai` and
 * `@anthropic-ai/sdk` clients, `x-api-key` / `x-goog-api-key` / Bearer, bare model ids), against a fake
 * OpenAI-compatible upstream behind Portico. Checked: the intern's model serves every call, each call is a
 * generation linked to the intern, run and session (filters `intern_id`, `run_id`), the run's usage in the
 * final chunk is their sum (cost included), the token is refused on every other route, after the run ends,
 * after a cancel and past its expiry, and a second instance sharing the database honours both. SQLite and
 * PostgreSQL.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StartRun } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { bearer, grpc, grpcClient, unary } from "../../helpers/grpc.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { startFakeHost, type FakeHost, type FakeRun } from "./fake-host.js";
import { chat, chatBody, createTestIntern, finalOf, finishOf } from "./sse-client.js";
import { writeCatalogFile } from "../../helpers/catalog-file.js";

const ENV = {
  PORTICO_HEARTBEAT_INTERVAL_MS: "5000",
  PORTICO_INTERN_START_TIMEOUT_MS: "10000",
  PORTICO_LINK_PING_INTERVAL_MS: "1000",
  PORTICO_LINK_LIVENESS_TIMEOUT_MS: "10000",
  PORTICO_INTERN_RATE_LIMIT: "10000",
};

/** The intern's model: a priced catalog model served by the keyless fake provider `acme` (the platform pays). */
const MODEL = "acme/m1";
const PRICE = { prompt: 0.000001, completion: 0.000002 };

/** What one scripted agent turn did with its run credential. */
interface AgentTurn {
  start: StartRun;
  gateway: NonNullable<StartRun["gateway"]>;
  results: Record<string, unknown>;
  done: boolean;
  error?: unknown;
}

describe.each(["sqlite", "postgresql"] as const)("intern model calls through the gateway (%s)", (provider) => {
  let h: Harness;
  let h2: Harness;
  let upstream: FakeUpstream;
  let host: FakeHost;
  let internId: string;
  let plainInternId: string;
  let plainHost: FakeHost;
  const turns = new Map<string, AgentTurn>();
  /** Lets a "hold" turn go on (the test does something while the run is live). */
  const release = new Map<string, () => void>();
  /** Told when a "hold" turn has made its first call and waits. */
  let onHold: ((turn: AgentTurn) => void) | undefined;
  const nextHold = () => new Promise<AgentTurn>((resolve) => (onHold = resolve));

  const post = (base: string, path: string, token: string, body: unknown, header: "bearer" | "x-api-key" | "x-goog-api-key" = "bearer") =>
    fetch(`${base}/api/v1${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(header === "bearer" ? { authorization: `Bearer ${token}` } : { [header]: token }) },
      body: JSON.stringify(body),
    });
  const chatCall = (model: string) => ({ model, messages: [{ role: "user", content: "hi" }] });

  /** The agent's turn: model calls with the run credential, then the agent's own (lower) usage and the end. */
  async function agent(run: FakeRun, fake: FakeHost, turn: AgentTurn): Promise<void> {
    const id = run.start.runId;
    const { baseUrl, token } = turn.gateway;
    fake.emit(id, { case: "started", value: {} as never });
    const mode = run.start.prompt.trim();
    // opencode-style chat completions (official client, bare model id).
    const openai = new OpenAI({ baseURL: `${baseUrl}/api/v1`, apiKey: token, maxRetries: 0 });
    upstream.script = { text: ["Hel", "lo"], finish: "stop", usage: { input: 10, output: 4 } };
    const completion = await openai.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hello" }] });
    turn.results.chat = completion;
    if (mode === "hold") {
      // The test acts while the run is live (refusals, cancel, a second instance); then it lets the turn go on.
      const resumed = new Promise<void>((resolve) => release.set(id, resolve));
      onHold?.(turn);
      await resumed;
      if (run.ended) return;
    }
    // A claude agent: Messages through `${base_url}/api` with x-api-key, streamed, a side call's id.
    const anthropic = new Anthropic({ baseURL: `${baseUrl}/api`, apiKey: token, maxRetries: 0 });
    upstream.script = { text: ["Wor", "ld"], finish: "stop", usage: { input: 20, output: 6 } };
    const stream = anthropic.messages.stream({ model: "claude-sonnet-4-5", max_tokens: 50, messages: [{ role: "user", content: "hello" }] });
    turn.results.messages = await stream.finalMessage();
    turn.results.countTokens = await anthropic.messages.countTokens({ model: "claude-haiku-4-5", messages: [{ role: "user", content: "hello" }] });
    turn.results.head = (await fetch(`${baseUrl}/api`, { method: "HEAD" })).status;
    turn.results.headSlash = (await fetch(`${baseUrl}/api/`, { method: "HEAD" })).status;
    // What the agent itself reports (less than what went through Portico): the sum of the generations wins.
    fake.emit(id, { case: "content", value: { text: "done" } as never });
    fake.emit(id, { case: "usage", value: { promptTokens: 1n, completionTokens: 1n, totalTokens: 2n } as never });
    fake.emit(id, { case: "turnEnded", value: { stopReason: "end_turn" } as never });
    run.ended = true;
  }

  beforeAll(async () => {
    upstream = await startFakeOpenAI();
    const catalogFile = writeCatalogFile([{ slug: MODEL, name: MODEL, endpoints: [{ provider: "acme", model_id: "m1", context_length: 100_000, pricing: { prompt: String(PRICE.prompt), completion: String(PRICE.completion) } }] }]);
    const env = {
      ...ENV,
      PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `acme=${upstream.url}/v1`,
      PORTICO_KEYLESS_PROVIDERS: "acme",
      PORTICO_CATALOG_FILE: catalogFile,
    };
    h = await startHarness({ provider, env });
    h2 = await startHarness({ sameDatabaseAs: h, env });
    let token: string;
    ({ internId, token } = await createTestIntern(h));
    const patched = await api(h, "PATCH", `/interns/${internId}`, { key: h.tenant.managementKey, body: { model: MODEL } });
    expect(patched.status, patched.text).toBe(200);
    host = startFakeHost({
      coreUrl: h.coreUrl,
      token,
      onStart(run, fake) {
        const gateway = run.start.gateway;
        if (!gateway) return false;
        const turn: AgentTurn = { start: run.start, gateway, results: {}, done: false };
        turns.set(run.start.runId, turn);
        void agent(run, fake, turn)
          .catch((err: unknown) => {
            turn.error = err;
            fake.emit(run.start.runId, { case: "turnFailed", value: { code: 502, reason: "turn_failed", message: String(err), retryable: false } as never });
          })
          .finally(() => (turn.done = true));
        return true;
      },
    });
    await host.welcome;
    // An intern without a model: its agent uses its own provider (no gateway in StartRun).
    const plain = await createTestIntern(h);
    plainInternId = plain.internId;
    plainHost = startFakeHost({ coreUrl: h.coreUrl, token: plain.token });
    await plainHost.welcome;
  });
  afterAll(async () => {
    host?.kill();
    plainHost?.kill();
    await h2?.close();
    await h?.close();
    await upstream?.close();
  });

  it("hands the run a credential, serves every call with the intern's model, and sums the run's generations", async () => {
    const r = await chat(h, internId, chatBody("go"), { key: h.tenant.apiKey });
    expect(r.status, r.raw).toBe(200);
    const runId = [...turns.keys()].at(-1)!;
    const turn = turns.get(runId)!;
    expect(turn.error).toBeUndefined();
    expect(finishOf(r.chunks)?.choices[0].finish_reason, JSON.stringify(r.chunks)).toBe("stop");
    const final = finalOf(r.chunks);

    // StartRun.gateway: this gateway, a prt- token, an expiry in the future, the intern's model.
    expect(turn.gateway.baseUrl).toBe(h.baseUrl);
    expect(turn.gateway.token).toMatch(/^prt-v1-[0-9a-f]{64}$/);
    expect(Number(turn.gateway.expiresAtMs)).toBeGreaterThan(Date.now());
    expect(turn.gateway.model).toBe(MODEL);
    expect(turn.results.head).toBe(200);
    expect(turn.results.headSlash).toBe(200);
    expect((turn.results.countTokens as { input_tokens: number }).input_tokens).toBeGreaterThan(0);

    // The upstream was asked for the intern's model (m1 at acme), never the ids the agent sent.
    const models = upstream.requests.filter((q) => q.url.includes("/chat/completions")).map((q) => q.body.model);
    expect(models.length).toBeGreaterThanOrEqual(2);
    expect(new Set(models)).toEqual(new Set(["m1"]));

    // Every call is a generation linked to the intern, the run and the session, billed to the calling key.
    const list = await api(h, "GET", `/generations?run_id=${runId}`, { key: h.tenant.managementKey });
    expect(list.status, list.text).toBe(200);
    const gens = list.json.data as any[];
    expect(gens).toHaveLength(2);
    for (const g of gens) {
      expect(g).toMatchObject({ intern_id: internId, run_id: runId, intern_session_id: final.session_id, model: MODEL, provider: "acme", status: "success" });
    }
    expect(gens.map((g) => g.requested_model).sort()).toEqual(["claude-sonnet-4-5", "gpt-4o-mini"]);
    const byIntern = await api(h, "GET", `/generations?intern_id=${internId}`, { key: h.tenant.managementKey });
    expect((byIntern.json.data as any[]).map((g) => g.id).sort()).toEqual(gens.map((g) => g.id).sort());
    const ownKey = await api(h, "GET", `/generations?run_id=${runId}`, { key: h.tenant.apiKey });
    expect(ownKey.json.data).toHaveLength(2);
    // gRPC ListGenerations filters the same way and carries the links.
    const generations = grpcClient("portico/generations/v1/generations_service.proto", "portico.generations.v1.GenerationsService", h.coreUrl);
    try {
      const g = await unary(generations, "ListGenerations", { run_id: runId, intern_id: internId }, bearer(h.tenant.managementKey));
      expect(g.error).toBeUndefined();
      expect(g.response.generations.map((x: any) => x.id).sort()).toEqual(gens.map((x) => x.id).sort());
      expect(g.response.generations[0]).toMatchObject({ intern_id: internId, run_id: runId, intern_session_id: final.session_id });
      // The run credential is refused on this RPC too.
      const refused = await unary(generations, "ListGenerations", {}, bearer(turn.gateway.token));
      expect(refused.error?.code).toBe(grpc.status.PERMISSION_DENIED);
    } finally {
      (generations as any).close();
    }

    // The final chunk's usage is the sum of the generations (cost included), not what the agent reported.
    const cost = (10 + 20) * PRICE.prompt + (4 + 6) * PRICE.completion;
    expect(final.usage).toMatchObject({ prompt_tokens: 30, completion_tokens: 10, total_tokens: 40 });
    expect(final.usage.cost).toBeCloseTo(cost, 12);
    const sum = gens.reduce((a, g) => a + (g.total_cost as number), 0);
    expect(final.usage.cost).toBeCloseTo(sum, 12);
    // The session view shows the run's usage as recorded with its end: the same sum.
    const session = await api(h, "GET", `/interns/${internId}/sessions/${encodeURIComponent(final.session_id)}`, { key: h.tenant.apiKey });
    expect(session.json).toMatchObject({ state: "idle", run_id: runId, usage: { prompt_tokens: 30, completion_tokens: 10, total_tokens: 40 } });
    expect(session.json.usage.cost).toBeCloseTo(cost, 12);

    // After the run ended the token is refused, on every instance.
    for (const base of [h.baseUrl, h2.baseUrl]) {
      const after = await post(base, "/chat/completions", turn.gateway.token, chatCall("x"));
      expect(after.status).toBe(401);
      expect(((await after.json()) as any).error.message).toMatch(/revoked/);
    }
  });

  it("accepts the token in Bearer, x-api-key and x-goog-api-key on the model endpoints only, on any instance", async () => {
    const held = nextHold();
    const pending = chat(h, internId, chatBody("hold"), { key: h.tenant.apiKey });
    const turn = await held;
    const { token } = turn.gateway;
    // While the run is live its session shows the sum of its generations so far (the one call made).
    const live = await api(h, "GET", `/interns/${internId}/sessions/${encodeURIComponent(turn.start.sessionId)}`, { key: h.tenant.apiKey });
    expect(live.json).toMatchObject({ state: "streaming", run_id: turn.start.runId, usage: { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 } });
    // So does the operator's view of the intern, for each of its live sessions.
    const admin = await api(h2, "GET", `/interns/${internId}`, { key: h.tenant.managementKey });
    expect(admin.status).toBe(200);
    expect(admin.json.sessions).toEqual([
      expect.objectContaining({ session_id: turn.start.sessionId, run_id: turn.start.runId, usage: expect.objectContaining({ prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 }) }),
    ]);
    expect(admin.json.sessions[0].usage.cost).toBeCloseTo(10 * PRICE.prompt + 4 * PRICE.completion, 12);
    upstream.script = { text: ["ok"], finish: "stop", usage: { input: 1, output: 1 } };
    for (const header of ["bearer", "x-api-key", "x-goog-api-key"] as const) {
      for (const base of [h.baseUrl, h2.baseUrl]) {
        const res = await post(base, "/chat/completions", token, chatCall("whatever-the-agent-says"), header);
        expect(res.status, `${header} at ${base}`).toBe(200);
        expect(upstream.requests.at(-1)!.body.model).toBe("m1");
      }
    }
    // The Gemini dialect (gemini-cli's side call id, x-goog-api-key): served by the intern's model too.
    for (const base of [h.baseUrl, h2.baseUrl]) {
      const res = await fetch(`${base}/api/v1beta/models/gemini-3.5-flash-lite:generateContent`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-goog-api-key": token },
        body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "hi" }] }] }),
      });
      expect(res.status, await res.clone().text()).toBe(200);
      expect(upstream.requests.at(-1)!.body.model).toBe("m1");
    }
    // Every other route refuses it, naming why (403), and never echoes the token.
    const refusals = [
      await api(h, "GET", "/generations", { key: token }),
      await api(h, "GET", "/keys", { key: token }),
      await api(h, "GET", "/models", { key: token }),
      await api(h, "POST", `/interns/${internId}/chat/completions`, { key: token, body: chatBody("hello") }),
      await api(h, "GET", `/interns/${internId}/sessions/${encodeURIComponent(turn.start.sessionId)}`, { key: token }),
    ];
    for (const res of refusals) {
      expect(res.status, res.text).toBe(403);
      expect(res.text).toContain("model endpoints only");
      expect(res.text).not.toContain(token);
    }
    // Past its expiry it is refused (401) even while the run is live.
    await h.database.db.internRunCredential.updateMany({ where: { runId: turn.start.runId }, data: { expiresAt: new Date(Date.now() - 1000) } });
    const expired = await post(h.baseUrl, "/chat/completions", token, chatCall("x"));
    expect(expired.status).toBe(401);
    expect(((await expired.json()) as any).error.message).toMatch(/expired/);
    await h.database.db.internRunCredential.updateMany({ where: { runId: turn.start.runId }, data: { expiresAt: new Date(Date.now() + 60_000) } });
    release.get(turn.start.runId)!();
    const r = await pending;
    expect(finishOf(r.chunks).choices[0].finish_reason).toBe("stop");
    // 1 call before the hold, 8 during it, 1 Messages call after: all linked to the run and summed.
    const gens = (await api(h, "GET", `/generations?run_id=${turn.start.runId}`, { key: h.tenant.managementKey })).json.data as any[];
    expect(gens).toHaveLength(10);
    expect(finalOf(r.chunks).usage.prompt_tokens).toBe(gens.reduce((a, g) => a + g.prompt_tokens, 0));
    expect(h.logs.join("").includes(token)).toBe(false);
    expect(h2.logs.join("").includes(token)).toBe(false);
  });

  it("bills and limits the calls as the key that started the run (its spend limit applies)", async () => {
    const held = nextHold();
    const pending = chat(h, internId, chatBody("hold"), { key: h.tenant.apiKey });
    const turn = await held;
    const limited = await api(h, "PATCH", `/keys/${h.tenant.apiKeyHash}`, { key: h.tenant.managementKey, body: { limit: 0.000001 } });
    expect(limited.status, limited.text).toBe(200);
    try {
      const res = await post(h.baseUrl, "/chat/completions", turn.gateway.token, chatCall("x"));
      expect(res.status).toBe(402);
      expect(((await res.json()) as any).error.message).toContain("this API key's spend limit");
    } finally {
      const lifted = await api(h, "PATCH", `/keys/${h.tenant.apiKeyHash}`, { key: h.tenant.managementKey, body: { limit: null } });
      expect(lifted.status, lifted.text).toBe(200);
    }
    release.get(turn.start.runId)!();
    const r = await pending;
    expect(finishOf(r.chunks).choices[0].finish_reason).toBe("stop");
  });

  it("refuses the token once the run is cancelled, on every instance", async () => {
    const sessionId = `s-${Math.random().toString(36).slice(2)}`;
    const held = nextHold();
    const pending = chat(h, internId, chatBody("hold", { session_id: sessionId }), { key: h.tenant.apiKey });
    const turn = await held;
    expect(turn.start.sessionId).toBe(sessionId);
    const cancelled = await api(h, "POST", `/interns/${internId}/sessions/${encodeURIComponent(sessionId)}/cancel`, { key: h.tenant.apiKey });
    expect(cancelled.status, cancelled.text).toBe(200);
    for (const base of [h.baseUrl, h2.baseUrl]) {
      const res = await post(base, "/messages", turn.gateway.token, { model: "claude-sonnet-4-5", max_tokens: 5, messages: [{ role: "user", content: "x" }] }, "x-api-key");
      expect(res.status).toBe(401);
      expect(((await res.json()) as any).error.message).toMatch(/revoked/);
    }
    host.runs.get(turn.start.runId)!.ended = true;
    release.get(turn.start.runId)!();
    await pending;
  });

  it("gives an intern without a model no gateway, and refuses unknown run tokens", async () => {
    const r = await chat(h, plainInternId, chatBody("hello"), { key: h.tenant.apiKey });
    expect(r.status).toBe(200);
    const started = [...plainHost.runs.values()].at(-1)!;
    expect(started.start.gateway).toBeUndefined();
    // The agent's own usage stays the run's usage.
    expect(finalOf(r.chunks).usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 });
    const unknown = await post(h.baseUrl, "/chat/completions", `prt-v1-${"0".repeat(64)}`, chatCall("x"));
    expect(unknown.status).toBe(401);
  });
});
