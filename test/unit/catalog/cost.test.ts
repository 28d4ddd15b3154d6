/**
 * Cost arithmetic (src/core/catalog/cost.ts): every prompt token billed once at its own price, on the usage each
 * adapter really produces from its provider's wire format (the adapters against the fake upstreams).
 */
import { afterEach, describe, expect, it } from "vitest";
import { costOf, femto, usd, billedTokens } from "../../../src/core/catalog/cost.js";
import { BUILTIN_CATALOG } from "../../../src/core/catalog/builtin-catalog.js";
import { createCatalog } from "../../../src/core/catalog/catalog.js";
import type { Pricing } from "../../../src/core/catalog/types.js";
import { AnthropicAdapter } from "../../../src/core/chat/providers/anthropic.js";
import { GeminiAdapter } from "../../../src/core/chat/providers/gemini.js";
import { OpenAICompatibleAdapter } from "../../../src/core/chat/providers/openai-compatible.js";
import type { ChatChunk, ChatUsage, UpstreamCall } from "../../../src/core/chat/providers/types.js";
import { startFakeAnthropic } from "../../helpers/fake-upstreams/anthropic.js";
import { startFakeGemini } from "../../helpers/fake-upstreams/gemini.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream, Script } from "../../helpers/fake-upstreams/server.js";

const catalog = createCatalog(BUILTIN_CATALOG);
const pricing = (provider: string, id: string): Pricing => catalog.endpointFor(provider, id)!.endpoint.pricing;

let fake: FakeUpstream | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function lastUsage(events: AsyncIterable<ChatChunk>): Promise<ChatUsage | undefined> {
  let usage: ChatUsage | undefined;
  for await (const e of events) if (e.usage) usage = e.usage;
  return usage;
}

describe("money: decimal strings to integer femto-dollars and back", () => {
  it("is exact", () => {
    expect(femto("0.0000025")).toBe(2_500_000_000n);
    expect(femto("1")).toBe(10n ** 15n);
    expect(femto("0.000000000000001")).toBe(1n);
    expect(() => femto("3e-6")).toThrow();
    expect(usd(femto("0.00014"))).toBe(0.00014);
    // 0.1 + 0.2 in floating point is not 0.3; in femto-dollars it is.
    expect(usd(femto("0.1") + femto("0.2"))).toBe(0.3);
  });
});

