/**
 * The `web` plugin's native search (docs/plugins.md, "Native search") end to end with the `openai` client: fake
 * Anthropic, Gemini and OpenAI providers on loopback answer in their own native-search wire formats (Anthropic's
 * server_tool_use / web_search_tool_result blocks and text-block citations, Gemini's groundingMetadata, OpenAI's
 * search-model annotations). The request each provider gets carries its own search tool with the plugin's
 * options; the answer carries the provider's citations as `url_citation` annotations, streaming and not. No
 * search engine is configured here, so an absent engine means native; an option the provider's tool cannot
 * honour and a provider without native search are 400s naming the field, nothing sent.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { messageEvents, startFakeAnthropic } from "../../helpers/fake-upstreams/anthropic.js";
import { startFakeGemini } from "../../helpers/fake-upstreams/gemini.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream, Script } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";
import { writeCatalogFile } from "../../helpers/catalog-file.js";

type Annotation = { type: string; url_citation: { url: string; title: string; content?: string; start_index: number; end_index: number } };
type Annotated = { annotations?: Annotation[] };
type Reported = { plugins?: Array<Record<string, unknown>> };

const SHANNON = "https://en.wikipedia.org/wiki/Claude_Shannon";
const CITED = "Claude Shannon was born on April 30, 1916, in Petoskey, Michigan";
const CITED_TEXT = "Claude Elwood Shannon (April 30, 1916 – February 24, 2001) was an American mathematician";
const citation = { type: "web_search_result_location", url: SHANNON, title: "Claude Shannon - Wikipedia", encrypted_index: "Eo8BCioIAhgBIiQy", cited_text: CITED_TEXT };
const anthropicSearchResult = {
  type: "web_search_tool_result",
  tool_use_id: "srvtoolu_01",
  content: [{ type: "web_search_result", url: SHANNON, title: "Claude Shannon - Wikipedia", encrypted_content: "EqgfCioIARgB", page_age: "April 30, 2025" }],
};
const anthropicUsage = { input_tokens: 600, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 40, server_tool_use: { web_search_requests: 1 } };

/** Anthropic's Messages answer after a web search (docs.anthropic.com, "Web search tool", the response example). */
const anthropicSearched: Script = {
  text: [],
  finish: "end_turn",
  usage: { input: 600, output: 40 },
  raw: {
    completion: {
      id: "msg_native1",
      type: "message",
      role: "assistant",
      model: "claude-sonnet-4-5-20250929",
      content: [
        { type: "text", text: "I'll search. " },
        { type: "server_tool_use", id: "srvtoolu_01", name: "web_search", input: { query: "claude shannon birth date" } },
        anthropicSearchResult,
        { type: "text", text: "Based on the search results, " },
        { type: "text", text: CITED, citations: [citation] },
        { type: "text", text: "." },
      ],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: anthropicUsage,
    },
    events: [
      ["message_start", { message: { id: "msg_native1", type: "message", role: "assistant", model: "claude-sonnet-4-5-20250929", content: [], stop_reason: null, stop_sequence: null, usage: { ...anthropicUsage, output_tokens: 1 } } }],
      ["content_block_start", { index: 0, content_block: { type: "text", text: "" } }],
      ["content_block_delta", { index: 0, delta: { type: "text_delta", text: "I'll search. " } }],
      ["content_block_stop", { index: 0 }],
      ["content_block_start", { index: 1, content_block: { type: "server_tool_use", id: "srvtoolu_01", name: "web_search", input: {} } }],
      ["content_block_delta", { index: 1, delta: { type: "input_json_delta", partial_json: '{"query": "claude shannon birth date"}' } }],
      ["content_block_stop", { index: 1 }],
      ["content_block_start", { index: 2, content_block: anthropicSearchResult }],
      ["content_block_stop", { index: 2 }],
      ["content_block_start", { index: 3, content_block: { type: "text", text: "" } }],
      ["content_block_delta", { index: 3, delta: { type: "text_delta", text: "Based on the search results, " } }],
      ["content_block_stop", { index: 3 }],
      ["content_block_start", { index: 4, content_block: { type: "text", text: "", citations: [] } }],
      ["content_block_delta", { index: 4, delta: { type: "citations_delta", citation } }],
      ["content_block_delta", { index: 4, delta: { type: "text_delta", text: CITED.slice(0, 20) } }],
      ["content_block_delta", { index: 4, delta: { type: "text_delta", text: CITED.slice(20) } }],
      ["content_block_stop", { index: 4 }],
      ["content_block_start", { index: 5, content_block: { type: "text", text: "" } }],
      ["content_block_delta", { index: 5, delta: { type: "text_delta", text: "." } }],
      ["content_block_stop", { index: 5 }],
      ["message_delta", { delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 40, server_tool_use: { web_search_requests: 1 } } }],
      ["message_stop", {}],
    ].map(([type, data]) => `event: ${type as string}\ndata: ${JSON.stringify({ type, ...(data as object) })}\n\n`),
  },
};
const ANTHROPIC_TEXT = `I'll search. Based on the search results, ${CITED}.`;

