/**
 * Upstream time limits per provider (docs/operations.md, "Upstream time limits per provider"): the operator's
 * PORTICO_PROVIDER_<SLUG>_IDLE_TIMEOUT_MS / _FIRST_BYTE_TIMEOUT_MS / _CONNECT_TIMEOUT_MS. Fake providers that
 * pause: before anything reached the caller the next candidate serves (the caller never sees the stall); after
 * the first chunk the stream ends with an error chunk. Requests through the `openai` client.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";

describe("upstream time limits per provider", () => {
  let h: Harness;
  let stallFirst: FakeUpstream;
  let stallMid: FakeUpstream;
  let slowHeaders: FakeUpstream;
  let ok: FakeUpstream;
  let client: OpenAI;
  const script = { text: ["one ", "two ", "three"], finish: "stop", usage: { input: 1, output: 3 } };

  beforeAll(async () => {
    stallFirst = await startFakeOpenAI(script, { stallAfterChunks: 0 });
    stallMid = await startFakeOpenAI(script, { stallAfterChunks: 2 });
    slowHeaders = await startFakeOpenAI(script, { headerDelayMs: 20_000 });
    ok = await startFakeOpenAI({ ...script, text: ["fine"] });
    h = await startHarness({
      provider: "sqlite",
      env: {
        PORTICO_PROVIDER_GROQ_BASE_URL: `${stallFirst.url}/v1`,
        PORTICO_PROVIDER_MISTRAL_BASE_URL: `${stallMid.url}/v1`,
        PORTICO_PROVIDER_XAI_BASE_URL: `${slowHeaders.url}/v1`,
        PORTICO_PROVIDER_TOGETHER_BASE_URL: `${ok.url}/v1`,
        PORTICO_PROVIDER_GROQ_IDLE_TIMEOUT_MS: "300",
        PORTICO_PROVIDER_MISTRAL_IDLE_TIMEOUT_MS: "300",
        PORTICO_PROVIDER_XAI_FIRST_BYTE_TIMEOUT_MS: "300",
      },
    });
    for (const provider of ["groq", "mistral", "xai", "together"]) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider, key: `${provider}-key` } })).status).toBe(200);
    }
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    for (const f of [stallFirst, stallMid, slowHeaders, ok]) await f?.close();
  });

  const text = async (model: string, models: string[]) => {
    const stream = await client.chat.completions.create({ model, models, stream: true, messages: [{ role: "user", content: "hi" }] } as never);
    let out = "";
    for await (const chunk of stream as unknown as AsyncIterable<{ choices: Array<{ delta?: { content?: string } }> }>) out += chunk.choices[0]?.delta?.content ?? "";
    return out;
  };

  it("a stream that stalls before its first chunk is abandoned after the provider's idle limit; the next candidate serves", async () => {
    expect(await text("groq/m", ["groq/m", "together/m"])).toBe("fine");
    await stallFirst.clientAborted(1);
  });

  it("a provider whose response does not begin within its own first-byte limit is abandoned for the next", async () => {
    expect(await text("xai/m", ["xai/m", "together/m"])).toBe("fine");
    await slowHeaders.clientAborted(1);
  });

  it("a stream that stalls after its first chunk ends with an error, never switching provider", async () => {
    const before = ok.requests.length;
    const err = await text("mistral/m", ["mistral/m", "together/m"]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(String((err as Error).message)).toMatch(/upstream|stream/i);
    expect(ok.requests.length).toBe(before);
  });
});