describe("costOf", () => {
  const p: Pricing = { prompt: "0.000003", completion: "0.000015", input_cache_read: "0.0000003", input_cache_write: "0.00000375" };

  it("uncached, cache-read and cache-write prompt tokens each at their own price, never twice", () => {
    // 1000 prompt tokens of which 600 read from the cache and 300 written to it: 100 uncached.
    const c = costOf(p, { prompt_tokens: 1000, completion_tokens: 50, total_tokens: 1050, prompt_tokens_details: { cached_tokens: 600, cache_write_tokens: 300 } });
    expect(c.prompt).toBe(100n * femto("0.000003"));
    expect(c.cacheRead).toBe(600n * femto("0.0000003"));
    expect(c.cacheWrite).toBe(300n * femto("0.00000375"));
    expect(c.completion).toBe(50n * femto("0.000015"));
    expect(usd(c.total)).toBe(0.002355);
  });

  it("without cache prices, cached tokens cost the prompt price (not zero, not twice)", () => {
    const c = costOf({ prompt: "0.000001", completion: "0.000002" }, { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110, prompt_tokens_details: { cached_tokens: 40 } });
    expect(c.total).toBe(100n * femto("0.000001") + 10n * femto("0.000002"));
  });

  it("clamps inconsistent counts: cached + written beyond the prompt are not billed beyond it", () => {
    const t = billedTokens({ prompt_tokens: 10, completion_tokens: 0, total_tokens: 10, prompt_tokens_details: { cached_tokens: 8, cache_write_tokens: 8 } });
    expect(t).toMatchObject({ uncachedPrompt: 0, cacheRead: 8, cacheWrite: 2 });
    expect(billedTokens({ prompt_tokens: -5, completion_tokens: Number.NaN, total_tokens: 0 })).toMatchObject({ uncachedPrompt: 0, completion: 0 });
  });

  it("reasoning tokens: inside completion tokens at the completion price, or at internal_reasoning when priced apart", () => {
    const u = { prompt_tokens: 0, completion_tokens: 100, total_tokens: 100, completion_tokens_details: { reasoning_tokens: 60 } };
    expect(costOf({ prompt: "0", completion: "0.00001" }, u).completion).toBe(100n * femto("0.00001"));
    expect(costOf({ prompt: "0", completion: "0.00001", internal_reasoning: "0.000001" }, u).completion).toBe(40n * femto("0.00001") + 60n * femto("0.000001"));
  });

  it("per-request and per-image prices", () => {
    const c = costOf({ prompt: "0", completion: "0", request: "0.005", image: "0.001" }, { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 }, 2);
    expect(c).toMatchObject({ request: femto("0.005"), image: 2n * femto("0.001") });
    expect(usd(c.total)).toBe(0.007);
  });

  it("long-context tiers: the tier's prices for the whole request once the prompt exceeds its threshold", () => {
    const pro = pricing("google-ai-studio", "gemini-2.5-pro");
    const small = costOf(pro, { prompt_tokens: 200_000, completion_tokens: 1000, total_tokens: 201_000 });
    const large = costOf(pro, { prompt_tokens: 200_001, completion_tokens: 1000, total_tokens: 201_001 });
    expect(usd(small.total)).toBe(0.26); // 200000 × $1.25/M + 1000 × $10/M
    expect(usd(large.total)).toBe(0.5150025); // 200001 × $2.50/M + 1000 × $15/M
  });

  it("DeepSeek's own cache-hit count is read when the OpenAI detail is absent", () => {
    const ds = pricing("deepseek", "deepseek-chat");
    const u = { prompt_tokens: 1000, completion_tokens: 0, total_tokens: 1000, prompt_cache_hit_tokens: 800, prompt_cache_miss_tokens: 200 } as unknown as ChatUsage;
    expect(costOf(ds, u).total).toBe(800n * femto(ds.input_cache_read!) + 200n * femto(ds.prompt));
  });
});