// A search turn Anthropic pauses (`pause_turn`, its server tools' loop at its limit), then ends on the continuation.
const SECOND = "https://en.wikipedia.org/wiki/Information_theory";
const citation2 = { type: "web_search_result_location", url: SECOND, title: "Information theory - Wikipedia", encrypted_index: "Eo8BCioIAhgC", cited_text: "founded by Claude Shannon in the 1940s" };
type Turn = Parameters<typeof messageEvents>[0];
const pausedTurn: Turn = {
  id: "msg_paused1", model: "claude-sonnet-4-5-20250929", stop_reason: "pause_turn",
  content: [
    { type: "text", text: "I'll search. " },
    { type: "server_tool_use", id: "srvtoolu_01", name: "web_search", input: { query: "claude shannon birth date" } },
    anthropicSearchResult,
    { type: "text", text: CITED, citations: [citation] },
  ],
  usage: { input_tokens: 500, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 40, server_tool_use: { web_search_requests: 1 } },
};
const resumedTurn: Turn = {
  id: "msg_paused2", model: "claude-sonnet-4-5-20250929", stop_reason: "end_turn",
  content: [
    { type: "server_tool_use", id: "srvtoolu_02", name: "web_search", input: { query: "information theory founder" } },
    { type: "web_search_tool_result", tool_use_id: "srvtoolu_02", content: [{ type: "web_search_result", url: SECOND, title: "Information theory - Wikipedia", encrypted_content: "EqgfCioIARgC" }] },
    { type: "text", text: "; he founded information theory.", citations: [citation2] },
  ],
  usage: { input_tokens: 900, cache_creation_input_tokens: 0, cache_read_input_tokens: 100, output_tokens: 30, server_tool_use: { web_search_requests: 2 } },
};
const turnScript = (m: Turn): Script => ({ text: [], finish: m.stop_reason, usage: { input: 0, output: 0 }, raw: { completion: m, events: messageEvents(m) } });
const PAUSED_TEXT = `I'll search. ${CITED}; he founded information theory.`;
// claude-sonnet-4.5: 1400 uncached × $3/M + 100 cache reads × $0.30/M + 70 output × $15/M + 3 searches × $0.01.
const PAUSED_COST = 0.03528;

