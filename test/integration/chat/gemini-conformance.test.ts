/**
 * The conformance matrix of the Gemini dialect (docs/dialects.md): inbound `POST /api/v1beta/models/{model}:…`
 * × upstream {OpenAI-compatible, Anthropic, Gemini} × {plain text, one tool call, parallel tool calls, thinking sent
 * back on the next turn, max tokens stop, error mid-stream, client cancel}, streaming and not. Streams are read raw
 * and their exact chunk sequence asserted (runs of text or thought chunks collapsed to one `+` entry, since the
 * number of pieces is the upstream's); the official `@google/genai` client's `models.generateContent` and
 * `models.generateContentStream` (assembled) must give the same answer as the raw stream.
 */
import { GoogleGenAI, type Content, type GenerateContentParameters, type GenerateContentResponse } from "@google/genai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeAnthropic } from "../../helpers/fake-upstreams/anthropic.js";
import { startFakeGemini } from "../../helpers/fake-upstreams/gemini.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream, Script } from "../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../helpers/wait.js";

type Kind = "openai" | "anthropic" | "gemini";
interface Upstream {
  kind: Kind;
  model: string;
  fake: FakeUpstream;
  /** The finish words of the provider: [end, tool, max]. */
  finish: [string, string, string];
}

const tools = [{ functionDeclarations: [{ name: "get_weather", description: "Weather of a city", parametersJsonSchema: { type: "object", properties: { city: { type: "string" } } } }] }];

/** The data objects of a raw SSE answer (Google's CRLF frames; keepalive comments skipped). */
async function readSse(res: Response): Promise<any[]> {
  const text = await res.text();
  const out: any[] = [];
  for (const frame of text.split(/\r?\n\r?\n/)) {
    const t = frame.trim();
    if (t === "" || t.startsWith(":")) continue;
    expect(t.startsWith("data: ")).toBe(true);
    out.push(JSON.parse(t.slice(6)));
  }
  return out;
}

/** The sequence as short names: per chunk its parts' kinds, then `finish:<reason>`; runs of text/thought chunks are one `+` entry. */
function shape(chunks: any[]): string[] {
  const out: string[] = [];
  for (const c of chunks) {
    if (c.error) {
      out.push(`error:${c.error.status}`);
      continue;
    }
    const cand = c.candidates[0];
    const kinds = (cand.content?.parts ?? [])
      // Empty text parts (the last chunk's, or one carrying only a signature) are bookkeeping, not content.
      .filter((p: any) => p.text !== "")
      .map((p: any) => (p.functionCall ? `functionCall:${p.functionCall.name}` : p.thought ? "thought+" : "text+"));
    const name = [...kinds, ...(cand.finishReason ? [`finish:${cand.finishReason}`] : [])].join(" ");
    if (name.endsWith("+") && out.at(-1) === name) continue;
    out.push(name);
  }
  return out;
}

interface Assembled {
  thoughts: string;
  text: string;
  calls: Array<{ id?: string; name?: string; args?: unknown; thoughtSignature?: string }>;
  signatures: string[];
  finishReason: string | undefined;
  usage: unknown;
  modelVersion: string | undefined;
}

/** What chunks (or one response) mean together: text and thoughts joined, calls and signatures in order, the last finish and usage. */
function assemble(chunks: any[]): Assembled {
  const out: Assembled = { thoughts: "", text: "", calls: [], signatures: [], finishReason: undefined, usage: undefined, modelVersion: undefined };
  for (const c of chunks) {
    const cand = c.candidates?.[0];
    for (const p of cand?.content?.parts ?? []) {
      if (p.functionCall) out.calls.push({ ...p.functionCall, ...(p.thoughtSignature ? { thoughtSignature: p.thoughtSignature } : {}) });
      else {
        if (p.thought) out.thoughts += p.text ?? "";
        else out.text += p.text ?? "";
        if (p.thoughtSignature) out.signatures.push(p.thoughtSignature);
      }
    }
    if (cand?.finishReason) out.finishReason = cand.finishReason;
    if (c.usageMetadata) out.usage = c.usageMetadata;
    if (c.modelVersion) out.modelVersion = c.modelVersion;
  }
  return out;
}

/** An SDK response as plain JSON (its class instances' own fields). */
const plain = (r: GenerateContentResponse): any => JSON.parse(JSON.stringify(r));

