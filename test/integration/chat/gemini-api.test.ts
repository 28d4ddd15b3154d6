/**
 * The Gemini dialect beside the conformance matrix (docs/dialects.md, "Gemini"): authentication three ways,
 * refusals naming the field in Google's envelope, model ids in the path (encoded, unencoded, bare Gemini ids),
 * translation upstream (responseSchema, toolConfig, images), countTokens exact and estimated, and the generation
 * record with its dialect on SQLite and PostgreSQL.
 */
import { GoogleGenAI } from "@google/genai";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChatService } from "../../../src/gen/portico/chat/v1/chat_service_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Reason, ruleOf } from "../../../src/contract/reasons.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeGemini } from "../../helpers/fake-upstreams/gemini.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";

describe.each(["sqlite", "postgresql"] as const)("Gemini dialect API (%s)", (provider) => {
  let h: Harness;
  let gemini: FakeUpstream;
  let openai: FakeUpstream;
  let ai: GoogleGenAI;

  beforeAll(async () => {
    gemini = await startFakeGemini();
    openai = await startFakeOpenAI();
    h = await startHarness({ provider, env: { PORTICO_PROVIDER_GOOGLE_AI_STUDIO_BASE_URL: `${gemini.url}/v1beta`, PORTICO_PROVIDER_GROQ_BASE_URL: `${openai.url}/v1` } });
    for (const [p, key] of [["google-ai-studio", "AIza-test"], ["groq", "gsk-test"]] as const) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: p, key } })).status).toBe(200);
    }
    ai = new GoogleGenAI({ apiKey: h.tenant.apiKey, httpOptions: { baseUrl: `${h.baseUrl}/api` } });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all([gemini?.close(), openai?.close()]);
  });

  const url = (path: string) => `${h.baseUrl}/api/v1beta/models/${path}`;
  const post = (path: string, body: unknown, headers: Record<string, string> = { "x-goog-api-key": h.tenant.apiKey }) =>
    fetch(url(path), { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  const hi = { contents: [{ role: "user", parts: [{ text: "hi" }] }] };

  it("records the generation with its dialect, and the SDK's answer carries its id", async () => {
    gemini.script = { text: ["Hi", "!"], finish: "STOP", usage: { input: 7, output: 2, cached: 3 } };
    const res = await ai.models.generateContent({ model: "google-ai-studio/gemini-2.5-flash", contents: "hello" });
    expect(res.text).toBe("Hi!");
    expect(res.usageMetadata).toEqual({ promptTokenCount: 7, candidatesTokenCount: 2, cachedContentTokenCount: 3, totalTokenCount: 9 });
    // The fake saw Gemini's own request, with the provider key (not the Portico key).
    const seen = gemini.requests.at(-1)!;
    expect(seen.url).toBe("/v1beta/models/gemini-2.5-flash:generateContent");
    expect(seen.headers["x-goog-api-key"]).toBe("AIza-test");
    const gen = await waitFor("the generation's record", async () => {
      const r = await api(h, "GET", `/generation?id=${res.responseId}`, { key: h.tenant.apiKey });
      return r.status === 200 ? r.json.data : undefined;
    });
    expect(gen).toMatchObject({ id: res.responseId, provider: "google-ai-studio", prompt_tokens: 7, completion_tokens: 2, status: "success", streamed: false, dialect: "gemini" });
  });

  it("takes the key from x-goog-api-key, ?key= or Authorization: Bearer; a wrong key is 401 in Google's envelope", async () => {
    gemini.script = { text: ["ok"], finish: "STOP", usage: { input: 1, output: 1 } };
    const model = "google-ai-studio%2Fgemini-2.5-flash";
    expect((await post(`${model}:generateContent`, hi)).status).toBe(200);
    expect((await post(`${model}:generateContent?key=${h.tenant.apiKey}`, hi, {})).status).toBe(200);
    expect((await post(`${model}:generateContent`, hi, { authorization: `Bearer ${h.tenant.apiKey}` })).status).toBe(200);
    const bad = await post(`${model}:generateContent`, hi, { "x-goog-api-key": "sk-portico-wrong" });
    expect(bad.status).toBe(401);
    expect(await bad.json()).toEqual({ error: { code: 401, message: expect.any(String), status: "UNAUTHENTICATED" } });
    const none = await post(`${model}:generateContent`, hi, {});
    expect(none.status).toBe(401);
  });

  it("reads the model from the path: encoded or not, bare Gemini ids as Google's, presets", async () => {
    gemini.script = { text: ["ok"], finish: "STOP", usage: { input: 1, output: 1 } };
    // Unencoded slash (what the SDK sends for "google-ai-studio/gemini-2.5-flash").
    expect((await post("google-ai-studio/gemini-2.5-flash:generateContent", hi)).status).toBe(200);
    // A bare id the catalog knows: google/gemini-2.5-flash, served by Google AI Studio.
    const bare = await post("gemini-2.5-flash:generateContent", hi);
    expect(bare.status).toBe(200);
    const body = (await bare.json()) as { responseId: string };
    const gen = await waitFor("the bare id's record", async () => {
      const r = await api(h, "GET", `/generation?id=${body.responseId}`, { key: h.tenant.apiKey });
      return r.status === 200 ? r.json.data : undefined;
    });
    expect(gen).toMatchObject({ model: "google/gemini-2.5-flash", catalog_model: "google/gemini-2.5-flash" });
    // A bare id the catalog does not know: relayed uncatalogued to Google AI Studio (gemini-cli's side calls).
    const unknown = await post("gemini-9.9-flash-lite:generateContent", hi);
    expect(unknown.status).toBe(200);
    expect(gemini.requests.at(-1)!.url).toBe("/v1beta/models/gemini-9.9-flash-lite:generateContent");
    // A body model that differs from the path's is refused.
    const differs = await post("gemini-2.5-flash:generateContent", { ...hi, model: "models/gemini-2.0-flash" });
    expect(differs.status).toBe(400);
    expect(((await differs.json()) as any).error.details[0].fieldViolations[0].field).toBe("model");
    // A preset.
    expect((await api(h, "POST", "/presets/gem/chat/completions", { key: h.tenant.managementKey, body: { model: "groq/llama-4", messages: [{ role: "system", content: "Be terse." }] } })).status).toBe(200);
    openai.script = { text: ["terse"], finish: "stop", usage: { input: 3, output: 1 } };
    const viaPreset = await ai.models.generateContent({ model: "@preset/gem", contents: "explain" });
    expect(viaPreset.text).toBe("terse");
    expect(openai.requests.at(-1)!.body.messages[0]).toEqual({ role: "system", content: "Be terse." });
  });

  it("refuses what it does not serve, naming the field, in Google's envelope", async () => {
    const cases: Array<[string, unknown, string]> = [
      ["gemini-2.5-flash:generateContent", { ...hi, safetySettings: [] }, "safetySettings"],
      ["gemini-2.5-flash:generateContent", { ...hi, cachedContent: "cachedContents/x" }, "cachedContent"],
      ["gemini-2.5-flash:generateContent", { ...hi, tools: [{ googleSearch: {} }] }, "tools[0].googleSearch"],
      ["gemini-2.5-flash:generateContent", { ...hi, generationConfig: { responseModalities: ["IMAGE"] } }, "generationConfig.responseModalities"],
      ["gemini-2.5-flash:generateContent", { ...hi, generationConfig: { candidateCount: 2 } }, "generationConfig.candidateCount"],
      ["gemini-2.5-flash:generateContent", { contents: [{ role: "user", parts: [{ executableCode: { code: "1" } }] }] }, "contents[0].parts[0].executableCode"],
      ["gemini-2.5-flash:generateContent", { contents: [{ role: "user", parts: [{ inlineData: { mimeType: "application/pdf", data: "AAAA" } }] }] }, "contents[0].parts[0].inlineData.mimeType"],
      ["gemini-2.5-flash:generateContent", { ...hi, generationConfig: { responseSchema: { type: "OBJECT" } } }, "generationConfig.responseSchema"],
      ["gemini-2.5-flash:generateContent?foo=1", hi, "foo"],
      ["gemini-2.5-flash:streamGenerateContent", hi, "alt"],
    ];
    for (const [path, body, field] of cases) {
      const res = await post(path, body);
      expect(res.status, field).toBe(ruleOf(Reason.BAD_REQUEST).status);
      const json = (await res.json()) as any;
      expect(json.error, field).toMatchObject({ code: ruleOf(Reason.BAD_REQUEST).status, status: "INVALID_ARGUMENT" });
      expect(json.error.details[0].fieldViolations[0].field, field).toBe(field);
    }
    const unknownMethod = await post("gemini-2.5-flash:embedContent", hi);
    expect(unknownMethod.status).toBe(ruleOf(Reason.NOT_FOUND).status);
    expect(((await unknownMethod.json()) as any).error.status).toBe("NOT_FOUND");
  });

  it("translates responseSchema, toolConfig and images for the upstream", async () => {
    gemini.script = { text: ['{"a":1}'], finish: "STOP", usage: { input: 1, output: 1 } };
    const res = await post("gemini-2.5-flash:generateContent", {
      contents: [{ role: "user", parts: [{ text: "look" }, { inlineData: { mimeType: "image/png", data: "iVBORw0KGgo=" } }] }],
      tools: [{ functionDeclarations: [{ name: "f", parameters: { type: "OBJECT", properties: { x: { type: "STRING", nullable: true } } } }, { name: "g" }] }],
      toolConfig: { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["f"] } },
      generationConfig: { responseMimeType: "application/json", responseSchema: { type: "OBJECT", properties: { a: { type: "INTEGER" } } }, temperature: 0.3, topP: 0.9, topK: 5, stopSequences: ["END"], seed: 7 },
    });
    expect(res.status).toBe(200);
    const sent = gemini.requests.at(-1)!.body;
    expect(sent.contents[0].parts).toEqual([{ text: "look" }, { inlineData: { mimeType: "image/png", data: "iVBORw0KGgo=" } }]);
    expect(sent.tools[0].functionDeclarations[0]).toEqual({ name: "f", parametersJsonSchema: { type: "object", properties: { x: { type: ["string", "null"] } } } });
    expect(sent.toolConfig).toEqual({ functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["f"] } });
    expect(sent.generationConfig).toMatchObject({
      responseMimeType: "application/json",
      responseJsonSchema: { type: "object", properties: { a: { type: "integer" } } },
      temperature: 0.3,
      topP: 0.9,
      topK: 5,
      stopSequences: ["END"],
      seed: 7,
    });
  });

  it("thoughts stay out of the answer unless includeThoughts is true (the model still thinks)", async () => {
    gemini.script = { reasoning: ["hmm"], text: ["Answer"], finish: "STOP", usage: { input: 3, output: 2, reasoning: 4 } };
    const res = await ai.models.generateContent({ model: "gemini-2.5-flash", contents: "why?", config: { thinkingConfig: { thinkingBudget: 1024 } } });
    expect(res.candidates![0]!.content!.parts).toEqual([{ text: "Answer" }]);
    expect(res.usageMetadata?.thoughtsTokenCount).toBe(4);
    expect(gemini.requests.at(-1)!.body.generationConfig.thinkingConfig).toEqual({ thinkingBudget: 1024 });
    await ai.models.generateContent({ model: "gemini-2.5-flash", contents: "why?", config: { thinkingConfig: { thinkingBudget: -1, includeThoughts: true } } });
    expect(gemini.requests.at(-1)!.body.generationConfig.thinkingConfig).toEqual({ thinkingBudget: -1, includeThoughts: true });
  });

  it("every dialect's generation records its dialect", async () => {
    openai.script = { text: ["ok"], finish: "stop", usage: { input: 2, output: 1 } };
    const bearer = { "content-type": "application/json", authorization: `Bearer ${h.tenant.apiKey}` };
    const ids: Record<string, string> = {};
    const chat = await fetch(`${h.baseUrl}/api/v1/chat/completions`, { method: "POST", headers: bearer, body: JSON.stringify({ model: "groq/llama-4", messages: [{ role: "user", content: "x" }] }) });
    ids.chat = ((await chat.json()) as any).id;
    const messages = await fetch(`${h.baseUrl}/api/v1/messages`, { method: "POST", headers: bearer, body: JSON.stringify({ model: "groq/llama-4", max_tokens: 5, messages: [{ role: "user", content: "x" }] }) });
    ids.messages = ((await messages.json()) as any).id;
    const responses = await fetch(`${h.baseUrl}/api/v1/responses`, { method: "POST", headers: bearer, body: JSON.stringify({ model: "groq/llama-4", input: "x" }) });
    ids.responses = ((await responses.json()) as any).id;
    for (const [dialect, id] of Object.entries(ids)) {
      const gen = await waitFor(`the ${dialect} generation`, async () => {
        const r = await api(h, "GET", `/generation?id=${id}`, { key: h.tenant.apiKey });
        return r.status === 200 ? r.json.data : undefined;
      });
      expect(gen.dialect, dialect).toBe(dialect);
    }
  });

  it("chat completions carry Gemini's thought signatures in reasoning_details and send them back", async () => {
    gemini.script = { text: [], toolCalls: [{ id: "x", name: "f", arguments: '{"a":1}' }], finish: "STOP", usage: { input: 3, output: 2 }, signature: "sig-chat" };
    const bearer = { "content-type": "application/json", authorization: `Bearer ${h.tenant.apiKey}` };
    const tools = [{ type: "function", function: { name: "f", parameters: { type: "object" } } }];
    const first = (await (await fetch(`${h.baseUrl}/api/v1/chat/completions`, { method: "POST", headers: bearer, body: JSON.stringify({ model: "google-ai-studio/gemini-2.5-flash", tools, messages: [{ role: "user", content: "go" }] }) })).json()) as any;
    const msg = first.choices[0].message;
    expect(msg.reasoning_details).toEqual([{ type: "reasoning.encrypted", data: "sig-chat", format: "google-gemini-v1", id: msg.tool_calls[0].id, index: 0 }]);
    gemini.script = { text: ["done"], finish: "STOP", usage: { input: 5, output: 1 } };
    const messages = [{ role: "user", content: "go" }, msg, { role: "tool", tool_call_id: msg.tool_calls[0].id, content: '{"ok":true}' }];
    const second = await fetch(`${h.baseUrl}/api/v1/chat/completions`, { method: "POST", headers: bearer, body: JSON.stringify({ model: "google-ai-studio/gemini-2.5-flash", tools, messages }) });
    expect(second.status).toBe(200);
    expect(gemini.requests.at(-1)!.body.contents[1]).toEqual({ role: "model", parts: [{ functionCall: { name: "f", args: { a: 1 } }, thoughtSignature: "sig-chat" }] });
  });

  it("gRPC: ChatService.GenerateContent, StreamGenerateContent and CountGeminiTokens", async () => {
    gemini.script = { text: ["g", "rpc"], finish: "STOP", usage: { input: 3, output: 2 } };
    const grpc = createClient(ChatService, createGrpcTransport({ baseUrl: h.coreUrl }));
    const headers = { authorization: `Bearer ${h.tenant.apiKey}` };
    const res = await grpc.generateContent({ body: hi, model: "gemini-2.5-flash" }, { headers });
    expect(JSON.parse(res.responseJson)).toMatchObject({ candidates: [{ content: { role: "model", parts: [{ text: "grpc" }] }, finishReason: "STOP" }], usageMetadata: { promptTokenCount: 3 } });
    expect(res.provider).toBe("google-ai-studio");
    const chunks: any[] = [];
    for await (const m of grpc.streamGenerateContent({ body: hi, model: "gemini-2.5-flash" }, { headers })) for (const c of m.chunksJson) chunks.push(JSON.parse(c));
    expect(chunks.map((c) => c.candidates[0].content.parts.map((p: any) => p.text).join("")).join("")).toBe("grpc");
    expect(chunks.at(-1).candidates[0].finishReason).toBe("STOP");
    gemini.script = { text: [], finish: "STOP", usage: { input: 12, output: 0 } };
    expect(await grpc.countGeminiTokens({ body: hi, model: "gemini-2.5-flash" }, { headers })).toMatchObject({ totalTokens: 12n, exact: true, provider: "google-ai-studio" });
    await expect(grpc.generateContent({ body: { contents: [] }, model: "gemini-2.5-flash" }, { headers })).rejects.toThrow(/contents/);
  });

  it("countTokens: Gemini's own count (exact), an estimate for OpenAI-compatible endpoints", async () => {
    gemini.script = { text: [], finish: "STOP", usage: { input: 42, output: 0 } };
    const exact = await ai.models.countTokens({ model: "gemini-2.5-flash", contents: "count these words" });
    expect(exact.totalTokens).toBe(42);
    const counted = gemini.requests.at(-1)!;
    expect(counted.url).toBe("/v1beta/models/gemini-2.5-flash:countTokens");
    expect(counted.body).toEqual({ generateContentRequest: { model: "models/gemini-2.5-flash", contents: [{ role: "user", parts: [{ text: "count these words" }] }] } });
    const raw = await post("gemini-2.5-flash:countTokens", hi);
    expect(raw.headers.get("x-portico-token-count")).toBe("exact");
    const estimate = await post("groq%2Fllama-4:countTokens", { contents: [{ role: "user", parts: [{ text: "hello world" }] }] });
    expect(estimate.status).toBe(200);
    expect(estimate.headers.get("x-portico-token-count")).toBe("estimate");
    expect(((await estimate.json()) as any).totalTokens).toBeGreaterThan(0);
    const both = await post("gemini-2.5-flash:countTokens", { ...hi, generateContentRequest: hi });
    expect(both.status).toBe(400);
  });
});