// Gemini: grounding segments count UTF-8 bytes ("Español" has a two-byte ñ before the cited sentence).
const G1 = "Dans « Español », ";
const G2 = "Spain won Euro 2024, defeating England 2-1 in the final.";
const REDIRECT = "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AbF9wXE";
const grounding = {
  webSearchQueries: ["UEFA Euro 2024 winner"],
  searchEntryPoint: { renderedContent: "<style>…</style>" },
  groundingChunks: [{ web: { uri: REDIRECT, title: "aljazeera.com" } }, { web: { uri: `${REDIRECT}2`, title: "uefa.com" } }],
  groundingSupports: [{ segment: { startIndex: Buffer.byteLength(G1), endIndex: Buffer.byteLength(G1 + G2), text: G2 }, groundingChunkIndices: [0, 1] }],
};
const geminiUsage = { promptTokenCount: 30, candidatesTokenCount: 20, totalTokenCount: 50 };
const geminiSearched: Script = {
  text: [],
  finish: "STOP",
  usage: { input: 30, output: 20 },
  raw: {
    completion: {
      candidates: [{ content: { parts: [{ text: G1 + G2 }], role: "model" }, finishReason: "STOP", index: 0, groundingMetadata: grounding }],
      usageMetadata: geminiUsage,
      modelVersion: "gemini-2.5-flash",
      responseId: "resp_native1",
    },
    events: [
      { candidates: [{ content: { parts: [{ text: G1 }], role: "model" }, index: 0 }], usageMetadata: { promptTokenCount: 30, totalTokenCount: 30 }, modelVersion: "gemini-2.5-flash", responseId: "resp_native1" },
      { candidates: [{ content: { parts: [{ text: G2 }], role: "model" }, finishReason: "STOP", index: 0, groundingMetadata: grounding }], usageMetadata: geminiUsage, modelVersion: "gemini-2.5-flash", responseId: "resp_native1" },
    ].map((d) => `data: ${JSON.stringify(d)}\r\n\r\n`),
  },
};

// OpenAI's search models: the annotations are already url_citations (platform.openai.com, "Web search", chat completions).
const O = "Today's top story is from [example news](https://news.example/today?utm_source=openai).";
const openAiAnnotation = { type: "url_citation", url_citation: { start_index: O.indexOf("["), end_index: O.length - 1, title: "Top story", url: "https://news.example/today?utm_source=openai" } };
const openAiSearched: Script = {
  text: [],
  finish: "stop",
  usage: { input: 12, output: 9 },
  raw: {
    completion: {
      id: "chatcmpl-native1",
      object: "chat.completion",
      created: 1764150000,
      model: "gpt-4o-search-preview",
      choices: [{ index: 0, message: { role: "assistant", content: O, refusal: null, annotations: [openAiAnnotation] }, finish_reason: "stop" }],
      usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 },
    },
    events: [
      { choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] },
      { choices: [{ index: 0, delta: { content: O.slice(0, 30) }, finish_reason: null }] },
      { choices: [{ index: 0, delta: { content: O.slice(30) }, finish_reason: null }] },
      { choices: [{ index: 0, delta: { annotations: [openAiAnnotation] }, finish_reason: null }] },
      { choices: [{ index: 0, delta: {}, finish_reason: "stop" }] },
      { choices: [], usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 } },
    ].map((d) => `data: ${JSON.stringify({ id: "chatcmpl-native1", object: "chat.completion.chunk", created: 1764150000, model: "gpt-4o-search-preview", ...d })}\n\n`).concat(["data: [DONE]\n\n"]),
  },
};

