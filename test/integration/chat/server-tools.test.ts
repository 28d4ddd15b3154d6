/**
 * Server tools end to end on the real stack with the `openai` client: a fake OpenAI-compatible model on
 * loopback that asks for server tool calls turn after turn, a fake SearXNG and a fake web site on loopback
 * (loopback reachable for web_fetch only because the operator's setting lists 127.0.0.1). Non-streaming and
 * streaming, a response mixing server and client calls, the bounds, a preset's server tools, gRPC, the refusals
 * and the generation record.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream, Script } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";
import { bearer, grpcClient } from "../../helpers/grpc.js";

const toolTurn = (...calls: Array<[string, string, Record<string, unknown>]>): Script => ({
  text: [],
  toolCalls: calls.map(([id, name, args]) => ({ id, name, arguments: JSON.stringify(args), argumentPieces: [JSON.stringify(args).slice(0, 5), JSON.stringify(args).slice(5)] })),
  finish: "tool_calls",
  usage: { input: 10, output: 2 },
});
const answer = (text: string): Script => ({ text: [text.slice(0, 4), text.slice(4)], finish: "stop", usage: { input: 20, output: 5 } });

describe.each(["sqlite", "postgresql"] as const)("server tools (%s)", (provider) => {
  let h: Harness;
  let model: FakeUpstream;
  let searx: Server;
  let site: Server;
  let searxUrl = "";
  let siteUrl = "";
  const searches: string[] = [];
  let client: OpenAI;

  beforeAll(async () => {
    model = await startFakeOpenAI(answer("Done."));
    searx = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://x");
      if (url.pathname !== "/search" || url.searchParams.get("format") !== "json") return void res.writeHead(403).end("Forbidden");
      searches.push(url.searchParams.get("q") ?? "");
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
        query: url.searchParams.get("q"),
        number_of_results: 3,
        results: [
          { url: "https://tides.example/bay", title: "Bay tides", content: "Tide tables for the bay", engine: "duckduckgo", score: 1 },
          { url: "https://blocked.example/x", title: "Blocked", content: "nope", engine: "bing", score: 0.5 },
          { url: "https://news.example/t", title: "Tide news", content: "Spring tides", engine: "bing", score: 0.4 },
        ],
        answers: [], corrections: [], infoboxes: [], suggestions: [], unresponsive_engines: [],
      }));
    });
    site = createServer((req, res) => {
      if (req.url === "/article") {
        return void res.writeHead(200, { "content-type": "text/html" }).end(
          "<html><head><title>Harbour</title></head><body><nav>menu</nav><h1>Harbour times</h1><p>High tide at 06:10.</p><table><tr><th>Day</th><th>High</th></tr><tr><td>Mon</td><td>06:10</td></tr></table></body></html>",
        );
      }
      if (req.url === "/to-metadata") return void res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/" }).end();
      res.writeHead(404).end();
    });
    await Promise.all([new Promise<void>((r) => searx.listen(0, "127.0.0.1", r)), new Promise<void>((r) => site.listen(0, "127.0.0.1", r))]);
    searxUrl = `http://127.0.0.1:${(searx.address() as AddressInfo).port}`;
    siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    h = await startHarness({
      provider,
      env: {
        PORTICO_PROVIDER_GROQ_BASE_URL: `${model.url}/v1`,
        PORTICO_SEARXNG_URL: searxUrl,
        PORTICO_WEB_FETCH_ALLOW_ADDRESSES: "127.0.0.1",
        PORTICO_SERVER_TOOLS_MAX_TURNS: "4",
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

  it("non-streaming: search, then fetch, then the answer; server calls hidden, usage summed, the generation records them", async () => {
    model.scripts = [
      toolTurn(["c1", "web_search", { query: "bay tides" }], ["c2", "datetime", { timezone: "Europe/Paris" }]),
      toolTurn(["c3", "web_fetch", { url: `${siteUrl}/article` }]),
      answer("High tide is at 06:10."),
    ];
    const before = model.requests.length;
    const res = await client.chat.completions.create({
      model: "groq/llama-3.3-70b",
      messages: [{ role: "user", content: "When is high tide?" }],
      tools: [
        { type: "service:web_search", parameters: { max_results: 2, excluded_domains: ["blocked.example"] } },
        { type: "service:web_fetch", parameters: { max_content_tokens: 200 } },
        { type: "service:datetime" },
      ] as never,
    });
    expect(res.choices[0]!.message.content).toBe("High tide is at 06:10.");
    expect(res.choices[0]!.message.tool_calls).toBeUndefined();
    expect(res.choices[0]!.finish_reason).toBe("stop");
    expect(res.usage).toMatchObject({ prompt_tokens: 40, completion_tokens: 9, total_tokens: 49, server_tool_use: { web_search_requests: 1, datetime_requests: 1, web_fetch_requests: 1 } });

    const sent = model.requests.slice(before).map((r) => r.body);
    expect(sent).toHaveLength(3);
    // Offered as function tools; the server-tool types never reach the provider.
    expect(sent[0].tools.map((t: { type: string; function: { name: string } }) => `${t.type}:${t.function.name}`)).toEqual(["function:web_search", "function:web_fetch", "function:datetime"]);
    const second = sent[1].messages;
    expect(second[1]).toMatchObject({ role: "assistant", tool_calls: [{ id: "c1" }, { id: "c2" }] });
    const searchResult = JSON.parse(second[2].content);
    expect(second[2].tool_call_id).toBe("c1");
    expect(searchResult.results.map((r: { url: string }) => r.url)).toEqual(["https://tides.example/bay", "https://news.example/t"]);
    expect(JSON.parse(second[3].content)).toMatchObject({ timezone: "Europe/Paris", local: expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/) });
    const page = JSON.parse(sent[2].messages.at(-1).content);
    expect(page).toMatchObject({ status: 200, title: "Harbour", final_url: `${siteUrl}/article` });
    expect(page.content).toContain("High tide at 06:10.");
    expect(page.content).toMatch(/\| Day\s*\| High\s*\|/);
    expect(searches).toContain("bay tides");

    const g = await generation(res.id);
    expect(g).toMatchObject({ prompt_tokens: 40, total_tokens: 49, attempts: 3, status: "success" });
    expect(g.server_tools).toMatchObject({
      turns: 3,
      counts: { "service:web_search": 1, "service:datetime": 1, "service:web_fetch": 1 },
      calls: [
        { type: "service:web_search", name: "web_search", ok: true, ms: expect.any(Number) },
        { type: "service:datetime", name: "datetime", ok: true },
        { type: "service:web_fetch", name: "web_fetch", ok: true },
      ],
      stopped_by: null,
    });
  });

  it("a turn mixing server and client calls: the server call runs, the client call is returned to the caller", async () => {
    model.scripts = [toolTurn(["s1", "datetime", {}], ["k1", "get_weather", { city: "Brest" }]), answer("unused")];
    const before = model.requests.length;
    const res = await client.chat.completions.create({
      model: "groq/llama-3.3-70b",
      messages: [{ role: "user", content: "weather now?" }],
      tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }, { type: "service:datetime" }] as never,
    });
    expect(model.requests.length - before).toBe(1);
    expect(res.choices[0]!.finish_reason).toBe("tool_calls");
    expect(res.choices[0]!.message.tool_calls).toEqual([{ id: "k1", type: "function", function: { name: "get_weather", arguments: '{"city":"Brest"}' } }]);
    const g = await generation(res.id);
    expect(g.server_tools.counts).toEqual({ "service:datetime": 1 });
  });

  it("streaming: progress chunks while tools run (skipped by the openai client), then the answer streams; usage summed", async () => {
    model.scripts = [toolTurn(["c1", "web_fetch", { url: `${siteUrl}/to-metadata` }]), answer("Could not read it.")];
    const stream = await client.chat.completions.create({
      model: "groq/llama-3.3-70b",
      messages: [{ role: "user", content: "read the page" }],
      tools: [{ type: "service:web_fetch" }] as never,
      stream: true,
    });
    const chunks: Array<Record<string, any>> = [];
    for await (const chunk of stream) chunks.push(chunk as never);
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
    expect(text).toBe("Could not read it.");
    const activity = chunks.filter((c) => c.server_tool_activity).map((c) => c.server_tool_activity);
    expect(activity.map((a) => a.status)).toEqual(["running", "failed"]);
    expect(activity[0]).toMatchObject({ type: "service:web_fetch", name: "web_fetch", call_id: "c1", turn: 1 });
    expect(activity[1].summary).toMatch(/169\.254\.169\.254 is an address web_fetch may not connect to/);
    for (const c of chunks.filter((x) => x.server_tool_activity)) expect(c.choices).toEqual([]);
    // No tool call reaches the caller; one finish; the usage of both turns.
    expect(chunks.some((c) => c.choices[0]?.delta?.tool_calls)).toBe(false);
    expect(chunks.filter((c) => c.choices[0]?.finish_reason).map((c) => c.choices[0].finish_reason)).toEqual(["stop"]);
    expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 30, completion_tokens: 7, server_tool_use: { web_fetch_requests: 1 } });
    // The tool result the model got says why.
    expect(JSON.parse(model.requests.at(-1)!.body.messages.at(-1).content).error).toMatch(/web_fetch refused/);
    const g = await generation(chunks[0]!.id);
    expect(g).toMatchObject({ streamed: true, prompt_tokens: 30, status: "success", finish_reason: "stop" });
    expect(g.server_tools.calls).toEqual([expect.objectContaining({ type: "service:web_fetch", ok: false })]);

    // The SDK's stream helper accumulates the same answer.
    model.scripts = [toolTurn(["c9", "datetime", {}]), answer("It is late.")];
    const helper = client.chat.completions.stream({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "time?" }], tools: [{ type: "service:datetime" }] as never });
    const final = await helper.finalChatCompletion();
    expect(final.choices[0]!.message.content).toBe("It is late.");

    // A streamed turn mixing a server call (the web_search shorthand) and a client call: the search runs, the
    // client call arrives whole, the stream ends with tool_calls.
    model.scripts = [toolTurn(["s1", "web_search", { query: "tides" }], ["k1", "get_weather", { city: "Brest" }]), answer("unused")];
    const mixed = client.chat.completions.stream({
      model: "groq/llama-3.3-70b",
      messages: [{ role: "user", content: "x" }],
      tools: [{ type: "web_search_preview" }, { type: "function", function: { name: "get_weather", parameters: { type: "object", properties: {} } } }] as never,
    });
    const done = await mixed.finalChatCompletion();
    expect(done.choices[0]!.finish_reason).toBe("tool_calls");
    expect(done.choices[0]!.message.tool_calls).toEqual([expect.objectContaining({ id: "k1", function: { name: "get_weather", arguments: '{"city":"Brest"}' } })]);
    expect(searches.at(-1)).toBe("tides");
    expect((await generation(done.id)).server_tools.counts).toEqual({ web_search_preview: 1 });
  });

  it("bounds: max_uses returns an error result; stop_server_tools_when makes one final turn without tools; the turn limit too", async () => {
    model.scripts = [
      toolTurn(["a", "web_fetch", { url: `${siteUrl}/article` }]),
      toolTurn(["b", "web_fetch", { url: `${siteUrl}/article` }]),
      answer("ok"),
    ];
    let before = model.requests.length;
    const res = await client.chat.completions.create({
      model: "groq/llama-3.3-70b",
      messages: [{ role: "user", content: "x" }],
      tools: [{ type: "service:web_fetch", parameters: { max_uses: 1 } }] as never,
    });
    expect(res.choices[0]!.message.content).toBe("ok");
    const last = model.requests.at(-1)!.body.messages.at(-1);
    expect(JSON.parse(last.content).error).toMatch(/max_uses \(1\)/);
    expect(model.requests.length - before).toBe(3);

    model.scripts = [toolTurn(["a", "datetime", {}]), toolTurn(["b", "datetime", {}]), answer("final")];
    before = model.requests.length;
    const stopped = await client.chat.completions.create({
      model: "groq/llama-3.3-70b",
      messages: [{ role: "user", content: "x" }],
      tools: [{ type: "service:datetime" }] as never,
      stop_server_tools_when: [{ type: "step_count_is", step_count: 1 }],
    } as never);
    const sent = model.requests.slice(before).map((r) => r.body);
    expect(sent.map((b) => b.tool_choice)).toEqual([undefined, "none"]);
    // The model ignored tool_choice "none" and asked again: the call is dropped, the answer ends.
    expect(stopped.choices[0]!.message.tool_calls).toBeUndefined();
    expect((await generation(stopped.id)).server_tools).toMatchObject({ turns: 2, stopped_by: "step_count_is", counts: { "service:datetime": 1 } });

    // The operator's turn limit (4 here): the fourth call is the last, without tools.
    model.scripts = [toolTurn(["a", "datetime", {}])];
    before = model.requests.length;
    const limited = await client.chat.completions.create({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "x" }], tools: [{ type: "service:datetime" }] as never });
    expect(model.requests.length - before).toBe(4);
    expect(model.requests.at(-1)!.body.tool_choice).toBe("none");
    expect((await generation(limited.id)).server_tools).toMatchObject({ turns: 4, stopped_by: "max_turns" });
  });

  it("a server-tool choice forces the first call only; a preset's server tools run too", async () => {
    model.scripts = [toolTurn(["a", "search_models", { query: "claude" }]), answer("Claude it is.")];
    const before = model.requests.length;
    const res = await client.chat.completions.create({
      model: "groq/llama-3.3-70b",
      messages: [{ role: "user", content: "which model?" }],
      tools: [{ type: "service:experimental__search_models", parameters: { max_results: 2 } }] as never,
      tool_choice: { type: "service:experimental__search_models" } as never,
    });
    expect(res.choices[0]!.message.content).toBe("Claude it is.");
    const sent = model.requests.slice(before).map((r) => r.body);
    expect(sent[0].tool_choice).toEqual({ type: "function", function: { name: "search_models" } });
    expect(sent[1].tool_choice).toBe("auto");
    const found = JSON.parse(sent[1].messages.at(-1).content);
    expect(found.models).toHaveLength(2);
    expect(found.models[0].id).toMatch(/claude/);

    const created = await api(h, "POST", "/presets/clock/chat/completions", {
      key: h.tenant.managementKey,
      body: { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "x" }], tools: [{ type: "service:datetime", parameters: { timezone: "Asia/Tokyo" } }] },
    });
    expect(created.status).toBe(200);
    model.scripts = [toolTurn(["a", "datetime", {}]), answer("Tokyo time.")];
    const viaPreset = await client.chat.completions.create({ model: "@preset/clock", messages: [{ role: "user", content: "time?" }] });
    expect(viaPreset.choices[0]!.message.content).toBe("Tokyo time.");
    expect(JSON.parse(model.requests.at(-1)!.body.messages.at(-1).content).timezone).toBe("Asia/Tokyo");

    // The other dialects do not run the loop: the preset's server tool is refused there, not relayed.
    const before2 = model.requests.length;
    const messages = await api(h, "POST", "/messages", { key: h.tenant.apiKey, body: { model: "@preset/clock", max_tokens: 20, messages: [{ role: "user", content: "time?" }] } });
    expect(messages.status).toBe(400);
    expect(messages.text).toMatch(/runs in POST \/api\/v1\/chat\/completions only/);
    const responses = await api(h, "POST", "/responses", { key: h.tenant.apiKey, body: { model: "@preset/clock", input: "time?" } });
    expect(responses.status).toBe(400);
    expect(responses.text).toMatch(/tools\[0\]\.type/);
    expect(model.requests.length).toBe(before2);
  });

  it("with a plugin: response-healing heals the loop's final answer", async () => {
    model.scripts = [toolTurn(["a", "datetime", {}]), { text: ['```json\n{"day": "Mon",}', "\n```"], finish: "stop", usage: { input: 5, output: 5 } }];
    const res = await client.chat.completions.create({
      model: "groq/llama-3.3-70b",
      messages: [{ role: "user", content: "which day? JSON" }],
      response_format: { type: "json_object" },
      tools: [{ type: "service:datetime" }] as never,
      plugins: [{ id: "response-healing" }],
    } as never);
    expect(JSON.parse(res.choices[0]!.message.content!)).toEqual({ day: "Mon" });
    const g = await generation(res.id);
    expect(g.server_tools.counts).toEqual({ "service:datetime": 1 });
    expect(g.plugins).toEqual([expect.objectContaining({ id: "response-healing" })]);
  });

  it("the response cache leaves requests with server tools alone", async () => {
    const body = { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "cache me?" }], tools: [{ type: "service:datetime" }], cache: { ttl_seconds: 60 } };
    model.scripts = [toolTurn(["a", "datetime", {}]), answer("first"), toolTurn(["b", "datetime", {}]), answer("second")];
    const before = model.requests.length;
    const one = await client.chat.completions.create(body as never);
    const two = await client.chat.completions.create(body as never);
    expect([one.choices[0]!.message.content, two.choices[0]!.message.content]).toEqual(["first", "second"]);
    expect(model.requests.length - before).toBe(4);
    // The same without server tools is answered from the cache the second time.
    model.scripts = [answer("cached")];
    const plain = { ...body, tools: undefined, messages: [{ role: "user", content: "cache me without tools" }] };
    const mid = model.requests.length;
    await client.chat.completions.create(plain as never);
    const again = await client.chat.completions.create(plain as never);
    expect(again.choices[0]!.message.content).toBe("cached");
    expect(model.requests.length - mid).toBe(1);
  });

  it("refusals in the envelope: a kind not supported, a parameter not honoured (HTTP); gRPC runs the loop too", async () => {
    const bash = await api(h, "POST", "/chat/completions", {
      key: h.tenant.apiKey,
      body: { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "x" }], tools: [{ type: "service:bash" }] },
    });
    expect(bash.status).toBe(400);
    expect(bash.json.error.metadata).toMatchObject({ reason: "bad_request", field: "tools[0].type" });
    expect(bash.json.error.message).toMatch(/"service:bash" is not supported .*intern.*supported server tools: service:datetime/);
    const streamed = await api(h, "POST", "/chat/completions", {
      key: h.tenant.apiKey,
      body: { model: "groq/llama-3.3-70b", stream: true, messages: [{ role: "user", content: "x" }], tools: [{ type: "web_search", parameters: { user_location: { type: "approximate" } } }] },
    });
    expect(streamed.status).toBe(400);
    expect(streamed.json.error.metadata.field).toBe("tools[0].parameters.user_location");

    model.scripts = [toolTurn(["a", "datetime", {}]), answer("via gRPC")];
    const value = (v: unknown): unknown =>
      typeof v === "string" ? { stringValue: v }
      : typeof v === "number" ? { numberValue: v }
      : Array.isArray(v) ? { listValue: { values: v.map(value) } }
      : { structValue: struct(v as Record<string, unknown>) };
    const struct = (o: Record<string, unknown>) => ({ fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, value(v)])) });
    const chat = grpcClient("portico/chat/v1/chat_service.proto", "portico.chat.v1.ChatService", h.coreUrl);
    const body = struct({ model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "hi" }], tools: [{ type: "service:datetime" }] });
    const unary = await new Promise<any>((resolve, reject) =>
      chat.CreateChatCompletion({ body }, bearer(h.tenant.apiKey), (err: Error | null, r: unknown) => (err ? reject(err) : resolve(r))),
    );
    expect(JSON.stringify(unary)).toContain("via gRPC");
  });
});
