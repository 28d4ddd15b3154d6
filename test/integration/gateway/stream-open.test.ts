/**
 * A streaming chat request whose provider is silent is not left in silence: the response opens (200,
 * text/event-stream) and `: keepalive` comments follow while the first upstream byte is awaited; an error
 * after that ends the stream in band. Errors known before the stream opens keep their HTTP status.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import { defaultScript, type FakeUpstream } from "../../helpers/fake-upstreams/server.js";

describe("a streaming answer opens before the provider's first byte", () => {
  let h: Harness;
  let silent: FakeUpstream;
  let lateFailure: FakeUpstream;

  beforeAll(async () => {
    // Silent for a minute (ends early when the client aborts); a 500 after a second and a half.
    silent = await startFakeOpenAI(defaultScript(), { headerDelayMs: 60_000 });
    lateFailure = await startFakeOpenAI(defaultScript(), { headerDelayMs: 1_500, failStatus: 500, failMessage: "late failure" });
    h = await startHarness({
      env: {
        PORTICO_HEARTBEAT_INTERVAL_MS: "100",
        PORTICO_PROVIDER_GROQ_BASE_URL: `${silent.url}/v1`,
        PORTICO_PROVIDER_TOGETHER_BASE_URL: `${lateFailure.url}/v1`,
      },
    });
    for (const [provider, key] of [["groq", "gsk-silent"], ["together", "tg-late"]] as const) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider, key } })).status).toBe(200);
    }
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([silent, lateFailure].map((f) => f?.close()));
  });

  const stream = (model: string, signal?: AbortSignal) =>
    fetch(`${h.baseUrl}/api/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.tenant.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model, stream: true, messages: [{ role: "user", content: "hi" }] }),
      ...(signal ? { signal } : {}),
    });

  it("sends headers and keepalive comments while the provider is silent; leaving aborts the upstream call", async () => {
    const ac = new AbortController();
    const res = await stream("groq/m", ac.signal);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    let text = "";
    while ((text.match(/: keepalive\n\n/g) ?? []).length < 3) {
      const { value, done } = await reader.read();
      if (done) break;
      text += dec.decode(value, { stream: true });
    }
    expect(text).not.toContain("data:");
    expect((text.match(/: keepalive\n\n/g) ?? []).length).toBeGreaterThanOrEqual(3);
    // The keepalives do not wait for the upstream call; on a loaded machine it may arrive after them.
    await silent.received(1);
    expect(silent.requests.length).toBe(1);
    ac.abort();
    await silent.clientAborted(1);
  });

  it("a failure after the stream opened ends it in band: error chunk, then [DONE]", async () => {
    const res = await stream("together/m");
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.indexOf(": keepalive")).toBeGreaterThanOrEqual(0);
    expect(text.indexOf(": keepalive")).toBeLessThan(text.indexOf("data:"));
    const events = text.split("\n\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
    expect(events.at(-1)).toBe("[DONE]");
    const error = JSON.parse(events.at(-2)!);
    expect(error.choices[0].finish_reason).toBe("error");
    expect(error.error.code).toBe(502);
  });

  it("an error known before the stream opens keeps its HTTP status and envelope", async () => {
    const res = await stream("nobody/m");
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: number } };
    expect(body.error.code).toBe(400);
  });
});
