/**
 * Issue 29, "Spreading and retrying": fallback on the errors the real-world service falls back on (a 429 with
 * Retry-After, a context-length error in each provider's wire shape, a model the provider does not serve) but
 * not on a plain 400, a stream that is too slow over the probe abandoned before the caller sees a byte, and
 * each attempt with why it ended recorded on the generation (`attempts_log`, HTTP and gRPC). Real stack, the
 * `openai` client, fake providers on loopback; SQLite and PostgreSQL.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { bearer, grpcClient, unary } from "../../helpers/grpc.js";
import { waitFor } from "../../helpers/wait.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import { startFakeAnthropic } from "../../helpers/fake-upstreams/anthropic.js";
import { startFakeGemini } from "../../helpers/fake-upstreams/gemini.js";
import { defaultScript, type FakeUpstream } from "../../helpers/fake-upstreams/server.js";

type Entry = { provider: string; model: string; credential_source: string; status: number | null; reason: string; duration_ms: number; retry_after_ms?: number; backoff_ms?: number };

describe.each(["sqlite", "postgresql"] as const)("retries and fallback (%s)", (db) => {
  let h: Harness;
  let limited: FakeUpstream;
  let claudeTooLong: FakeUpstream;
  let geminiTooLong: FakeUpstream;
  let missing: FakeUpstream;
  let badRequest: FakeUpstream;
  let slow: FakeUpstream;
  let ok: FakeUpstream;
  let down: FakeUpstream;
  let breaks: FakeUpstream;
  let client: OpenAI;
  let generations: any;

  beforeAll(async () => {
    limited = await startFakeOpenAI(defaultScript(), { failStatus: 429, failMessage: "Rate limit reached", failHeaders: { "retry-after": "30" } });
    claudeTooLong = await startFakeAnthropic(undefined, { failStatus: 400, failMessage: "prompt is too long: 208310 tokens > 200000 maximum" });
    geminiTooLong = await startFakeGemini(undefined, { failStatus: 400, failMessage: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)." });
    missing = await startFakeOpenAI(defaultScript(), { failStatus: 404, failMessage: "The model `m` does not exist or you do not have access to it." });
    badRequest = await startFakeOpenAI(defaultScript(), { failStatus: 400, failMessage: "'temperature' must be at most 2" });
    // One event a second: below a floor of 20 bytes per second over a 300 ms probe (6 bytes needed).
    slow = await startFakeOpenAI({ text: ["a", "b", "c"], finish: "stop", usage: { input: 1, output: 3 } }, { chunkDelayMs: 1_000 });
    ok = await startFakeOpenAI();
    down = await startFakeOpenAI(defaultScript(), { failStatus: 500, failMessage: "upstream is down" });
    breaks = await startFakeOpenAI(defaultScript(), { failAfterChunks: 1 });
    h = await startHarness({
      provider: db,
      env: {
        PORTICO_STREAM_MIN_BYTES_PER_SECOND: "20",
        PORTICO_STREAM_PROBE_MS: "300",
        PORTICO_CHAT_RETRIES: "1",
        PORTICO_CHAT_RETRY_BASE_MS: "100",
        PORTICO_PROVIDER_MISTRAL_BASE_URL: `${limited.url}/v1`,
        PORTICO_PROVIDER_ANTHROPIC_BASE_URL: claudeTooLong.url,
        PORTICO_PROVIDER_GOOGLE_AI_STUDIO_BASE_URL: `${geminiTooLong.url}/v1beta`,
        PORTICO_PROVIDER_XAI_BASE_URL: `${missing.url}/v1`,
        PORTICO_PROVIDER_DEEPSEEK_BASE_URL: `${badRequest.url}/v1`,
        PORTICO_PROVIDER_FIREWORKS_BASE_URL: `${slow.url}/v1`,
        PORTICO_PROVIDER_TOGETHER_BASE_URL: `${ok.url}/v1`,
        PORTICO_PROVIDER_OPENAI_BASE_URL: `${down.url}/v1`,
        PORTICO_PROVIDER_GROQ_BASE_URL: `${breaks.url}/v1`,
      },
    });
    for (const [provider, key] of [
      ["mistral", "ms-limited"], ["anthropic", "sk-ant-long"], ["google-ai-studio", "AIza-long"], ["xai", "xai-missing"],
      ["deepseek", "ds-bad"], ["fireworks", "fw-slow"], ["together", "tg-ok"], ["openai", "sk-down"], ["groq", "gsk-breaks"],
    ] as const) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider, key } })).status).toBe(200);
    }
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
    generations = grpcClient("portico/generations/v1/generations_service.proto", "portico.generations.v1.GenerationsService", h.coreUrl);
  });
  afterAll(async () => {
    generations?.close();
    await h?.close();
    await Promise.all([limited, claudeTooLong, geminiTooLong, missing, badRequest, slow, ok, down, breaks].map((f) => f?.close()));
  });

  /** The generation's attempts log over HTTP, once the record was written. */
  const attemptsOf = (id: string) =>
    waitFor(`generation ${id}`, async () => {
      const res = await api(h, "GET", `/generation?id=${id}`, { key: h.tenant.apiKey });
      return res.status === 200 ? (res.json.data.attempts_log as Entry[]) : undefined;
    });
  const create = (models: string[], extra: Record<string, unknown> = {}) =>
    client.chat.completions.create({ model: models[0]!, models, messages: [{ role: "user", content: "hi" }], ...extra } as never) as unknown as Promise<{ id: string; provider: string; choices: Array<{ message: { content: string } }> }>;

  it("falls back past a 429 with Retry-After, Anthropic's and Gemini's context-length errors and a missing model, at once, in order", async () => {
    const counts = () => [limited, claudeTooLong, geminiTooLong, missing, ok].map((f) => f.requests.length);
    const before = counts();
    const res = await create(["mistral/m", "anthropic/claude-x", "google-ai-studio/gemini-x", "xai/m", "together/m"]);
    expect(res.provider).toBe("together");
    expect(res.choices[0]!.message.content).toBe("Hello, world");
    expect(counts().map((n, i) => n - before[i]!)).toEqual([1, 1, 1, 1, 1]);
    const log = await attemptsOf(res.id);
    expect(log.map((e) => [e.provider, e.status, e.reason])).toEqual([
      ["mistral", 429, "rate_limited"],
      ["anthropic", 400, "context_length"],
      ["google-ai-studio", 400, "context_length"],
      ["xai", 404, "model_unavailable"],
      ["together", 200, "served"],
    ]);
    expect(log[0]!.retry_after_ms).toBe(30_000);
    for (const e of log) expect(e).toMatchObject({ credential_source: "byok", duration_ms: expect.any(Number) });

    // Inside the provider's wait the rate-limited credential is skipped and logged as cooling; gRPC reads the same log.
    const again = await create(["mistral/m", "together/m"]);
    expect(limited.requests.length).toBe(before[0]! + 1);
    const second = await attemptsOf(again.id);
    expect(second.map((e) => e.reason)).toEqual(["cooling", "served"]);
    expect(second[0]!.retry_after_ms).toBeGreaterThan(20_000);
    const { response, error } = await unary(generations, "GetGeneration", { id: again.id }, bearer(h.tenant.apiKey));
    expect(error).toBeFalsy();
    expect(JSON.parse(response.generation.attempts_log)).toEqual(second);
  });

  it("a plain 400 is the caller's error: not retried, not passed to the next candidate", async () => {
    const before = ok.requests.length;
    const res = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "deepseek/m", models: ["deepseek/m", "together/m"], messages: [{ role: "user", content: "hi" }] } });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.text).toContain("temperature");
    expect(ok.requests.length).toBe(before);
    expect(badRequest.requests.length).toBe(1);
  });

  it("a stream below the bytes-per-second floor over the probe is abandoned; the caller sees only the next provider's stream", async () => {
    const stream = (await client.chat.completions.create({ model: "fireworks/m", models: ["fireworks/m", "together/m"], messages: [{ role: "user", content: "hi" }], stream: true } as never)) as unknown as AsyncIterable<{ id: string; provider: string; choices: Array<{ delta: { content?: string } }> }>;
    let text = "";
    let id = "";
    const providers = new Set<string>();
    for await (const c of stream) {
      id = c.id;
      providers.add(c.provider);
      text += c.choices[0]?.delta.content ?? "";
    }
    expect(text).toBe("Hello, world");
    expect([...providers]).toEqual(["together"]);
    await slow.clientAborted();
    expect((await attemptsOf(id)).map((e) => [e.provider, e.reason])).toEqual([["fireworks", "slow_stream"], ["together", "served"]]);
  });

  it("an outage is retried on the same candidate once (PORTICO_CHAT_RETRIES=1) after a jittered backoff below the base, then the request fails", async () => {
    const before = down.requests.length;
    const res = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "openai/m", messages: [{ role: "user", content: "hi" }] } });
    expect(res.status).toBe(502);
    expect(down.requests.length).toBe(before + 2);
    const list = await api(h, "GET", "/generations?limit=1&status=error", { key: h.tenant.managementKey });
    const id = (list.json.data as Array<{ id: string; requested_model: string }>).find((g) => g.requested_model === "openai/m")?.id;
    expect(id).toBeDefined();
    const log = await attemptsOf(id!);
    expect(log.map((e) => [e.provider, e.status, e.reason])).toEqual([["openai", 500, "outage"], ["openai", 500, "outage"]]);
    expect(log[1]!.backoff_ms).toBeGreaterThanOrEqual(0);
    expect(log[1]!.backoff_ms).toBeLessThan(100);
  });

  /** A stream through the openai client: its text, providers and id; an in-band error chunk ends it (the client raises it). */
  async function streamOf(models: string[]) {
    const stream = (await client.chat.completions.create({ model: models[0]!, models, messages: [{ role: "user", content: "hi" }], stream: true } as never)) as unknown as AsyncIterable<{ id: string; provider: string; choices: Array<{ delta: { content?: string }; finish_reason: string | null }> }>;
    let text = "";
    let id = "";
    let failed = false;
    const providers = new Set<string>();
    try {
      for await (const c of stream) {
        id = c.id;
        providers.add(c.provider);
        text += c.choices[0]?.delta.content ?? "";
        if (c.choices[0]?.finish_reason === "error") failed = true;
      }
    } catch {
      failed = true;
    }
    return { text, id, failed, providers: [...providers] };
  }

  it("a stream that breaks during the probe, before the caller saw a byte, is abandoned for the next candidate", async () => {
    breaks.script = defaultScript();
    breaks.knobs = { failAfterChunks: 1 }; // the role chunk (0 bytes of text), then the provider's error event
    const before = ok.requests.length;
    const got = await streamOf(["groq/m", "together/m"]);
    expect(got).toMatchObject({ text: "Hello, world", failed: false, providers: ["together"] });
    expect(ok.requests.length).toBe(before + 1);
    expect((await attemptsOf(got.id)).map((e) => [e.provider, e.reason])).toEqual([["groq", "outage"], ["together", "served"]]);
  });

  it("never switches after the first byte was sent: a stream that breaks ends in band, the next candidate is not called", async () => {
    // Past the probe's 6 bytes with its first text, then the provider's error event after the second.
    breaks.script = { text: ["Hello there, friend", " more", " never"], finish: "stop", usage: { input: 1, output: 3 } };
    breaks.knobs = { failAfterChunks: 3 };
    const before = ok.requests.length;
    const got = await streamOf(["groq/m2", "together/m"]);
    expect(got).toMatchObject({ text: "Hello there, friend more", failed: true, providers: ["groq"] });
    expect(ok.requests.length).toBe(before);
    expect((await attemptsOf(got.id)).map((e) => [e.provider, e.reason])).toEqual([["groq", "served"]]);
  });

  it("the error chunk of a stream broken after its first byte carries its reason in metadata, as every in-band error", async () => {
    breaks.script = { text: ["Hello there, friend", " more", " never"], finish: "stop", usage: { input: 1, output: 3 } };
    breaks.knobs = { failAfterChunks: 3, failMessage: "overloaded now" };
    const res = await fetch(`${h.baseUrl}/api/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.tenant.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "groq/m3", messages: [{ role: "user", content: "hi" }], stream: true }),
    });
    expect(res.status).toBe(200);
    const data = (await res.text()).split("\n\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
    expect(data.at(-1)).toBe("[DONE]");
    const chunk = JSON.parse(data.at(-2)!);
    expect(chunk.choices[0].finish_reason).toBe("error");
    expect(chunk.error).toEqual({ code: 502, message: expect.stringContaining("overloaded now"), metadata: { reason: "upstream_failed", retryable: true } });
  });
});