describe("Gemini dialect: conformance matrix", () => {
  let h: Harness;
  let ai: GoogleGenAI;
  const ups: Upstream[] = [];

  beforeAll(async () => {
    const openai = await startFakeOpenAI();
    const anthropic = await startFakeAnthropic();
    const gemini = await startFakeGemini();
    ups.push(
      { kind: "openai", model: "groq/llama-4", fake: openai, finish: ["stop", "tool_calls", "length"] },
      { kind: "anthropic", model: "anthropic/claude-sonnet-4", fake: anthropic, finish: ["end_turn", "tool_use", "max_tokens"] },
      { kind: "gemini", model: "google-ai-studio/gemini-2.5-flash", fake: gemini, finish: ["STOP", "STOP", "MAX_TOKENS"] },
    );
    h = await startHarness({
      env: {
        PORTICO_PROVIDER_GROQ_BASE_URL: `${openai.url}/v1`,
        PORTICO_PROVIDER_ANTHROPIC_BASE_URL: anthropic.url,
        PORTICO_PROVIDER_GOOGLE_AI_STUDIO_BASE_URL: `${gemini.url}/v1beta`,
      },
    });
    for (const [provider, key] of [["groq", "gsk-test"], ["anthropic", "sk-ant-test"], ["google-ai-studio", "AIza-test"]] as const) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider, key } })).status).toBe(200);
    }
    ai = new GoogleGenAI({ apiKey: h.tenant.apiKey, httpOptions: { baseUrl: `${h.baseUrl}/api` } });
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all(ups.map((u) => u.fake.close()));
  });

  const post = (model: string, method: string, body: unknown, signal?: AbortSignal) =>
    fetch(`${h.baseUrl}/api/v1beta/models/${encodeURIComponent(model)}:${method}${method === "streamGenerateContent" ? "?alt=sse" : ""}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-goog-api-key": h.tenant.apiKey },
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });

  const setScript = (u: Upstream, script: Script) => {
    u.fake.script = script;
    u.fake.knobs = {};
  };

  /** The REST body of SDK parameters (what the SDK sends: contents, systemInstruction, tools, generationConfig). */
  function restBody(p: GenerateContentParameters): Record<string, unknown> {
    const { systemInstruction, tools: t, toolConfig, ...generationConfig } = (p.config ?? {}) as Record<string, unknown>;
    return {
      contents: typeof p.contents === "string" ? [{ role: "user", parts: [{ text: p.contents }] }] : p.contents,
      ...(systemInstruction ? { systemInstruction: typeof systemInstruction === "string" ? { parts: [{ text: systemInstruction }] } : systemInstruction } : {}),
      ...(t ? { tools: t } : {}),
      ...(toolConfig ? { toolConfig } : {}),
      ...(Object.keys(generationConfig).length > 0 ? { generationConfig } : {}),
    };
  }

  /** Streams raw and through the SDK, generates through the SDK; the three agree. Returns the raw chunks and the SDK's response. */
  async function allWays(u: Upstream, params: Omit<GenerateContentParameters, "model">): Promise<{ chunks: any[]; response: any; assembled: Assembled }> {
    const p = { model: u.model, ...params } as GenerateContentParameters;
    const res = await post(u.model, "streamGenerateContent", restBody(p));
    expect(res.status, res.status === 200 ? "" : await res.clone().text()).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const chunks = await readSse(res);
    const response = plain(await ai.models.generateContent(p));
    const streamed: any[] = [];
    for await (const chunk of await ai.models.generateContentStream(p)) streamed.push(plain(chunk));
    const whole = assemble([response]);
    expect(assemble(streamed)).toEqual(whole);
    expect(assemble(chunks)).toEqual(whole);
    // Every chunk names the same generation; the non-streamed answer's id is a generation id too.
    const ids = new Set(chunks.map((c) => c.responseId));
    expect(ids.size).toBe(1);
    expect([...ids][0]).toMatch(/^gen-/);
    expect(response.responseId).toMatch(/^gen-/);
    // Usage only on the last chunk, as the complete count.
    expect(chunks.slice(0, -1).some((c) => c.usageMetadata)).toBe(false);
    return { chunks, response, assembled: whole };
  }

  for (const kind of ["openai", "anthropic", "gemini"] as const) {
    describe(`upstream ${kind}`, () => {
      const up = () => ups.find((u) => u.kind === kind)!;

      it("plain text", async () => {
        const u = up();
        setScript(u, { text: ["Hello", ", ", "world"], finish: u.finish[0], usage: { input: 11, output: 3 } });
        const { chunks, response, assembled } = await allWays(u, { contents: "hi", config: { systemInstruction: "Be brief." } });
        expect(shape(chunks)).toEqual(["text+", "finish:STOP"]);
        expect(assembled.text).toBe("Hello, world");
        expect(response.candidates[0]).toMatchObject({ content: { role: "model", parts: [{ text: "Hello, world" }] }, finishReason: "STOP", index: 0 });
        expect(response.usageMetadata).toEqual({ promptTokenCount: 11, candidatesTokenCount: 3, totalTokenCount: 14 });
        const sent = u.fake.requests.at(-1)!.body;
        if (kind === "openai") expect(sent.messages[0]).toEqual({ role: "system", content: "Be brief." });
        if (kind === "anthropic") expect(sent.system).toBe("Be brief.");
        if (kind === "gemini") expect(sent.systemInstruction).toEqual({ parts: [{ text: "Be brief." }] });
      });

      it("one tool call, its response sent back (Gemini: the thought signature too)", async () => {
        const u = up();
        setScript(u, {
          text: ["Let me ", "check."],
          toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}', argumentPieces: ['{"city"', ':"Paris"}'] }],
          finish: u.finish[1],
          usage: { input: 20, output: 7 },
          ...(kind === "gemini" ? { signature: "sig-fc" } : {}),
        });
        const { chunks, response, assembled } = await allWays(u, { contents: "weather in Paris?", config: { tools } });
        expect(shape(chunks)).toEqual(["text+", "functionCall:get_weather finish:STOP"]);
        expect(assembled.calls).toEqual([{ id: kind === "gemini" ? "call_0" : "call_1", name: "get_weather", args: { city: "Paris" }, ...(kind === "gemini" ? { thoughtSignature: "sig-fc" } : {}) }]);
        expect(assembled.text).toBe("Let me check.");
        const sent = u.fake.requests.at(-1)!.body;
        if (kind === "openai") expect(sent.tools[0]).toMatchObject({ type: "function", function: { name: "get_weather", parameters: tools[0]!.functionDeclarations[0]!.parametersJsonSchema } });
        if (kind === "anthropic") expect(sent.tools[0]).toMatchObject({ name: "get_weather", input_schema: tools[0]!.functionDeclarations[0]!.parametersJsonSchema });
        if (kind === "gemini") expect(sent.tools).toEqual([{ functionDeclarations: [{ name: "get_weather", description: "Weather of a city", parametersJsonSchema: tools[0]!.functionDeclarations[0]!.parametersJsonSchema }] }]);

        setScript(u, { text: ["Sunny."], finish: u.finish[0], usage: { input: 30, output: 2 } });
        const call = response.candidates[0].content.parts.find((p: any) => p.functionCall).functionCall;
        const contents: Content[] = [
          { role: "user", parts: [{ text: "weather in Paris?" }] },
          response.candidates[0].content,
          { role: "user", parts: [{ functionResponse: { id: call.id, name: "get_weather", response: { result: "sunny" } } }] },
        ];
        const next = await ai.models.generateContent({ model: u.model, contents, config: { tools } });
        expect(next.text).toBe("Sunny.");
        const back = u.fake.requests.at(-1)!.body;
        if (kind === "openai") {
          expect(back.messages[1]).toMatchObject({ role: "assistant", tool_calls: [{ id: "call_1", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] });
          expect(back.messages[2]).toMatchObject({ role: "tool", tool_call_id: "call_1", content: '{"result":"sunny"}' });
        }
        if (kind === "anthropic") {
          expect(back.messages[1].content).toEqual([{ type: "text", text: "Let me check." }, { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } }]);
          expect(back.messages[2].content).toEqual([{ type: "tool_result", tool_use_id: "call_1", content: '{"result":"sunny"}' }]);
        }
        if (kind === "gemini") {
          // The model turn goes back as it came: the function call with its signature; the response by name.
          expect(back.contents[1]).toEqual({ role: "model", parts: [{ text: "Let me check." }, { functionCall: { name: "get_weather", args: { city: "Paris" } }, thoughtSignature: "sig-fc" }] });
          expect(back.contents[2]).toEqual({ role: "user", parts: [{ functionResponse: { name: "get_weather", response: { result: "sunny" } } }] });
        }
      });

      it("parallel tool calls keep their calls and arguments apart", async () => {
        const u = up();
        setScript(u, {
          text: [],
          toolCalls: [
            { id: "call_a", name: "get_weather", arguments: '{"city":"Paris"}', argumentPieces: ['{"ci', 'ty":"Paris"}'] },
            { id: "call_b", name: "get_weather", arguments: '{"city":"Rome"}', argumentPieces: ['{"city":', '"Rome"}'] },
          ],
          finish: u.finish[1],
          usage: { input: 20, output: 9 },
        });
        const { chunks, response, assembled } = await allWays(u, { contents: "Paris and Rome?", config: { tools } });
        expect(shape(chunks)).toEqual(["functionCall:get_weather functionCall:get_weather finish:STOP"]);
        expect(assembled.calls.map((c) => c.args)).toEqual([{ city: "Paris" }, { city: "Rome" }]);
        expect(new Set(assembled.calls.map((c) => c.id)).size).toBe(2);

        setScript(u, { text: ["Both sunny"], finish: u.finish[0], usage: { input: 30, output: 2 } });
        const contents: Content[] = [
          { role: "user", parts: [{ text: "Paris and Rome?" }] },
          response.candidates[0].content,
          {
            role: "user",
            parts: [
              { functionResponse: { id: assembled.calls[0]!.id!, name: "get_weather", response: { result: "sunny" } } },
              { functionResponse: { id: assembled.calls[1]!.id!, name: "get_weather", response: { result: "sunny too" } } },
            ],
          },
        ];
        const next = await ai.models.generateContent({ model: u.model, contents, config: { tools } });
        expect(next.text).toBe("Both sunny");
        const sent = u.fake.requests.at(-1)!.body;
        if (kind === "anthropic") {
          expect(sent.messages[1].content.map((b: any) => b.id)).toEqual(["call_a", "call_b"]);
          expect(sent.messages[2].content.map((b: any) => [b.tool_use_id, b.content])).toEqual([["call_a", '{"result":"sunny"}'], ["call_b", '{"result":"sunny too"}']]);
        }
        if (kind === "openai") expect(sent.messages.slice(2).map((m: any) => [m.role, m.tool_call_id, m.content])).toEqual([["tool", "call_a", '{"result":"sunny"}'], ["tool", "call_b", '{"result":"sunny too"}']]);
        if (kind === "gemini") expect(sent.contents[2].parts.map((p: any) => p.functionResponse.response.result)).toEqual(["sunny", "sunny too"]);
      });

      it("thinking, sent back on the next turn", async () => {
        const u = up();
        setScript(u, {
          reasoning: ["Let me ", "think."],
          text: ["Answer"],
          finish: u.finish[0],
          usage: { input: 15, output: 12, ...(kind === "gemini" ? { reasoning: 5 } : {}) },
          ...(kind === "gemini" ? { signature: "sig-text" } : {}),
        });
        const config = { maxOutputTokens: 4096, thinkingConfig: { includeThoughts: true, thinkingBudget: 2048 } };
        const { chunks, response, assembled } = await allWays(u, { contents: "why?", config });
        expect(shape(chunks)).toEqual(["thought+", "text+", "finish:STOP"]);
        expect(assembled.thoughts).toBe("Let me think.");
        expect(assembled.text).toBe("Answer");
        // Gemini's signature on its text part; Anthropic's signed thinking as Portico's blob on a thought part.
        expect(assembled.signatures).toEqual(kind === "gemini" ? ["sig-text"] : kind === "anthropic" ? [expect.stringMatching(/^portico\.r1\./)] : []);
        if (kind === "gemini") expect(response.usageMetadata).toEqual({ promptTokenCount: 15, candidatesTokenCount: 12, thoughtsTokenCount: 5, totalTokenCount: 32 });
        const asked = u.fake.requests.at(-1)!.body;
        if (kind === "anthropic") expect(asked.thinking).toEqual({ type: "enabled", budget_tokens: 2048 });
        if (kind === "gemini") expect(asked.generationConfig.thinkingConfig).toEqual({ thinkingBudget: 2048, includeThoughts: true });
        if (kind === "openai") expect(asked.reasoning_effort).toBe("medium");

        setScript(u, { text: ["Because."], finish: u.finish[0], usage: { input: 30, output: 2 } });
        const contents: Content[] = [{ role: "user", parts: [{ text: "why?" }] }, response.candidates[0].content, { role: "user", parts: [{ text: "and then?" }] }];
        const next = await ai.models.generateContent({ model: u.model, contents, config });
        expect(next.text).toBe("Because.");
        const sent = u.fake.requests.at(-1)!.body;
        if (kind === "openai") expect(sent.messages[1]).toMatchObject({ role: "assistant", reasoning: "Let me think." });
        // Anthropic's thinking goes back first, with its signature, exactly as it came (through the blob).
        if (kind === "anthropic") expect(sent.messages[1]).toEqual({ role: "assistant", content: [{ type: "thinking", thinking: "Let me think.", signature: "sig" }, { type: "text", text: "Answer" }] });
        // Gemini: the thoughts are not sent back, the signature is, on the text part it came on.
        if (kind === "gemini") expect(sent.contents[1]).toEqual({ role: "model", parts: [{ text: "Answer", thoughtSignature: "sig-text" }] });
      });

      it("max tokens stop: finishReason MAX_TOKENS", async () => {
        const u = up();
        setScript(u, { text: ["Once upon"], finish: u.finish[2], usage: { input: 5, output: 2 } });
        const { chunks, response } = await allWays(u, { contents: "tell a story", config: { maxOutputTokens: 2 } });
        expect(shape(chunks)).toEqual(["text+", "finish:MAX_TOKENS"]);
        expect(response.candidates[0].finishReason).toBe("MAX_TOKENS");
        expect(u.fake.requests.at(-1)!.body).toMatchObject(kind === "gemini" ? { generationConfig: { maxOutputTokens: 2 } } : { max_tokens: 2 });
      });

      it("an error mid-stream is one {error} chunk and the end; not streamed, Google's envelope", async () => {
        const u = up();
        setScript(u, { text: ["one ", "two ", "three ", "four"], finish: u.finish[0], usage: { input: 5, output: 4 } });
        u.fake.knobs = { failAfterChunks: 3, failMessage: "overloaded now" };
        const res = await post(u.model, "streamGenerateContent", { contents: [{ role: "user", parts: [{ text: "count" }] }] });
        expect(res.status).toBe(200);
        const chunks = await readSse(res);
        const s = shape(chunks);
        // Text so far (none when the provider failed before its first text, as the Anthropic fake does), then the error.
        expect(s.slice(0, -1).every((x) => x === "text+")).toBe(true);
        expect(s.at(-1)).toMatch(/^error:/);
        expect(s.join(" ")).not.toContain("finish:");
        expect(chunks.at(-1)).toEqual({ error: { code: expect.any(Number), message: expect.stringContaining("overloaded now"), status: expect.any(String) } });
        // The SDK's stream rejects rather than ending as if complete.
        await expect(
          (async () => {
            for await (const _ of await ai.models.generateContentStream({ model: u.model, contents: "count" })) void _;
          })(),
        ).rejects.toThrow(/overloaded now/);
        // Not streamed: the provider's failure before an answer is Google's error envelope.
        u.fake.knobs = { failStatus: 500, failMessage: "upstream broke" };
        const whole = await post(u.model, "generateContent", { contents: [{ role: "user", parts: [{ text: "count" }] }] });
        expect(whole.status).toBe(502);
        expect(await whole.json()).toEqual({ error: { code: 502, message: expect.any(String), status: "INTERNAL" } });
        await expect(ai.models.generateContent({ model: u.model, contents: "count" })).rejects.toMatchObject({ status: 502 });
        u.fake.knobs = {};
      });

      it("a client that leaves mid-stream stops the upstream request and the generation is recorded as cancelled, dialect gemini", async () => {
        const u = up();
        setScript(u, { text: Array.from({ length: 40 }, (_, i) => `w${i} `), finish: u.finish[0], usage: { input: 5, output: 40 } });
        u.fake.knobs = { chunkDelayMs: 30 };
        const before = u.fake.requests.length;
        const ac = new AbortController();
        const res = await post(u.model, "streamGenerateContent", { contents: [{ role: "user", parts: [{ text: "long" }] }] }, ac.signal);
        const reader = res.body!.getReader();
        let text = "";
        while (!text.includes('"text"')) text += new TextDecoder().decode((await reader.read()).value);
        const id = /"responseId":"(gen-[^"]+)"/.exec(text)![1]!;
        ac.abort();
        await u.fake.clientAborted();
        expect(u.fake.requests.length).toBe(before + 1);
        const gen = await waitFor("the cancelled generation's record", async () => {
          const r = await api(h, "GET", `/generation?id=${id}`, { key: h.tenant.apiKey });
          return r.status === 200 && r.json.data.status !== "pending" ? r.json.data : undefined;
        });
        expect(gen).toMatchObject({ status: "cancelled", dialect: "gemini", streamed: true });
        u.fake.knobs = {};
      });
    });
  }
});