describe.each(["sqlite", "postgresql"] as const)("web plugin, native search (%s)", (provider) => {
  let h: Harness;
  let anthropic: FakeUpstream;
  let gemini: FakeUpstream;
  let openai: FakeUpstream;
  let groq: FakeUpstream;
  let client: OpenAI;

  beforeAll(async () => {
    [anthropic, gemini, openai, groq] = await Promise.all([startFakeAnthropic(anthropicSearched), startFakeGemini(geminiSearched), startFakeOpenAI(openAiSearched), startFakeOpenAI()]);
    const catalogFile = writeCatalogFile([{
    slug: "openai/gpt-4o-search-preview",
    name: "GPT-4o Search Preview",
    supported_parameters: ["max_tokens", "web_search_options", "response_format"],
    endpoints: [{ provider: "openai", model_id: "gpt-4o-search-preview", context_length: 128_000, pricing: { prompt: "0.0000025", completion: "0.00001" } }],
  }]);
    h = await startHarness({
      provider,
      env: {
        PORTICO_PROVIDER_ANTHROPIC_BASE_URL: anthropic.url,
        PORTICO_PROVIDER_GOOGLE_AI_STUDIO_BASE_URL: `${gemini.url}/v1beta`,
        PORTICO_PROVIDER_OPENAI_BASE_URL: `${openai.url}/v1`,
        PORTICO_PROVIDER_GROQ_BASE_URL: `${groq.url}/v1`,
        PORTICO_CATALOG_FILE: catalogFile,
      },
    });
    for (const [p, key] of [["anthropic", "sk-ant-test"], ["google-ai-studio", "AIza-test"], ["openai", "sk-test"], ["groq", "gsk-test"]]) {
      const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: p, key } });
      expect(res.status, res.text).toBe(200);
    }
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([anthropic, gemini, openai, groq].map((f) => f?.close()));
  });

  const messages = [{ role: "user" as const, content: "When was Claude Shannon born?" }];
  const generation = (id: string) =>
    waitFor(`generation ${id}`, async () => {
      const got = await api(h, "GET", `/generation?id=${id}`, { key: h.tenant.apiKey });
      return got.status === 200 ? got.json.data : undefined;
    });
  const streamed = async (body: Record<string, unknown>) => {
    const stream = await client.chat.completions.create({ ...body, stream: true } as never);
    const chunks: Array<Record<string, any>> = [];
    for await (const chunk of stream as unknown as AsyncIterable<Record<string, any>>) chunks.push(chunk);
    return {
      text: chunks.map((c) => c.choices[0]?.delta?.content ?? "").join(""),
      finishing: chunks.filter((c) => c.choices[0]?.finish_reason),
      withAnnotations: chunks.filter((c) => c.choices[0]?.delta?.annotations),
    };
  };
  const refusal = (body: Record<string, unknown>) =>
    client.chat.completions.create(body as never).then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);

  it("Anthropic: the web_search_20250305 tool with the plugin's options; the text blocks' citations become url_citations", async () => {
    const plugin = { id: "web", engine: "native", max_uses: 3, include_domains: ["wikipedia.org", "https://britannica.com/biography"], user_location: { type: "approximate", city: "Brest", country: "FR", timezone: "Europe/Paris" } };
    const res = await client.chat.completions.create({ model: "anthropic/claude-sonnet-4.5", messages, plugins: [plugin] } as never);
    const sent = anthropic.requests.at(-1)!.body;
    expect(sent.tools).toEqual([{
      type: "web_search_20250305", name: "web_search", max_uses: 3, allowed_domains: ["wikipedia.org", "britannica.com/biography"],
      user_location: { type: "approximate", city: "Brest", country: "FR", timezone: "Europe/Paris" },
    }]);
    // The provider searches: no Portico results message.
    expect(JSON.stringify(sent.messages)).not.toContain("A web search was conducted");
    const message = res.choices[0]!.message as typeof res.choices[0]["message"] & Annotated;
    expect(message.content).toBe(ANTHROPIC_TEXT);
    const at = ANTHROPIC_TEXT.indexOf(CITED);
    expect(message.annotations).toEqual([{ type: "url_citation", url_citation: { url: SHANNON, title: "Claude Shannon - Wikipedia", content: CITED_TEXT, start_index: at, end_index: at + CITED.length } }]);
    expect(ANTHROPIC_TEXT.slice(message.annotations![0]!.url_citation.start_index, message.annotations![0]!.url_citation.end_index)).toBe(CITED);
    const report = { id: "web", engine: "native", queries: 0, served_by: "native", citations: 1 };
    expect((res as unknown as Reported).plugins).toEqual([report]);
    expect((await generation(res.id)).plugins).toEqual([report]);

    // Streamed: the same text, the citation on the chunk that finishes the choice, once.
    const s = await streamed({ model: "anthropic/claude-sonnet-4.5", messages, plugins: [{ id: "web", exclude_domains: ["pinterest.com"] }] });
    expect(anthropic.requests.at(-1)!.body.tools).toEqual([{ type: "web_search_20250305", name: "web_search", blocked_domains: ["pinterest.com"] }]);
    expect(s.text).toBe(ANTHROPIC_TEXT);
    expect(s.withAnnotations).toHaveLength(1);
    expect(s.finishing[0]!.choices[0].delta.annotations).toEqual(message.annotations);
    expect(s.finishing[0]!.plugins).toEqual([report]);
  });

  it("Anthropic pause_turn: the paused turn is continued (its content sent back unchanged), one whole answer, usage and search fees summed, streamed and not", async () => {
    const body = { model: "anthropic/claude-sonnet-4.5", messages, plugins: [{ id: "web", engine: "native" }] };
    const span = (text: string) => ({ start_index: PAUSED_TEXT.indexOf(text), end_index: PAUSED_TEXT.indexOf(text) + text.length });
    const annotations = [
      { type: "url_citation", url_citation: { url: SHANNON, title: "Claude Shannon - Wikipedia", content: CITED_TEXT, ...span(CITED) } },
      { type: "url_citation", url_citation: { url: SECOND, title: "Information theory - Wikipedia", content: citation2.cited_text, ...span("; he founded information theory.") } },
    ];
    const usage = { prompt_tokens: 1500, completion_tokens: 70, total_tokens: 1570, server_tool_use: { web_search_requests: 3 } };
    try {
      anthropic.scripts = [turnScript(pausedTurn), turnScript(resumedTurn)];
      const before = anthropic.requests.length;
      const res = await client.chat.completions.create(body as never);
      const [first, second] = anthropic.requests.slice(before).map((r) => r.body);
      expect(anthropic.requests.length - before).toBe(2);
      expect(second.messages).toEqual([...first.messages, { role: "assistant", content: pausedTurn.content }]);
      expect(second.tools).toEqual(first.tools);
      const message = res.choices[0]!.message as typeof res.choices[0]["message"] & Annotated;
      expect(message.content).toBe(PAUSED_TEXT);
      expect(res.choices[0]!.finish_reason).toBe("stop");
      expect(message.annotations).toEqual(annotations);
      expect(res.usage).toMatchObject(usage);
      // BYOK-served: nothing to pay to Portico; the provider's price, search fees included, as the upstream cost.
      expect((res.usage as unknown as { cost_details: { upstream_inference_cost: number } }).cost_details.upstream_inference_cost).toBe(PAUSED_COST);
      expect(await generation(res.id)).toMatchObject({ upstream_inference_cost: PAUSED_COST, prompt_tokens: 1500, completion_tokens: 70, finish_reason: "stop" });

      anthropic.scripts = [turnScript(pausedTurn), turnScript(resumedTurn)];
      const at = anthropic.requests.length;
      const stream = await client.chat.completions.create({ ...body, stream: true } as never);
      const chunks: Array<Record<string, any>> = [];
      for await (const chunk of stream as unknown as AsyncIterable<Record<string, any>>) chunks.push(chunk);
      expect(anthropic.requests.length - at).toBe(2);
      expect(anthropic.requests.at(-1)!.body.messages.at(-1)).toEqual({ role: "assistant", content: pausedTurn.content });
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe(PAUSED_TEXT);
      const finishing = chunks.filter((c) => c.choices[0]?.finish_reason);
      expect(finishing).toHaveLength(1);
      expect(finishing[0]!.choices[0].delta.annotations).toEqual(annotations);
      const last = chunks.findLast((c) => c.usage)!;
      expect(last.usage).toMatchObject({ ...usage, cost_details: { upstream_inference_cost: PAUSED_COST } });
      expect(await generation(last.id)).toMatchObject({ upstream_inference_cost: PAUSED_COST, streamed: true });

      // The Messages dialect on an Anthropic endpoint gets the continued turn too (docs/dialects.md).
      anthropic.scripts = [turnScript(pausedTurn), turnScript(resumedTurn)];
      const native = await api(h, "POST", "/messages", { key: h.tenant.apiKey, body: { ...body, max_tokens: 500 } });
      expect(native.status, native.text).toBe(200);
      expect(native.json.stop_reason).toBe("end_turn");
      expect(native.json.content.map((b: { text?: string }) => b.text ?? "").join("")).toBe(PAUSED_TEXT);
      expect(native.json.usage).toMatchObject({ input_tokens: 1400, cache_read_input_tokens: 100, output_tokens: 70, server_tool_use: { web_search_requests: 3 } });
    } finally {
      anthropic.scripts = undefined;
    }
  });

  it("Gemini: the google_search tool; groundingMetadata's byte offsets become UTF-16 url_citation spans", async () => {
    const res = await client.chat.completions.create({ model: "google/gemini-2.5-flash", messages, plugins: [{ id: "web" }] } as never);
    expect(gemini.requests.at(-1)!.body.tools).toEqual([{ google_search: {} }]);
    const message = res.choices[0]!.message as typeof res.choices[0]["message"] & Annotated;
    expect(message.content).toBe(G1 + G2);
    const span = { start_index: G1.length, end_index: G1.length + G2.length };
    expect(message.annotations).toEqual([
      { type: "url_citation", url_citation: { url: REDIRECT, title: "aljazeera.com", content: G2, ...span } },
      { type: "url_citation", url_citation: { url: `${REDIRECT}2`, title: "uefa.com", content: G2, ...span } },
    ]);
    expect((G1 + G2).slice(span.start_index, span.end_index)).toBe(G2);

    const s = await streamed({ model: "google/gemini-2.5-flash", messages, plugins: [{ id: "web", engine: "native" }] });
    expect(s.text).toBe(G1 + G2);
    expect(s.withAnnotations).toHaveLength(1);
    expect(s.finishing[0]!.choices[0].delta.annotations).toEqual(message.annotations);
  });

  it("OpenAI search model (catalog: web_search_options): web_search_options with the location; its annotations pass, streamed on the finish chunk", async () => {
    const res = await client.chat.completions.create({
      model: "openai/gpt-4o-search-preview",
      messages,
      plugins: [{ id: "web", engine: "native", user_location: { type: "approximate", country: "GB", city: "London" } }],
    } as never);
    expect(openai.requests.at(-1)!.body.web_search_options).toEqual({ user_location: { type: "approximate", approximate: { country: "GB", city: "London" } } });
    const message = res.choices[0]!.message as typeof res.choices[0]["message"] & Annotated;
    expect(message.content).toBe(O);
    expect(message.annotations).toEqual([openAiAnnotation]);
    expect((res as unknown as Reported).plugins![0]).toMatchObject({ engine: "native", citations: 1 });

    const s = await streamed({ model: "openai/gpt-4o-search-preview", messages, plugins: [{ id: "web" }] });
    expect(openai.requests.at(-1)!.body.web_search_options).toEqual({});
    expect(s.text).toBe(O);
    expect(s.withAnnotations).toHaveLength(1);
    expect(s.finishing[0]!.choices[0].delta.annotations).toEqual([openAiAnnotation]);
  });

  it("what a native tool cannot honour, and a provider without one: 400 naming the field, nothing sent", async () => {
    const counts = () => [anthropic, gemini, openai, groq].map((f) => f.requests.length);
    const before = counts();
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ["anthropic/claude-sonnet-4.5", { max_results: 3 }, "plugins[0].max_results"],
      ["anthropic/claude-sonnet-4.5", { search_prompt: "Results:" }, "plugins[0].search_prompt"],
      ["anthropic/claude-sonnet-4.5", { include_domains: ["a.example"], exclude_domains: ["b.example"] }, "plugins[0].exclude_domains"],
      ["anthropic/claude-sonnet-4.5", { include_domains: ["*.example.com"] }, "plugins[0].include_domains[0]"],
      ["google/gemini-2.5-flash", { user_location: { type: "approximate", city: "Paris" } }, "plugins[0].user_location"],
      ["google/gemini-2.5-flash", { include_domains: ["a.example"] }, "plugins[0].include_domains"],
      ["google/gemini-2.5-flash", { max_uses: 2 }, "plugins[0].max_uses"],
      ["openai/gpt-4o-search-preview", { exclude_domains: ["b.example"] }, "plugins[0].exclude_domains"],
      ["groq/llama-3.3-70b", { engine: "native" }, "plugins[0].engine"],
      ["groq/llama-3.3-70b", {}, "plugins[0].id"],
    ];
    for (const [model, extra, field] of cases) {
      for (const stream of [false, true]) {
        const err = await refusal({ model, messages, stream, plugins: [{ id: "web", ...extra }] });
        expect(err?.status, `${model} ${field}`).toBe(400);
        expect((err?.error as { metadata?: { field?: string } }).metadata?.field, model).toBe(field);
      }
    }
    const err = await refusal({ model: "groq/llama-3.3-70b", messages, plugins: [{ id: "web", engine: "native" }] });
    expect(err?.message).toContain("no native web search");
    expect(counts()).toEqual(before);
  });
});
