/**
 * A gateway that stops while model streams are open ends each one in band, in its dialect's shape, with the error
 * of the one reason table (docs/api.md, "Streams", "Stopping"): `core_unavailable`, its status (503) and the
 * relay's message. Chat completions carry the reason in the error chunk's `metadata`, as intern streams do.
 * Real HTTP through a gateway of its own (drain time 0) on the harness's core; the provider stalls after its
 * first text, so every stream is open when the gateway stops.
 */
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FastifyInstance } from "fastify";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { buildGateway } from "../../../src/gateway/app.js";
import { createMetrics } from "../../../src/lib/metrics.js";
import { createLogger } from "../../../src/log.js";
import { Reason, ruleOf } from "../../../src/contract/reasons.js";
import { startFakeHost, type FakeHost } from "../interns/fake-host.js";
import { chatBody, createTestIntern } from "../interns/sse-client.js";

const CORE_UNAVAILABLE = ruleOf(Reason.CORE_UNAVAILABLE);
const SHUTTING_DOWN = "The server is shutting down; retry the request.";

describe("streams open when the gateway stops end in band through the reason table", () => {
  let h: Harness;
  let stalled: FakeUpstream;
  let gateway: FastifyInstance;
  let baseUrl: string;
  let host: FakeHost;
  let internId: string;

  beforeAll(async () => {
    // The role chunk and a first text past the probe's bytes, then nothing until the client goes away.
    stalled = await startFakeOpenAI({ text: ["Hello there, friend", " never"], finish: "stop", usage: { input: 1, output: 2 } }, { stallAfterChunks: 2 });
    h = await startHarness({ env: { PORTICO_PROVIDER_GROQ_BASE_URL: `${stalled.url}/v1` } });
    const intern = await createTestIntern(h);
    internId = intern.internId;
    host = startFakeHost({ coreUrl: h.coreUrl, token: intern.token });
    await host.welcome;
    expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "groq", key: "gsk-stalled" } })).status).toBe(200);
    gateway = await buildGateway({
      transport: h.core.createInMemoryTransport(),
      logger: createLogger({ level: "warn", destination: new Writable({ write: (_c, _e, cb) => cb() }) }),
      metrics: createMetrics(),
      bodyLimitBytes: h.config.bodyLimitBytes,
      brand: h.config.brand,
      drainMs: 0,
    });
    await gateway.listen({ host: "127.0.0.1", port: 0 });
    const address = gateway.server.address();
    baseUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  });
  afterAll(async () => {
    await gateway?.close();
    host?.kill();
    await h?.close();
    await stalled?.close();
  });

  /** Opens a stream and reads it until its first text (`first`) arrived; `rest()` reads it to its end. */
  async function open(path: string, body: unknown, first = "Hello there"): Promise<{ status: number; rest: () => Promise<string> }> {
    const res = await fetch(`${baseUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.tenant.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    let text = "";
    while (!text.includes(first)) {
      const { value, done } = await reader.read();
      if (done) break;
      text += dec.decode(value, { stream: true });
    }
    expect(text, path).toContain(first);
    return {
      status: res.status,
      rest: async () => {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return text;
          text += dec.decode(value, { stream: true });
        }
      },
    };
  }

  /** The JSON of each `data:` line (CRLF or LF framed), `[DONE]` left as text. */
  const dataOf = (text: string) =>
    text
      .split(/\r?\n/)
      .filter((l) => l.startsWith("data: "))
      .map((l) => l.slice(6))
      .map((d) => (d === "[DONE]" ? d : JSON.parse(d)));

  it("chat completions, Messages, Responses, Gemini and intern chat each end with core_unavailable's status and the relay's message", async () => {
    const messages = [{ role: "user", content: "hi" }];
    const chat = await open("/api/v1/chat/completions", { model: "groq/m", messages, stream: true });
    const anthropic = await open("/api/v1/messages", { model: "groq/m", max_tokens: 50, messages, stream: true });
    const responses = await open("/api/v1/responses", { model: "groq/m", input: "hi", stream: true });
    const gemini = await open("/api/v1beta/models/groq/m:streamGenerateContent?alt=sse", { contents: [{ role: "user", parts: [{ text: "hi" }] }] });
    // The fake host's "slow" run: a first text, then nothing until it is cancelled.
    const intern = await open(`/api/v1/interns/${internId}/chat/completions`, chatBody("slow"), "tick");
    for (const s of [chat, anthropic, responses, gemini, intern]) expect(s.status).toBe(200);

    await gateway.close();

    const chatData = dataOf(await chat.rest());
    expect(chatData.at(-1)).toBe("[DONE]");
    expect(chatData.at(-2)).toMatchObject({
      object: "chat.completion.chunk",
      choices: [{ index: 0, delta: {}, finish_reason: "error" }],
      error: { code: CORE_UNAVAILABLE.status, message: SHUTTING_DOWN, metadata: { reason: CORE_UNAVAILABLE.wire, retryable: true } },
    });

    const anthropicData = dataOf(await anthropic.rest());
    expect(anthropicData.at(-1)).toEqual({ type: "error", error: { type: "overloaded_error", message: SHUTTING_DOWN } });

    const responsesData = dataOf(await responses.rest());
    expect(responsesData.at(-2)).toMatchObject({ type: "error", code: "server_error", message: SHUTTING_DOWN });
    expect(responsesData.at(-1)).toMatchObject({ type: "response.failed", response: { status: "failed", error: { code: "server_error", message: SHUTTING_DOWN } } });

    const geminiData = dataOf(await gemini.rest());
    expect(geminiData.at(-1)).toEqual({ error: { code: CORE_UNAVAILABLE.status, message: SHUTTING_DOWN, status: "UNAVAILABLE" } });

    // Intern chat (docs/interns.md): the finish error chunk with the envelope's error, the final chunk, [DONE].
    const internData = dataOf(await intern.rest());
    expect(internData.at(-1)).toBe("[DONE]");
    expect(internData.at(-3)).toEqual({
      id: expect.stringMatching(/^chatcmpl-/),
      object: "chat.completion.chunk",
      created: expect.any(Number),
      model: expect.any(String),
      choices: [{ index: 0, delta: {}, finish_reason: "error" }],
      error: { code: CORE_UNAVAILABLE.status, message: SHUTTING_DOWN, metadata: { reason: CORE_UNAVAILABLE.wire, retryable: true } },
    });
    expect(internData.at(-2)).toMatchObject({ object: "chat.completion.chunk", choices: [], usage: null });
  });
});
