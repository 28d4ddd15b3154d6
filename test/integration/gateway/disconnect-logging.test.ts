/**
 * A client that leaves is not an operator's problem: whatever it was waiting for (a non-streaming chat
 * answer, a chat stream before or after its first chunk, an intern stream), no line is logged at error
 * level (50+) and no line carries a stack; the departure is logged at info or debug.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import { defaultScript, type FakeUpstream } from "../../helpers/fake-upstreams/server.js";

describe("client disconnects are not logged as errors", () => {
  let h: Harness;
  let silent: FakeUpstream;
  let slow: FakeUpstream;

  beforeAll(async () => {
    silent = await startFakeOpenAI(defaultScript(), { headerDelayMs: 60_000 });
    slow = await startFakeOpenAI({ text: Array.from({ length: 200 }, (_, i) => `w${i} `), finish: "stop", usage: { input: 1, output: 200 } }, { chunkDelayMs: 50 });
    h = await startHarness({
      env: { PORTICO_PROVIDER_GROQ_BASE_URL: `${silent.url}/v1`, PORTICO_PROVIDER_TOGETHER_BASE_URL: `${slow.url}/v1` },
    });
    for (const [provider, key] of [["groq", "gsk-silent"], ["together", "tg-slow"]] as const) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider, key } })).status).toBe(200);
    }
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([silent, slow].map((f) => f?.close()));
  });

  const chat = (model: string, stream: boolean, signal: AbortSignal) =>
    fetch(`${h.baseUrl}/api/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.tenant.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model, stream, messages: [{ role: "user", content: "hi" }] }),
      signal,
    });

  it("non-streaming chat left before the answer, and a stream left after its first chunk", async () => {
    const before = h.logs.length;
    // Non-streaming: wait until the provider holds the request, then leave.
    const ac1 = new AbortController();
    const pending = chat("groq/m", false, ac1.signal).catch(() => undefined);
    await expect.poll(() => silent.requests.length, { timeout: 10_000 }).toBe(1);
    ac1.abort();
    await pending;
    await silent.clientAborted(1);
    // Streaming: read the first chunk, then leave.
    const ac2 = new AbortController();
    const res = await chat("together/m", true, ac2.signal);
    const reader = res.body!.getReader();
    let text = "";
    while (!text.includes('"content"')) text += new TextDecoder().decode((await reader.read()).value);
    ac2.abort();
    await slow.clientAborted(1);
    // The gateway saw both clients leave (one info line each) before the lines are judged.
    const left = () => h.logs.slice(before).filter((l) => l.includes("client left before the response was complete"));
    await expect.poll(() => left().length, { timeout: 10_000 }).toBe(2);
    expect(left().every((l) => JSON.parse(l).level === 30)).toBe(true);
    // One more answered request: the abandoned calls' promise chains have run out by then.
    expect((await api(h, "GET", "/key", { key: h.tenant.apiKey })).status).toBe(200);
    const lines = h.logs.slice(before).map((l) => JSON.parse(l) as { level: number; msg: string; err?: { stack?: string } });
    expect(lines.filter((l) => l.level >= 50).map((l) => l.msg)).toEqual([]);
    expect(lines.filter((l) => l.err?.stack).map((l) => l.msg)).toEqual([]);
  });
});
