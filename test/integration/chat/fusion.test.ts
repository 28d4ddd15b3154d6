/**
 * The fusion plugin (docs/plugins.md, "fusion") on POST /api/v1/chat/completions, end to end with the `openai`
 * client: three fake OpenAI-compatible providers on loopback play two panel models answering differently and a
 * judge. The judge gets the panel's answers, the answer is the judge's, usage and cost are summed over every call;
 * streaming and not, the Limits table's bounds, a failing panel member, the panel's server tools, from a preset.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream, Script } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";
import { writeCatalogFile } from "../../helpers/catalog-file.js";

const say = (text: string, input: number, output: number): Script => ({ text: [text.slice(0, 5), text.slice(5)], finish: "stop", usage: { input, output } });
const ALPHA = "Alpha says: the capital is Paris.";
const BETA = "Beta says: Paris, on the Seine.";
const JUDGE = "The capital of France is Paris, on the Seine.";
// Catalog prices (USD per token): alpha 1e-6 / 2e-6, beta 3e-6 / 4e-6, judge 5e-6 / 6e-6.
const COST = { alpha: 10 * 1e-6 + 5 * 2e-6, beta: 20 * 3e-6 + 7 * 4e-6, judge: 100 * 5e-6 + 9 * 6e-6 };

describe.each(["sqlite", "postgresql"] as const)("fusion plugin (%s)", (provider) => {
  let h: Harness;
  let alpha: FakeUpstream;
  let beta: FakeUpstream;
  let judge: FakeUpstream;
  let client: OpenAI;

  beforeAll(async () => {
    [alpha, beta, judge] = await Promise.all([startFakeOpenAI(), startFakeOpenAI(), startFakeOpenAI()]);
    const model = (slug: string, provider: string, id: string, prompt: string, completion: string) => ({
      slug,
      name: slug,
      endpoints: [{ provider, model_id: id, context_length: 100_000, pricing: { prompt, completion } }],
    });
    const catalogFile = writeCatalogFile([
      model("alpha/a1", "alpha", "a1", "0.000001", "0.000002"),
      model("beta/b1", "beta", "b1", "0.000003", "0.000004"),
      model("judge/j1", "judge", "j1", "0.000005", "0.000006"),
    ]);
    h = await startHarness({
      provider,
      env: {
        PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `alpha=${alpha.url}/v1,beta=${beta.url}/v1,judge=${judge.url}/v1`,
        PORTICO_KEYLESS_PROVIDERS: "alpha,beta,judge",
        PORTICO_CATALOG_FILE: catalogFile,
        // The built-in panels name catalog models of OpenAI, Anthropic, Google: OpenAI is played by the alpha fake.
        PORTICO_PROVIDER_OPENAI_BASE_URL: `${alpha.url}/v1`,
      },
    });
    const byok = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "openai", key: "sk-test" } });
    expect(byok.status, byok.text).toBe(200);
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([alpha?.close(), beta?.close(), judge?.close()]);
  });
  beforeEach(() => {
    alpha.script = say(ALPHA, 10, 5);
    beta.script = say(BETA, 20, 7);
    judge.script = say(JUDGE, 100, 9);
    for (const f of [alpha, beta, judge]) {
      f.knobs = {};
      delete f.scripts;
    }
  });

  const messages = [{ role: "user" as const, content: "What is the capital of France?" }];
  const fusion = (extra: Record<string, unknown> = {}) => ({ id: "fusion", analysis_models: ["alpha/a1", "beta/b1"], model: "judge/j1", tools: [], ...extra });
  const lastBody = (f: FakeUpstream) => f.requests.at(-1)!.body as { model: string; messages: Array<{ role: string; content: string }>; plugins?: unknown; tools?: unknown };
  const recorded = (id: string) =>
    waitFor(`generation ${id}`, async () => {
      const got = await api(h, "GET", `/generation?id=${id}`, { key: h.tenant.apiKey });
      return got.status === 200 ? (got.json.data as Record<string, unknown>) : undefined;
    });

  it("non-streaming: the judge gets the panel's answers, the answer is the judge's, usage and cost summed", async () => {
    const counts = [alpha.requests.length, beta.requests.length, judge.requests.length];
    const res = await client.chat.completions.create({ model: "judge/j1", messages, plugins: [fusion()] } as never);
    expect(res.choices[0]!.message.content).toBe(JUDGE);
    expect([alpha.requests.length, beta.requests.length, judge.requests.length]).toEqual(counts.map((n) => n + 1));

    // The panel got the conversation as sent, without the plugin; the judge got it plus the panel's answers.
    for (const f of [alpha, beta]) {
      const body = lastBody(f);
      expect(body.messages).toEqual(messages);
      expect(body.plugins).toBeUndefined();
      expect(body.tools).toBeUndefined();
    }
    const judged = lastBody(judge);
    expect(judged.model).toBe("j1");
    expect(judged.messages[0]).toEqual(messages[0]);
    const prompt = judged.messages.at(-1)!;
    expect(prompt.role).toBe("user");
    expect(prompt.content).toContain(`<answer model="alpha/a1">\n${ALPHA}\n</answer>`);
    expect(prompt.content).toContain(`<answer model="beta/b1">\n${BETA}\n</answer>`);
    expect(prompt.content).toContain("You are the judge of a panel of 2 models");

    const usage = res.usage as unknown as { prompt_tokens: number; completion_tokens: number; total_tokens: number; cost: number; cost_details: { upstream_inference_cost: number } };
    expect(usage.prompt_tokens).toBe(130);
    expect(usage.completion_tokens).toBe(21);
    expect(usage.total_tokens).toBe(151);
    expect(usage.cost).toBeCloseTo(COST.alpha + COST.beta + COST.judge, 12);
    expect(usage.cost_details.upstream_inference_cost).toBeCloseTo(COST.alpha + COST.beta + COST.judge, 12);

    const report = (res as unknown as { plugins: Array<Record<string, unknown>> }).plugins.find((p) => p.id === "fusion")!;
    expect(report).toMatchObject({ judge: "judge/j1", succeeded: 2, failed: 0, tools: [], preset: null });
    expect(report.panel).toEqual([
      { model: "alpha/a1", ok: true, provider: "alpha", prompt_tokens: 10, completion_tokens: 5, cost: expect.closeTo(COST.alpha, 12) },
      { model: "beta/b1", ok: true, provider: "beta", prompt_tokens: 20, completion_tokens: 7, cost: expect.closeTo(COST.beta, 12) },
    ]);
    expect(JSON.stringify(report)).not.toContain("Paris");

    const gen = await recorded(res.id);
    expect(gen).toMatchObject({ prompt_tokens: 130, completion_tokens: 21, total_tokens: 151, model: "judge/j1" });
    expect(gen.total_cost as number).toBeCloseTo(COST.alpha + COST.beta + COST.judge, 12);
    expect((gen.plugins as Array<Record<string, unknown>>)[0]).toMatchObject({ id: "fusion", succeeded: 2 });
  });

  it("streaming: the judge's answer streams, the usage chunk has the sum", async () => {
    const stream = await client.chat.completions.create({ model: "judge/j1", messages, stream: true, stream_options: { include_usage: true }, plugins: [fusion()] } as never);
    let text = "";
    let usage: { prompt_tokens: number; completion_tokens: number; cost?: number } | undefined;
    let report: Record<string, unknown> | undefined;
    for await (const chunk of stream as unknown as AsyncIterable<{ choices: Array<{ delta: { content?: string } }>; usage?: typeof usage; plugins?: Array<Record<string, unknown>> }>) {
      text += chunk.choices[0]?.delta.content ?? "";
      if (chunk.usage) usage = chunk.usage;
      if (chunk.plugins) report = chunk.plugins.find((p) => p.id === "fusion");
    }
    expect(text).toBe(JUDGE);
    expect(usage).toMatchObject({ prompt_tokens: 130, completion_tokens: 21 });
    expect(usage!.cost).toBeCloseTo(COST.alpha + COST.beta + COST.judge, 12);
    expect(report).toMatchObject({ succeeded: 2, failed: 0 });
    // The panel members are never streamed.
    expect(alpha.requests.at(-1)!.body.stream).not.toBe(true);
    expect(lastBody(judge).messages.at(-1)!.content).toContain(BETA);
  });

  it("the Limits table: analysis_models 1 to 8, tools at most 8, max_tool_calls 1 to 16 → 400 naming the field, nothing sent", async () => {
    const before = [alpha.requests.length, beta.requests.length, judge.requests.length];
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ analysis_models: Array(9).fill("alpha/a1") }, "plugins[0].analysis_models"],
      [{ analysis_models: [] }, "plugins[0].analysis_models"],
      [{ tools: Array(9).fill({ type: "service:datetime" }) }, "plugins[0].tools"],
      [{ max_tool_calls: 17 }, "plugins[0].max_tool_calls"],
      [{ max_tool_calls: 0 }, "plugins[0].max_tool_calls"],
    ];
    for (const [extra, field] of cases) {
      for (const stream of [false, true]) {
        const err = await client.chat.completions
          .create({ model: "judge/j1", messages, stream, plugins: [fusion(extra)] } as never)
          .then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
        expect(err?.status, field).toBe(400);
        expect((err?.error as { metadata?: { field?: string } }).metadata?.field).toBe(field);
      }
    }
    expect([alpha.requests.length, beta.requests.length, judge.requests.length]).toEqual(before);
  });

  it("a panel model that is not a model id → 400 naming its analysis_models entry", async () => {
    const err = await client.chat.completions
      .create({ model: "judge/j1", messages, plugins: [fusion({ analysis_models: ["alpha/a1", "nonsense"] })] } as never)
      .then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    expect(err?.status).toBe(400);
    expect((err?.error as { metadata?: { field?: string } }).metadata?.field).toBe("plugins[0].analysis_models[1]");
  });

  it("a failing panel member: the rest answer, the judge gets theirs, the report says which failed", async () => {
    beta.knobs.failStatus = 500;
    const res = await client.chat.completions.create({ model: "judge/j1", messages, plugins: [fusion()] } as never);
    expect(res.choices[0]!.message.content).toBe(JUDGE);
    const prompt = lastBody(judge).messages.at(-1)!.content;
    expect(prompt).toContain(ALPHA);
    expect(prompt).not.toContain(BETA);
    expect(prompt).toContain("panel of 1 model ");
    const report = (res as unknown as { plugins: Array<Record<string, unknown>> }).plugins[0]!;
    expect(report).toMatchObject({ succeeded: 1, failed: 1 });
    expect((report.panel as Array<Record<string, unknown>>)[1]).toMatchObject({ model: "beta/b1", ok: false, error: { code: 502 } });
    expect(res.usage!.prompt_tokens).toBe(110);
  });

  it("every panel member failing: 502, the judge is not called", async () => {
    alpha.knobs.failStatus = 500;
    beta.knobs.failStatus = 503;
    const before = judge.requests.length;
    const err = await client.chat.completions
      .create({ model: "judge/j1", messages, plugins: [fusion()] } as never)
      .then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    expect(err?.status).toBe(502);
    expect(err?.message).toContain("No fusion panel member answered");
    expect(judge.requests.length).toBe(before);
  });

  it("the panel's tools: a member calls a server tool, Portico runs it, the member's answer reaches the judge", async () => {
    alpha.scripts = [
      { text: [], toolCalls: [{ id: "t1", name: "datetime", arguments: "{}" }], finish: "tool_calls", usage: { input: 4, output: 1 } },
      say(ALPHA, 10, 5),
    ];
    const res = await client.chat.completions.create({ model: "judge/j1", messages, plugins: [fusion({ tools: [{ type: "service:datetime" }], max_tool_calls: 2 })] } as never);
    expect(res.choices[0]!.message.content).toBe(JUDGE);
    const toolTurn = alpha.requests.at(-2)!.body as { tools: Array<{ function: { name: string } }> };
    expect(toolTurn.tools.map((t) => t.function.name)).toEqual(["datetime"]);
    expect(lastBody(alpha).messages.some((m) => m.role === "tool")).toBe(true);
    expect(lastBody(judge).messages.at(-1)!.content).toContain(ALPHA);
    expect(lastBody(judge).tools).toBeUndefined();
    // Both alpha turns count.
    expect(res.usage!.prompt_tokens).toBe(4 + 10 + 20 + 100);
  });

  it("from a preset: the preset's fusion plugin runs", async () => {
    const created = await api(h, "POST", "/presets/fused/chat/completions", {
      key: h.tenant.managementKey,
      body: { model: "judge/j1", messages, plugins: [fusion()] },
    });
    expect(created.status, created.text).toBe(200);
    const res = await api(h, "POST", "/chat/completions", { key: h.tenant.apiKey, body: { model: "@preset/fused", messages } });
    expect(res.status, res.text).toBe(200);
    expect(res.json.choices[0].message.content).toBe(JUDGE);
    expect(res.json.plugins[0]).toMatchObject({ id: "fusion", succeeded: 2 });
    expect(lastBody(judge).messages.at(-1)!.content).toContain(ALPHA);
  });

  it("the plugin's model names the judge: the request's model is replaced before plan", async () => {
    const before = [alpha.requests.length, judge.requests.length];
    const res = await client.chat.completions.create({ model: "alpha/a1", messages, plugins: [fusion()] } as never);
    expect(res.choices[0]!.message.content).toBe(JUDGE);
    // alpha answered once (as a panel member), the judge wrote the answer.
    expect([alpha.requests.length, judge.requests.length]).toEqual([before[0]! + 1, before[1]! + 1]);
    const gen = await recorded(res.id);
    expect(gen).toMatchObject({ model: "judge/j1", provider: "judge" });
  });

  it("the fusion server tool: the model asks the panel, the judge's synthesis is the tool result, usage summed", async () => {
    judge.scripts = [
      { text: [], toolCalls: [{ id: "f1", name: "fusion", arguments: JSON.stringify({ question: "Capital of France?" }) }], finish: "tool_calls", usage: { input: 4, output: 1 } },
      say(JUDGE, 100, 9),
    ];
    const res = await client.chat.completions.create({
      model: "judge/j1",
      messages,
      tools: [{ type: "service:fusion", parameters: { analysis_models: ["alpha/a1"], model: "beta/b1" } }],
    } as never);
    expect(res.choices[0]!.message.content).toBe(JUDGE);
    // The panel got the question alone; the tool's judge (beta) got alpha's answer; the model got beta's synthesis.
    expect(lastBody(alpha).messages).toEqual([{ role: "user", content: "Capital of France?" }]);
    expect(lastBody(beta).messages.at(-1)!.content).toContain(`<answer model="alpha/a1">\n${ALPHA}\n</answer>`);
    const tool = lastBody(judge).messages.find((m) => m.role === "tool")!;
    expect(JSON.parse(tool.content)).toEqual({ answer: BETA, panel: [{ model: "alpha/a1", ok: true }] });
    expect(res.usage!.prompt_tokens).toBe(4 + 10 + 20 + 100);
    expect((res.usage as unknown as { cost: number }).cost).toBeCloseTo(COST.alpha + COST.beta + 104 * 5e-6 + 10 * 6e-6, 12);
  });

  it("the fusion server tool's parameters are checked: 400 naming the field", async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ analysis_models: Array(9).fill("alpha/a1") }, "tools[0].parameters.analysis_models"],
      [{ analysis_models: ["alpha/a1"], max_tool_calls: 17 }, "tools[0].parameters.max_tool_calls"],
      [{ analysis_models: ["alpha/a1"], tools: [{ type: "service:fusion" }] }, "tools[0].parameters.tools[0].type"],
      [{ analysis_models: ["alpha/a1"], cache_control: { type: "ephemeral" } }, "tools[0].parameters.cache_control"],
    ];
    for (const [parameters, field] of cases) {
      const err = await client.chat.completions
        .create({ model: "judge/j1", messages, tools: [{ type: "service:fusion", parameters }] } as never)
        .then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
      expect(err?.status, field).toBe(400);
      expect((err?.error as { metadata?: { field?: string } }).metadata?.field).toBe(field);
    }
  });

  it("a named preset panel (general-fast): its judge serves; members without a credential fail and are reported", async () => {
    const before = alpha.requests.length;
    const res = await client.chat.completions.create({ model: "judge/j1", messages, plugins: [{ id: "fusion", preset: "general-fast", tools: [] }] } as never);
    // The alpha fake plays OpenAI: it answered as the panel member openai/gpt-4.1-mini and as the judge.
    expect(res.choices[0]!.message.content).toBe(ALPHA);
    expect(alpha.requests.length).toBe(before + 2);
    expect(alpha.requests.at(-1)!.body.model).toBe("gpt-4.1-mini");
    const report = (res as unknown as { plugins: Array<Record<string, unknown>> }).plugins[0]!;
    expect(report).toMatchObject({ preset: "general-fast", judge: "openai/gpt-4.1-mini", succeeded: 1, failed: 2 });
    const panel = report.panel as Array<Record<string, unknown>>;
    expect(panel.map((m) => [m.model, m.ok])).toEqual([
      ["openai/gpt-4.1-mini", true],
      ["google/gemini-2.5-flash-lite", false],
      ["anthropic/claude-haiku-4.5", false],
    ]);
    expect(panel[1]!.error).toMatchObject({ code: 400 });
    expect(JSON.stringify(report)).not.toContain("sk-test");
  });

  it("a router plugin and a fusion judge in one request: 400 naming the fusion entry's model", async () => {
    const err = await client.chat.completions
      .create({ model: "judge/j1", messages, plugins: [{ id: "auto-router", allowed_models: ["alpha/*"] }, fusion()] } as never)
      .then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    expect(err?.status).toBe(400);
    expect((err?.error as { metadata?: { field?: string } }).metadata?.field).toBe("plugins[1].model");
  });

  it("a server-tool loop whose turns different endpoints served: each turn priced at its own endpoint", async () => {
    // Turn 1: alpha asks for the datetime tool. Turn 2: alpha fails (the request carries the tool result), beta answers.
    alpha.scripts = [{ text: [], toolCalls: [{ id: "d1", name: "datetime", arguments: "{}" }], finish: "tool_calls", usage: { input: 10, output: 2 } }];
    alpha.knobs.failWhen = (req) => Array.isArray(req.body?.messages) && req.body.messages.some((m: { role?: string }) => m.role === "tool");
    beta.script = say(BETA, 20, 7);
    const turn1 = 10 * 1e-6 + 2 * 2e-6;
    const turn2 = 20 * 3e-6 + 7 * 4e-6;
    for (const stream of [false, true]) {
      const body = { model: "alpha/a1", models: ["alpha/a1", "beta/b1"], messages, tools: [{ type: "service:datetime" }] };
      let id: string;
      let usage: { prompt_tokens: number; completion_tokens: number; cost: number; cost_details: { upstream_inference_cost: number } };
      if (!stream) {
        alpha.scripts = [{ text: [], toolCalls: [{ id: "d1", name: "datetime", arguments: "{}" }], finish: "tool_calls", usage: { input: 10, output: 2 } }];
        const res = await client.chat.completions.create(body as never);
        expect(res.choices[0]!.message.content).toBe(BETA);
        id = res.id;
        usage = res.usage as never;
      } else {
        alpha.scripts = [{ text: [], toolCalls: [{ id: "d1", name: "datetime", arguments: "{}" }], finish: "tool_calls", usage: { input: 10, output: 2 } }];
        const s = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } } as never);
        let text = "";
        id = "";
        for await (const chunk of s as unknown as AsyncIterable<{ id: string; choices: Array<{ delta: { content?: string } }>; usage?: typeof usage }>) {
          id ||= chunk.id;
          text += chunk.choices[0]?.delta.content ?? "";
          if (chunk.usage) usage = chunk.usage;
        }
        expect(text).toBe(BETA);
      }
      expect(usage!).toMatchObject({ prompt_tokens: 30, completion_tokens: 9 });
      // At the last endpoint's prices it would be 30 × 3e-6 + 9 × 4e-6.
      expect(usage!.cost, stream ? "streamed" : "not streamed").toBeCloseTo(turn1 + turn2, 12);
      expect(usage!.cost_details.upstream_inference_cost).toBeCloseTo(turn1 + turn2, 12);
      const gen = await recorded(id);
      expect(gen).toMatchObject({ prompt_tokens: 30, completion_tokens: 9, provider: "beta" });
      expect(gen.total_cost as number).toBeCloseTo(turn1 + turn2, 12);
    }
  });

  it("a spend limit: the panel's largest cost is reserved with the judge's before any panel call; over the limit → 402, nothing sent; the settled spend is every call's", async () => {
    const newKey = async (limit: number) => {
      const res = await api(h, "POST", "/keys", { key: h.tenant.managementKey, body: { name: `fusion-limited-${limit}`, limit } });
      expect(res.status, res.text).toBe(201);
      return new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: res.json.key as string, maxRetries: 0 });
    };
    const body = { model: "judge/j1", messages, max_tokens: 100, plugins: [fusion()] };
    // The judge alone could cost ~$0.002 (its body's bytes × $5e-6 + 100 × $6e-6); with the panel (its members' calls
    // and the answers they add to the judge's prompt, ~2,500 tokens × $5e-6) ~$0.017: $0.01 holds the judge only.
    const tight = await newKey(0.01);
    const counts = () => [alpha.requests.length, beta.requests.length, judge.requests.length];
    const before = counts();
    for (const stream of [false, true]) {
      const err = await tight.chat.completions.create({ ...body, stream } as never).then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
      expect(err?.status).toBe(402);
      expect((err?.error as { metadata?: { reason?: string; field?: string } }).metadata).toMatchObject({ reason: "spend_limit_exceeded", field: "limit" });
    }
    expect(counts()).toEqual(before);
    // Without the panel the same key is served: the refusal was the panel's reservation.
    const alone = await tight.chat.completions.create({ model: "judge/j1", messages, max_tokens: 100 } as never);
    expect(alone.choices[0]!.message.content).toBe(JUDGE);

    const roomy = await newKey(1);
    const res = await roomy.chat.completions.create(body as never);
    expect(res.choices[0]!.message.content).toBe(JUDGE);
    const total = COST.alpha + COST.beta + COST.judge;
    expect((res.usage as unknown as { cost: number }).cost).toBeCloseTo(total, 12);
    const info = await waitFor("the settled spend", async () => {
      const got = await api(h, "GET", "/key", { key: roomy.apiKey as string });
      return got.json.data.usage > 0 ? got.json.data : undefined;
    });
    expect(info.usage).toBeCloseTo(total, 12);
    expect(info.limit_remaining).toBeCloseTo(1 - total, 12);
  });
});