describe("cost on each adapter's real usage shape (adapter ← fake upstream in the provider's wire format)", () => {
  const call = (f: FakeUpstream, model: string, baseUrl = f.url): UpstreamCall => ({
    model,
    baseUrl,
    apiKey: "k",
    signal: new AbortController().signal,
    body: { model: `x/${model}`, messages: [{ role: "user", content: "hi" }], max_tokens: 100 },
  });
  const script = (usage: Script["usage"]): Script => ({ text: ["ok"], finish: "stop", usage });

  it("OpenAI: prompt_tokens includes prompt_tokens_details.cached_tokens", async () => {
    fake = await startFakeOpenAI(script({ input: 2000, output: 100, cached: 1500 }));
    const adapter = new OpenAICompatibleAdapter();
    const p = pricing("openai", "gpt-4o");
    // $2.50/M uncached, $1.25/M cached, $10/M output: 500 × 2.5 + 1500 × 1.25 + 100 × 10, per million.
    const expected = 0.004125;
    const completion = await adapter.complete(call(fake, "gpt-4o", `${fake.url}/v1`));
    expect(usd(costOf(p, completion.usage!).total)).toBe(expected);
    const streamed = await lastUsage(adapter.stream(call(fake, "gpt-4o", `${fake.url}/v1`)));
    expect(usd(costOf(p, streamed!).total)).toBe(expected);
  });

  it("Anthropic: cache_read_input_tokens and cache_creation_input_tokens apart from input_tokens, mapped so each is billed once", async () => {
    fake = await startFakeAnthropic({ text: ["ok"], finish: "end_turn", usage: { input: 100, output: 50, cached: 4000, cacheWrite: 1000 } });
    const adapter = new AnthropicAdapter();
    const p = pricing("anthropic", "claude-sonnet-4-20250514");
    // $3/M input, $0.30/M cache read, $3.75/M cache write, $15/M output.
    const expected = 0.006; // 300 + 1200 + 3750 + 750 micro-dollars
    const completion = await adapter.complete(call(fake, "claude-sonnet-4-20250514"));
    expect(completion.usage).toMatchObject({ prompt_tokens: 5100, prompt_tokens_details: { cached_tokens: 4000, cache_write_tokens: 1000 } });
    expect(usd(costOf(p, completion.usage!).total)).toBe(expected);
    const streamed = await lastUsage(adapter.stream(call(fake, "claude-sonnet-4-20250514")));
    expect(streamed).toMatchObject({ prompt_tokens: 5100, completion_tokens: 50, prompt_tokens_details: { cached_tokens: 4000, cache_write_tokens: 1000 } });
    expect(usd(costOf(p, streamed!).total)).toBe(expected);
  });

  it("Gemini: promptTokenCount includes cachedContentTokenCount; thoughtsTokenCount billed as output", async () => {
    fake = await startFakeGemini({ text: ["ok"], finish: "STOP", usage: { input: 3000, output: 200, cached: 2000, reasoning: 100 } });
    const adapter = new GeminiAdapter();
    const p = pricing("google-ai-studio", "gemini-2.5-flash");
    // $0.30/M input, $0.075/M cached, $2.50/M output (thinking included).
    const expected = 0.0012; // 300 + 150 + 750 micro-dollars
    const completion = await adapter.complete(call(fake, "gemini-2.5-flash", `${fake.url}/v1beta`));
    expect(completion.usage).toMatchObject({ prompt_tokens: 3000, completion_tokens: 300, prompt_tokens_details: { cached_tokens: 2000 } });
    expect(usd(costOf(p, completion.usage!).total)).toBe(expected);
    const streamed = await lastUsage(adapter.stream(call(fake, "gemini-2.5-flash", `${fake.url}/v1beta`)));
    expect(usd(costOf(p, streamed!).total)).toBe(expected);
  });
});

