/**
 * The embeddings clients (src/core/chat/providers/embeddings.ts) on what the integration test's fakes do not
 * produce: an OpenAI-compatible server that answers out of order, in base64 although floats were asked, without
 * usage, or with a vector missing; Gemini's errors; the float32 base64 encoding; Portico's token estimate.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { afterEach, describe, expect, it } from "vitest";
import { decodeBase64Floats, encodeBase64Floats, estimateTokens, geminiEmbedder, openAICompatibleEmbedder } from "../../../../src/core/chat/providers/embeddings.js";
import { UpstreamError, type UpstreamCall } from "../../../../src/core/chat/providers/types.js";
import { startFakeGemini } from "../../../helpers/fake-upstreams/gemini.js";
import type { FakeUpstream } from "../../../helpers/fake-upstreams/server.js";

const KEY = "sk-embeddings-unit-secret";
let server: Server | undefined;
let fake: FakeUpstream | undefined;
afterEach(async () => {
  if (server) await new Promise((r) => server!.close(r));
  await fake?.close();
  server = undefined;
  fake = undefined;
});

/** A loopback server answering every request with `status` and `body`. */
async function answering(status: number, body: unknown): Promise<string> {
  server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    });
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}

const call = (baseUrl: string, body: Record<string, unknown>): UpstreamCall => ({
  model: "m",
  baseUrl,
  apiKey: KEY,
  signal: new AbortController().signal,
  body: { model: "p/m", messages: [], ...body } as UpstreamCall["body"],
});

describe("float32 base64", () => {
  it("round-trips float32 values, little-endian, as OpenAI encodes them", () => {
    const v = [0.5, -1.25, 3.140625, 0];
    const b64 = encodeBase64Floats(v);
    expect(Buffer.from(b64, "base64")).toEqual(Buffer.from(new Float32Array(v).buffer));
    expect(decodeBase64Floats(b64)).toEqual(v);
  });
});

describe("OpenAI-compatible embeddings", () => {
  it("orders vectors by index, decodes base64 answers, and counts tokens itself when the server reports no usage", async () => {
    const url = await answering(200, {
      object: "list",
      data: [
        { object: "embedding", index: 1, embedding: encodeBase64Floats([2, 2.5]) },
        { object: "embedding", index: 0, embedding: [1, 1.5] },
      ],
      model: "m-v2",
    });
    const r = await openAICompatibleEmbedder.embed(call(url, { input: ["hello there", "general kenobi"] }));
    expect(r).toEqual({ vectors: [[1, 1.5], [2, 2.5]], promptTokens: countTokens("hello there") + countTokens("general kenobi"), estimated: true, model: "m-v2" });
  });

  it("a missing vector or one for an input not sent is a retryable failure without the key", async () => {
    const url = await answering(200, { data: [{ index: 0, embedding: [1] }], usage: { prompt_tokens: 2, total_tokens: 2 } });
    const err = await openAICompatibleEmbedder.embed(call(url, { input: ["a", "b"] })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect((err as UpstreamError).message).toContain("no embedding for input 1");
    expect((err as UpstreamError).retryable).toBe(true);
  });

  it("a provider error keeps its status and message, with the key redacted", async () => {
    const url = await answering(400, { error: { message: `bad input for key ${KEY}`, type: "invalid_request_error" } });
    const err = (await openAICompatibleEmbedder.embed(call(url, { input: "x" })).catch((e: unknown) => e)) as UpstreamError;
    expect(err.status).toBe(400);
    expect(err.retryable).toBe(false);
    expect(err.message).toContain("bad input for key [redacted]");
    expect(err.message).not.toContain(KEY);
  });
});

describe("Gemini embeddings", () => {
  it("refuses token ids naming input, and relays Gemini's error status", async () => {
    expect(() => geminiEmbedder.upstreamBody(call("http://x", { input: [[1, 2]] }))).toThrow(/input/);
    fake = await startFakeGemini(undefined, { failStatus: 429, failMessage: "quota" });
    const err = (await geminiEmbedder.embed(call(`${fake.url}/v1beta`, { input: ["a", "b"] })).catch((e: unknown) => e)) as UpstreamError;
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err.status).toBe(429);
    expect(err.message).toContain("RESOURCE_EXHAUSTED: quota");
    expect(fake.requests[0]!.url).toBe("/v1beta/models/m:batchEmbedContents");
  });
});

describe("estimateTokens", () => {
  it("counts texts with the o200k tokenizer and token ids by their number", async () => {
    expect(await estimateTokens("Hello, world")).toBe(3);
    expect(await estimateTokens(["Hello, world", "Hello"])).toBe(4);
    expect(await estimateTokens([5, 6, 7])).toBe(3);
    expect(await estimateTokens([[5, 6], [7]])).toBe(3);
  });
});
