/**
 * The `web` and `web-fetch` plugins end to end with the `openai` client: a fake OpenAI-compatible model, a fake
 * SearXNG and a fake web site on loopback (loopback reachable for web_fetch only because the operator's setting
 * lists 127.0.0.1). The web plugin searches before the model call and returns the answer's citations as
 * `annotations`, streaming and not; domain filters; engine refusals. The web-fetch plugin turns on the
 * web_fetch server tool with the plugin's fields.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream, Script } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";
import { bearer, grpcClient } from "../../helpers/grpc.js";

const answer = (text: string): Script => ({ text: [text.slice(0, 7), text.slice(7, 30), text.slice(30)], finish: "stop", usage: { input: 20, output: 5 } });
const toolTurn = (id: string, name: string, args: Record<string, unknown>): Script => ({
  text: [],
  toolCalls: [{ id, name, arguments: JSON.stringify(args) }],
  finish: "tool_calls",
  usage: { input: 10, output: 2 },
});

type Annotated = { annotations?: Array<{ type: string; url_citation: { url: string; title: string; start_index: number; end_index: number } }> };
type Reported = { plugins?: Array<Record<string, unknown>> };

describe.each(["sqlite", "postgresql"] as const)("web plugins (%s)", (provider) => {
  let h: Harness;
  let model: FakeUpstream;
  let searx: Server;
  let site: Server;
  let siteUrl = "";
  const searches: string[] = [];
  let client: OpenAI;
  const cited = "See [tides.example](https://tides.example/bay/today) and https://docs.example/guide for more.";

  beforeAll(async () => {
    model = await startFakeOpenAI(answer("Done."));
    searx = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://x");
      if (url.pathname !== "/search" || url.searchParams.get("format") !== "json") return void res.writeHead(403).end("Forbidden");
      searches.push(url.searchParams.get("q") ?? "");
      if (url.searchParams.get("q") === "engine breaks") return void res.writeHead(500, { "content-type": "text/html" }).end("<h1>oops</h1>");
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
        query: url.searchParams.get("q"),
        number_of_results: 5,
        results: [
          { url: "https://tides.example/bay/today", title: "Bay tides", content: "Tide tables for the bay", engine: "duckduckgo", score: 1 },
          { url: "https://ads.spam.example/x", title: "Spam", content: "buy", engine: "bing", score: 0.9 },
          { url: "https://docs.example/guide", title: "Guide", content: "How tides work", engine: "bing", score: 0.6 },
          { url: "https://docs.example/blog/2020", title: "Old post", content: "old", engine: "bing", score: 0.5 },
          { url: "https://news.example/t", title: "Tide news", content: "Spring tides", engine: "bing", score: 0.4 },
        ],
        answers: [], corrections: [], infoboxes: [], suggestions: [], unresponsive_engines: [],
      }));
    });
    site = createServer((req, res) => {
      if (req.url === "/article") {
        return void res.writeHead(200, { "content-type": "text/html" }).end(
          `<html><head><title>Harbour</title></head><body><h1>Harbour times</h1><p>${"High tide at 06:10. ".repeat(200)}</p></body></html>`,
        );
      }
      res.writeHead(404).end();
    });
    await Promise.all([new Promise<void>((r) => searx.listen(0, "127.0.0.1", r)), new Promise<void>((r) => site.listen(0, "127.0.0.1", r))]);
    siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    h = await startHarness({
      provider,
      env: {
        PORTICO_PROVIDER_GROQ_BASE_URL: `${model.url}/v1`,
        PORTICO_SEARXNG_URL: `http://127.0.0.1:${(searx.address() as AddressInfo).port}`,
        PORTICO_WEB_FETCH_ALLOW_ADDRESSES: "127.0.0.1",
      },
    });
    const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "groq", key: "gsk-test-groq" } });
    expect(res.status).toBe(200);
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await model?.close();
    await Promise.all([searx, site].map((s) => new Promise<void>((r) => (s ? s.close(() => r()) : r()))));
  });

  const generation = (id: string) =>
    waitFor(`generation ${id}`, async () => {
      const got = await api(h, "GET", `/generation?id=${id}`, { key: h.tenant.apiKey });
      return got.status === 200 ? got.json.data : undefined;
    });
  const refusal = (body: Record<string, unknown>) =>
    client.chat.completions.create(body as never).then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);

  it("non-streaming: searches the last user message, gives the results to the model, returns the citations as annotations", async () => {
    model.scripts = [answer(cited)];
    const before = model.requests.length;
    const res = await client.chat.completions.create({
      model: "groq/llama-3.3-70b",
      messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "old question" }, { role: "assistant", content: "ok" }, { role: "user", content: "bay tides today" }],
      plugins: [{ id: "web", max_results: 3 }],
    } as never);
    expect(searches.at(-1)).toBe("bay tides today");
    const sent = model.requests.slice(before);
    expect(sent).toHaveLength(1);
    const msgs = sent[0]!.body.messages as Array<{ role: string; content: string }>;
    expect(msgs.map((m) => m.role)).toEqual(["system", "system", "user", "assistant", "user"]);
    expect(msgs[1]!.content).toContain("A web search was conducted on");
    expect(msgs[1]!.content).toContain("URL: https://tides.example/bay/today");
    expect(msgs[1]!.content).toContain("URL: https://docs.example/guide");
    expect(msgs[1]!.content).not.toContain("news.example"); // max_results 3
    expect(sent[0]!.body.plugins).toBeUndefined();

    const message = res.choices[0]!.message as typeof res.choices[0]["message"] & Annotated;
    expect(message.content).toBe(cited);
    const link = "[tides.example](https://tides.example/bay/today)";
    expect(message.annotations).toEqual([
      { type: "url_citation", url_citation: { url: "https://tides.example/bay/today", title: "Bay tides", content: "Tide tables for the bay", start_index: cited.indexOf(link), end_index: cited.indexOf(link) + link.length } },
      { type: "url_citation", url_citation: { url: "https://docs.example/guide", title: "Guide", content: "How tides work", start_index: cited.indexOf("https://docs.example/guide"), end_index: cited.indexOf("https://docs.example/guide") + "https://docs.example/guide".length } },
    ]);
    const report = { id: "web", engine: "searxng", queries: 1, results: 3, citations: 2 };
    expect((res as unknown as Reported).plugins).toEqual([report]);
    const g = await generation(res.id);
    expect(g.plugins).toEqual([report]);
  });

  it("streaming: the annotations arrive on the chunk that finishes the choice; the SDK's helper sees the same text", async () => {
    model.scripts = [answer(cited)];
    const stream = await client.chat.completions.create({
      model: "groq/llama-3.3-70b",
      messages: [{ role: "user", content: "tides?" }],
      stream: true,
      plugins: [{ id: "web", search_prompt: "Fresh results ({date}), cite them:" }],
    } as never);
    const chunks: Array<Record<string, any>> = [];
    for await (const chunk of stream as unknown as AsyncIterable<Record<string, any>>) chunks.push(chunk);
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe(cited);
    const finishing = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finishing).toHaveLength(1);
    expect(finishing[0]!.choices[0].delta.annotations.map((a: { url_citation: { url: string } }) => a.url_citation.url)).toEqual(["https://tides.example/bay/today", "https://docs.example/guide"]);
    expect(chunks.filter((c) => c.choices[0]?.delta?.annotations)).toHaveLength(1);
    expect(finishing[0]!.plugins).toEqual([{ id: "web", engine: "searxng", queries: 1, results: 5, citations: 2 }]);
    const sys = (model.requests.at(-1)!.body.messages as Array<{ content: string }>)[0]!.content;
    expect(sys).toMatch(/^Fresh results \(\d{4}-\d\d-\d\d\), cite them:/);

    model.scripts = [answer(cited)];
    const helper = client.chat.completions.stream({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "tides?" }], plugins: [{ id: "web" }] } as never);
    const final = await helper.finalChatCompletion();
    expect(final.choices[0]!.message.content).toBe(cited);
  });

  it("include_domains and exclude_domains: wildcards and path filters", async () => {
    const resultsSent = async (plugin: Record<string, unknown>) => {
      model.scripts = [answer("ok")];
      const res = await client.chat.completions.create({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "tides" }], plugins: [{ id: "web", ...plugin }] } as never);
      const first = (model.requests.at(-1)!.body.messages as Array<{ role: string; content: string }>)[0]!;
      const urls = first.role === "system" ? [...first.content.matchAll(/^URL: (.+)$/gm)].map((m) => m[1]) : [];
      return { urls, report: (res as unknown as Reported).plugins![0] };
    };
    expect((await resultsSent({ exclude_domains: ["*.spam.example", "docs.example/blog"] })).urls).toEqual([
      "https://tides.example/bay/today", "https://docs.example/guide", "https://news.example/t",
    ]);
    expect((await resultsSent({ include_domains: ["docs.example"] })).urls).toEqual(["https://docs.example/guide", "https://docs.example/blog/2020"]);
    expect((await resultsSent({ include_domains: ["*.example/bay/*", "news.*"] })).urls).toEqual(["https://tides.example/bay/today", "https://news.example/t"]);
    const none = await resultsSent({ include_domains: ["nowhere.example"] });
    expect(none.urls).toEqual([]);
    expect(none.report).toEqual({ id: "web", engine: "searxng", queries: 1, results: 0 });
  });

  it("refusals in the envelope, nothing sent to the model: an unconfigured engine, an engine not offered, user_location with SearXNG, mode", async () => {
    const before = model.requests.length;
    const base = { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "x" }] };
    for (const stream of [false, true]) {
      const brave = await refusal({ ...base, stream, plugins: [{ id: "web", engine: "brave" }] });
      expect(brave?.status).toBe(400);
      expect(brave?.message).toContain("PORTICO_BRAVE_SEARCH_API_KEY is not set");
      expect((brave?.error as { metadata?: { field?: string } }).metadata?.field).toBe("plugins[0].engine");
    }
    const exa = await refusal({ ...base, plugins: [{ id: "web", engine: "exa" }] });
    expect(exa?.status).toBe(400);
    expect(exa?.message).toContain("searxng and brave");
    const located = await refusal({ ...base, plugins: [{ id: "web", user_location: { type: "approximate", city: "Brest" } }] });
    expect(located?.status).toBe(400);
    expect((located?.error as { metadata?: { field?: string } }).metadata?.field).toBe("plugins[0].user_location");
    const mode = await refusal({ ...base, plugins: [{ id: "web", mode: "deep" }] });
    expect((mode?.error as { metadata?: { field?: string } }).metadata?.field).toBe("plugins[0].mode");
    const many = await refusal({ ...base, plugins: [{ id: "web", max_results: 21 }] });
    expect((many?.error as { metadata?: { field?: string } }).metadata?.field).toBe("plugins[0].max_results");
    expect(model.requests.length).toBe(before);
    // searxng named explicitly runs; user_location null is no location.
    model.scripts = [answer("fine")];
    const ok = await client.chat.completions.create({ ...base, plugins: [{ id: "web", engine: "searxng", user_location: null, max_uses: 2 }] } as never);
    expect(ok.choices[0]!.message.content).toBe("fine");
    // engine native on a provider without a native web search: Portico's configured engine searches instead.
    model.scripts = [answer("native?")];
    const viaNative = await client.chat.completions.create({ ...base, messages: [{ role: "user", content: "native tides" }], plugins: [{ id: "web", engine: "native" }] } as never);
    expect(searches.at(-1)).toBe("native tides");
    expect((viaNative as unknown as Reported).plugins![0]).toMatchObject({ engine: "searxng", queries: 1 });
    expect(model.requests.at(-1)!.body.web_search_options).toBeUndefined();
  });

  it("web-fetch: the plugin's fields configure the web_fetch server tool; the loop runs it", async () => {
    model.scripts = [toolTurn("f1", "web_fetch", { url: `${siteUrl}/article` }), toolTurn("f2", "web_fetch", { url: `${siteUrl}/article` }), answer("06:10.")];
    const before = model.requests.length;
    const res = await client.chat.completions.create({
      model: "groq/llama-3.3-70b",
      messages: [{ role: "user", content: "read it" }],
      plugins: [{ id: "web-fetch", max_content_tokens: 20, max_uses: 1, allowed_domains: ["127.0.0.1"] }],
    } as never);
    expect(res.choices[0]!.message.content).toBe("06:10.");
    const sent = model.requests.slice(before).map((r) => r.body);
    expect(sent).toHaveLength(3);
    expect(sent[0].tools.map((t: { function: { name: string } }) => t.function.name)).toEqual(["web_fetch"]);
    expect(sent[0].plugins).toBeUndefined();
    const page = JSON.parse(sent[1].messages.at(-1).content);
    expect(page).toMatchObject({ status: 200, title: "Harbour", truncated: true });
    expect(page.content.length).toBeLessThan(200);
    // max_uses 1: the second call is an error result.
    expect(JSON.parse(sent[2].messages.at(-1).content).error).toMatch(/max_uses/);
    expect((res as unknown as Reported).plugins).toEqual([{ id: "web-fetch", tool: "service:web_fetch", max_uses: 1, max_content_tokens: 20 }]);
    const g = await generation(res.id);
    expect(g.server_tools.counts).toEqual({ "service:web_fetch": 2 });

    // blocked_domains: refused by the tool; streaming works the same.
    model.scripts = [toolTurn("f3", "web_fetch", { url: `${siteUrl}/article` }), answer("blocked.")];
    const stream = client.chat.completions.stream({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "read" }], plugins: [{ id: "web-fetch", blocked_domains: ["127.0.0.1"] }] } as never);
    expect((await stream.finalChatCompletion()).choices[0]!.message.content).toBe("blocked.");
    expect(JSON.parse(model.requests.at(-1)!.body.messages.at(-1).content).error).toMatch(/web_fetch refused/);
  });

  it("web-fetch refusals: with the web_fetch tool too; a bad field; on the Messages route", async () => {
    const base = { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "x" }] };
    const both = await refusal({ ...base, tools: [{ type: "service:web_fetch" }], plugins: [{ id: "web-fetch" }] });
    expect(both?.status).toBe(400);
    expect((both?.error as { metadata?: { field?: string } }).metadata?.field).toBe("plugins[0].id");
    const big = await refusal({ ...base, plugins: [{ id: "web-fetch", max_uses: 1000 }] });
    expect((big?.error as { metadata?: { field?: string } }).metadata?.field).toBe("plugins[0].max_uses");
    const messages = await api(h, "POST", "/messages", { key: h.tenant.apiKey, body: { ...base, max_tokens: 20, plugins: [{ id: "web-fetch" }] } });
    expect(messages.status).toBe(400);
    expect(messages.text).toContain("POST /api/v1/chat/completions only");
  });

  it("from a preset, and over gRPC: the same search and annotations", async () => {
    const created = await api(h, "POST", "/presets/searching/chat/completions", {
      key: h.tenant.managementKey,
      body: { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "x" }], plugins: [{ id: "web", include_domains: ["tides.example"] }] },
    });
    expect(created.status, created.text).toBe(200);
    model.scripts = [answer(cited)];
    const viaPreset = await client.chat.completions.create({ model: "@preset/searching", messages: [{ role: "user", content: "preset tides" }] });
    expect(searches.at(-1)).toBe("preset tides");
    expect((viaPreset.choices[0]!.message as Annotated).annotations!.map((a) => a.url_citation.url)).toEqual(["https://tides.example/bay/today"]);

    model.scripts = [answer(cited)];
    const value = (v: unknown): unknown =>
      typeof v === "string" ? { stringValue: v }
      : typeof v === "number" ? { numberValue: v }
      : Array.isArray(v) ? { listValue: { values: v.map(value) } }
      : { structValue: struct(v as Record<string, unknown>) };
    const struct = (o: Record<string, unknown>) => ({ fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, value(v)])) });
    const chat = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
    const body = struct({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "grpc tides" }], plugins: [{ id: "web", max_results: 2 }] });
    const unary = await new Promise<any>((resolve, reject) =>
      chat.CreateChatCompletion({ body }, bearer(h.tenant.apiKey), (err: Error | null, r: unknown) => (err ? reject(err) : resolve(r))),
    );
    expect(searches.at(-1)).toBe("grpc tides");
    const text = JSON.stringify(unary);
    expect(text).toContain("url_citation");
    expect(text).toContain("https://docs.example/guide");
  });

  it("the search failing is a 502 in the envelope, nothing sent to the model; web and web-fetch together; web on the Messages route", async () => {
    const before = model.requests.length;
    const broken = await refusal({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "engine breaks" }], plugins: [{ id: "web" }] });
    expect(broken?.status).toBe(502);
    expect(broken?.message).toContain("the SearXNG search engine answered 500");
    expect(model.requests.length).toBe(before);

    model.scripts = [toolTurn("w1", "web_fetch", { url: `${siteUrl}/article` }), answer(cited)];
    const both = await client.chat.completions.create({
      model: "groq/llama-3.3-70b",
      messages: [{ role: "user", content: "both tides" }],
      plugins: [{ id: "web", max_results: 1 }, { id: "web-fetch" }],
    } as never);
    const sent = model.requests.slice(before).map((r) => r.body);
    expect(sent).toHaveLength(2);
    expect(sent[0].messages[0].content).toContain("URL: https://tides.example/bay/today");
    expect(sent[0].tools.map((t: { function: { name: string } }) => t.function.name)).toEqual(["web_fetch"]);
    expect((both.choices[0]!.message as Annotated).annotations!.map((a) => a.url_citation.url)).toEqual(["https://tides.example/bay/today"]);
    expect((both as unknown as Reported).plugins!.map((p) => p.id)).toEqual(["web", "web-fetch"]);

    model.scripts = [answer(cited)];
    const messages = await api(h, "POST", "/messages", { key: h.tenant.apiKey, body: { model: "groq/llama-3.3-70b", max_tokens: 50, messages: [{ role: "user", content: "messages tides" }], plugins: [{ id: "web" }] } });
    expect(messages.status, messages.text).toBe(200);
    expect(searches.at(-1)).toBe("messages tides");
    expect(JSON.stringify(model.requests.at(-1)!.body.messages)).toContain("URL: https://docs.example/guide");
  });

  it("Messages and Responses dialects: the citations in each dialect's own shape (Anthropic text-block citations, Responses output_text annotations), streaming and not", async () => {
    const link = "[tides.example](https://tides.example/bay/today)";
    const bare = "https://docs.example/guide";
    const anthropic = new Anthropic({ baseURL: `${h.baseUrl}/api`, apiKey: h.tenant.apiKey, maxRetries: 0 });
    const body = { model: "groq/llama-3.3-70b", max_tokens: 50, messages: [{ role: "user" as const, content: "dialect tides" }], plugins: [{ id: "web" }] };

    model.scripts = [answer(cited)];
    const msg = await anthropic.messages.create(body as never);
    expect(searches.at(-1)).toBe("dialect tides");
    const loc = (url: string, title: string, cited_text: string) => ({ type: "web_search_result_location", url, title, encrypted_index: "", cited_text });
    expect(msg.content).toEqual([
      { type: "text", text: "See " },
      { type: "text", text: link, citations: [loc("https://tides.example/bay/today", "Bay tides", "Tide tables for the bay")] },
      { type: "text", text: " and " },
      { type: "text", text: bare, citations: [loc(bare, "Guide", "How tides work")] },
      { type: "text", text: " for more." },
    ]);
    // The answer sent back as the next turn's assistant message is accepted (its citations are the model's own past output).
    model.scripts = [answer("again")];
    const next = await anthropic.messages.create({ ...body, plugins: [], messages: [...body.messages, { role: "assistant", content: msg.content }, { role: "user", content: "more?" }] } as never);
    expect(next.content).toEqual([{ type: "text", text: "again" }]);

    model.scripts = [answer(cited)];
    const events: Array<{ type: string; delta?: { type: string } }> = [];
    const stream = anthropic.messages.stream(body as never);
    stream.on("streamEvent", (e) => void events.push(e as never));
    const final = await stream.finalMessage();
    expect(final.content).toHaveLength(1);
    const block = final.content[0] as { type: string; text: string; citations: unknown[] };
    expect(block.text).toBe(cited);
    expect(block.citations).toEqual([loc("https://tides.example/bay/today", "Bay tides", "Tide tables for the bay"), loc(bare, "Guide", "How tides work")]);
    const citationEvents = events.filter((e) => e.type === "content_block_delta" && e.delta?.type === "citations_delta");
    expect(citationEvents).toHaveLength(2);
    // Before the block's stop.
    expect(events.findIndex((e) => e.type === "content_block_stop")).toBeGreaterThan(events.lastIndexOf(citationEvents.at(-1)!));

    const expected = [
      { type: "url_citation", start_index: cited.indexOf(link), end_index: cited.indexOf(link) + link.length, url: "https://tides.example/bay/today", title: "Bay tides" },
      { type: "url_citation", start_index: cited.indexOf(bare), end_index: cited.indexOf(bare) + bare.length, url: bare, title: "Guide" },
    ];
    model.scripts = [answer(cited)];
    const r = await client.responses.create({ model: "groq/llama-3.3-70b", input: "responses tides", plugins: [{ id: "web" }] } as never);
    const part = (r.output[0] as { content: Array<{ type: string; text: string; annotations: unknown[] }> }).content[0]!;
    expect(part.text).toBe(cited);
    expect(part.annotations).toEqual(expected);
    // Sent back as input, the output is accepted.
    model.scripts = [answer("again")];
    const again = await client.responses.create({ model: "groq/llama-3.3-70b", input: [...(r.output as never[]), { role: "user", content: "more?" }] } as never);
    expect(again.output_text).toBe("again");

    model.scripts = [answer(cited)];
    const rs = client.responses.stream({ model: "groq/llama-3.3-70b", input: "responses tides", plugins: [{ id: "web" }] } as never);
    const added: unknown[] = [];
    rs.on("response.output_text.annotation.added" as never, ((e: { annotation: unknown; annotation_index: number }) => void added.push([e.annotation_index, e.annotation])) as never);
    const done = await rs.finalResponse();
    expect(added).toEqual(expected.map((a, i) => [i, a]));
    expect(((done.output[0] as { content: Array<{ annotations: unknown[] }> }).content[0]!).annotations).toEqual(expected);
  });
});