describe("native web search fees (`web_search`, per search of the provider's own search)", () => {
  const call = (f: FakeUpstream, model: string, baseUrl = f.url): UpstreamCall => ({
    model,
    baseUrl,
    apiKey: "k",
    signal: new AbortController().signal,
    body: { model: `x/${model}`, messages: [{ role: "user", content: "hi" }], max_tokens: 100 },
    webSearch: {},
  });

  it("searches × web_search, beside the token prices; no price or no search → 0", () => {
    const u = { prompt_tokens: 1000, completion_tokens: 100, total_tokens: 1100, server_tool_use: { web_search_requests: 3 } };
    const c = costOf({ prompt: "0.000003", completion: "0.000015", web_search: "0.01" }, u);
    expect(c.webSearch).toBe(3n * femto("0.01"));
    expect(usd(c.total)).toBe(0.0345); // 1000 × $3/M + 100 × $15/M + 3 × $0.01
    expect(billedTokens(u).searches).toBe(3);
    expect(costOf({ prompt: "0", completion: "0" }, u).webSearch).toBe(0n);
    expect(costOf({ prompt: "0", completion: "0", web_search: "0.01" }, { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }).webSearch).toBe(0n);
    // Tiers change token prices only.
    expect(costOf({ prompt: "0", completion: "0", web_search: "0.01", tiers: [{ above_prompt_tokens: 10, prompt: "0.000001" }] }, u).webSearch).toBe(3n * femto("0.01"));
  });

  it("the built-in catalog: Anthropic's $10 per 1,000 searches, Gemini's $35 per 1,000 grounded prompts", () => {
    for (const id of ["claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805", "claude-haiku-4-5-20251001", "claude-3-5-haiku-20241022"]) expect(pricing("anthropic", id).web_search).toBe("0.01");
    for (const id of ["gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite", "gemini-2.0-flash"]) expect(pricing("google-ai-studio", id).web_search).toBe("0.035");
    expect(pricing("openai", "gpt-4o").web_search).toBeUndefined();
  });

  it("Anthropic: usage.server_tool_use.web_search_requests, non-streamed and streamed", async () => {
    fake = await startFakeAnthropic({ text: ["ok"], finish: "end_turn", usage: { input: 1000, output: 100, searches: 2 } });
    const adapter = new AnthropicAdapter();
    const p = pricing("anthropic", "claude-sonnet-4-5-20250929");
    const expected = 0.0245; // 1000 × $3/M + 100 × $15/M + 2 × $0.01
    const completion = await adapter.complete(call(fake, "claude-sonnet-4-5-20250929"));
    expect(completion.usage!.server_tool_use).toEqual({ web_search_requests: 2 });
    expect(usd(costOf(p, completion.usage!).total)).toBe(expected);
    const streamed = await lastUsage(adapter.stream(call(fake, "claude-sonnet-4-5-20250929")));
    expect(streamed!.server_tool_use).toEqual({ web_search_requests: 2 });
    expect(usd(costOf(p, streamed!).total)).toBe(expected);
  });

  it("Gemini: an answer grounded with Google Search counts one grounded prompt; an ungrounded one none", async () => {
    const grounding = { webSearchQueries: ["q"], groundingChunks: [{ web: { uri: "https://a.example", title: "a" } }], groundingSupports: [] };
    const answer = { candidates: [{ content: { parts: [{ text: "ok" }], role: "model" }, finishReason: "STOP", index: 0, groundingMetadata: grounding }], usageMetadata: { promptTokenCount: 1000, candidatesTokenCount: 100, totalTokenCount: 1100 }, modelVersion: "gemini-2.5-flash" };
    fake = await startFakeGemini({ text: [], finish: "STOP", usage: { input: 1000, output: 100 }, raw: { completion: answer, events: [`data: ${JSON.stringify(answer)}\r\n\r\n`] } });
    const adapter = new GeminiAdapter();
    const p = pricing("google-ai-studio", "gemini-2.5-flash");
    const expected = 0.03555; // 1000 × $0.30/M + 100 × $2.50/M + 1 × $0.035
    const completion = await adapter.complete(call(fake, "gemini-2.5-flash", `${fake.url}/v1beta`));
    expect(completion.usage!.server_tool_use).toEqual({ web_search_requests: 1 });
    expect(usd(costOf(p, completion.usage!).total)).toBe(expected);
    const streamed = await lastUsage(adapter.stream(call(fake, "gemini-2.5-flash", `${fake.url}/v1beta`)));
    expect(usd(costOf(p, streamed!).total)).toBe(expected);
    fake.script = { ...fake.script, raw: undefined, text: ["ok"] };
    expect((await adapter.complete(call(fake, "gemini-2.5-flash", `${fake.url}/v1beta`))).usage!.server_tool_use).toBeUndefined();
  });

  it("OpenAI search models: a call with web_search_options counts one search; without it, none", async () => {
    fake = await startFakeOpenAI({ text: ["ok"], finish: "stop", usage: { input: 10, output: 5 } });
    const adapter = new OpenAICompatibleAdapter();
    const searched = await adapter.complete(call(fake, "gpt-4o-search-preview", `${fake.url}/v1`));
    expect(searched.usage!.server_tool_use).toEqual({ web_search_requests: 1 });
    const streamed = await lastUsage(adapter.stream(call(fake, "gpt-4o-search-preview", `${fake.url}/v1`)));
    expect(streamed!.server_tool_use).toEqual({ web_search_requests: 1 });
    const { webSearch: _w, ...plain } = call(fake, "gpt-4o", `${fake.url}/v1`);
    expect((await adapter.complete(plain)).usage!.server_tool_use).toBeUndefined();
  });
});
