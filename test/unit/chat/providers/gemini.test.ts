import { afterEach, describe, expect, it } from "vitest";
import { GeminiAdapter, geminiFinish } from "../../../../src/core/chat/providers/gemini.js";
import type { UpstreamCall } from "../../../../src/core/chat/providers/types.js";
import { PULL, isPullable, type Pullable } from "../../../../src/lib/pull.js";
import { geminiWire, startFakeGemini } from "../../../helpers/fake-upstreams/gemini.js";
import type { FakeUpstream, RecordedRequest, Script } from "../../../helpers/fake-upstreams/server.js";
import { KEY, adapterContract, collect } from "./contract.js";

const adapter = new GeminiAdapter();
const call = (f: FakeUpstream, body: Record<string, unknown> = {}, signal = new AbortController().signal): UpstreamCall => ({
  model: "gemini-2.5-flash",
  baseUrl: `${f.url}/v1beta`,
  apiKey: KEY,
  signal,
  body: { model: "google/gemini-2.5-flash", messages: [{ role: "user", content: "hi" }], ...body },
});
let fake: FakeUpstream | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

describe("Gemini adapter: request translation", () => {
  it("builds contents, systemInstruction, generationConfig, tools and function call/response parts", () => {
    const body = adapter.upstreamBody({
      ...call({ url: "http://x" } as FakeUpstream),
      body: {
        model: "m",
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: [{ type: "text", text: "Look" }, { type: "image_url", image_url: { url: "data:image/jpeg;base64,BBBB" } }] },
          { role: "assistant", content: "Checking.", tool_calls: [{ id: "c1", type: "function", function: { name: "weather", arguments: '{"city":"Oslo"}' } }] },
          { role: "tool", tool_call_id: "c1", content: '{"temp":3}' },
          { role: "tool", tool_call_id: "c1", content: "plain text" },
        ],
        temperature: 0.1,
        top_p: 0.8,
        top_k: 20,
        max_tokens: 100,
        stop: ["X", "Y"],
        n: 1,
        response_format: { type: "json_object" },
        tools: [{ type: "function", function: { name: "weather", description: "Weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }],
        tool_choice: { type: "function", function: { name: "weather" } },
      },
    });
    expect(body).toEqual({
      systemInstruction: { parts: [{ text: "Be brief." }] },
      contents: [
        { role: "user", parts: [{ text: "Look" }, { inlineData: { mimeType: "image/jpeg", data: "BBBB" } }] },
        { role: "model", parts: [{ text: "Checking." }, { functionCall: { name: "weather", args: { city: "Oslo" } } }] },
        { role: "user", parts: [{ functionResponse: { name: "weather", response: { temp: 3 } } }, { functionResponse: { name: "weather", response: { content: "plain text" } } }] },
      ],
      generationConfig: { temperature: 0.1, topP: 0.8, topK: 20, maxOutputTokens: 100, stopSequences: ["X", "Y"], candidateCount: 1, responseMimeType: "application/json" },
      tools: [{ functionDeclarations: [{ name: "weather", description: "Weather", parametersJsonSchema: { type: "object", properties: { city: { type: "string" } } } }] }],
      toolConfig: { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["weather"] } },
    });
  });

  it("maps reasoning to thinkingConfig", () => {
    const gc = (body: Record<string, unknown>) => (adapter.upstreamBody({ ...call({ url: "http://x" } as FakeUpstream), body: { model: "m", messages: [], ...body } }).generationConfig as Record<string, unknown> | undefined)?.thinkingConfig;
    expect(gc({ reasoning: { effort: "medium" } })).toEqual({ thinkingBudget: 8192, includeThoughts: true });
    expect(gc({ reasoning_effort: "none" })).toEqual({ thinkingBudget: 0 });
    expect(gc({ reasoning: { max_tokens: 2000 } })).toEqual({ thinkingBudget: 2000, includeThoughts: true });
    expect(gc({})).toBeUndefined();
  });

  it("maps finish reasons", () => {
    expect(geminiFinish("STOP", false)).toBe("stop");
    expect(geminiFinish("STOP", true)).toBe("tool_calls");
    expect(geminiFinish("MAX_TOKENS", false)).toBe("length");
    expect(geminiFinish("SAFETY", false)).toBe("content_filter");
    expect(geminiFinish("RECITATION", false)).toBe("content_filter");
    expect(geminiFinish(undefined, false)).toBeNull();
  });
});

describe("Gemini adapter against the fake upstream", () => {
  it("calls generateContent with x-goog-api-key and maps the response and usage", async () => {
    fake = await startFakeGemini({ text: ["Hi", "!"], reasoning: ["hm"], finish: "MAX_TOKENS", usage: { input: 8, output: 2, reasoning: 4, cached: 3 } });
    const result = await adapter.complete(call(fake));
    const req = fake.requests[0]!;
    expect(req.url).toBe("/v1beta/models/gemini-2.5-flash:generateContent");
    expect(req.headers["x-goog-api-key"]).toBe(KEY);
    expect(req.url).not.toContain(KEY);
    expect(result.model).toBe("gemini-2.5-flash");
    expect(result.choices[0]).toMatchObject({ message: { content: "Hi!", reasoning: "hm" }, finish_reason: "length", native_finish_reason: "MAX_TOKENS" });
    expect(result.usage).toEqual({ prompt_tokens: 8, completion_tokens: 6, total_tokens: 14, prompt_tokens_details: { cached_tokens: 3 }, completion_tokens_details: { reasoning_tokens: 4 } });
  });

  it("maps function calls to tool_calls with finish tool_calls", async () => {
    fake = await startFakeGemini({ text: [], toolCalls: [{ id: "", name: "weather", arguments: '{"city":"Oslo"}' }], finish: "STOP", usage: { input: 1, output: 1 } });
    const result = await adapter.complete(call(fake));
    expect(result.choices[0]!.message.tool_calls).toEqual([{ id: "call_0", type: "function", function: { name: "weather", arguments: '{"city":"Oslo"}' } }]);
    expect(result.choices[0]!.finish_reason).toBe("tool_calls");
  });

  it("streams with alt=sse: text pieces, tool calls, finish and usage on the last chunk only", async () => {
    fake = await startFakeGemini({ text: ["a", "b"], toolCalls: [{ id: "", name: "f", arguments: "{}" }], finish: "STOP", usage: { input: 4, output: 5 } });
    const chunks = await collect(adapter.stream(call(fake, { stream: true })));
    expect(fake.requests[0]!.url).toBe("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    expect(chunks.map((c) => c.choices[0]!.delta.content ?? "").join("")).toBe("ab");
    expect(chunks.flatMap((c) => c.choices[0]!.delta.tool_calls ?? [])).toEqual([{ index: 0, id: "call_0", type: "function", function: { name: "f", arguments: "{}" } }]);
    expect(chunks.slice(0, -1).every((c) => c.usage === undefined)).toBe(true);
    expect(chunks.at(-1)!.choices[0]).toMatchObject({ finish_reason: "tool_calls", native_finish_reason: "STOP" });
    expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 5, total_tokens: 9 });
  });
});

describe("Gemini adapter: chunks at hand", () => {
  it("a stream whose events arrive in one read is handed out with the chunks at hand ([PULL]() without a promise), in order", async () => {
    const text = Array.from({ length: 30 }, (_, i) => `w${i} `);
    const script: Script = { text, finish: "STOP", usage: { input: 3, output: 30 } };
    fake = await startFakeGemini(script);
    // Every frame in one write: the adapter's first read holds them all.
    fake.scriptFor = (req: RecordedRequest) => ({ ...script, raw: { events: [geminiWire.streamEvents(script, req).join("")] } });
    const expected = await collect(adapter.stream(call(fake, { stream: true })));
    const stream = adapter.stream(call(fake, { stream: true }));
    expect(isPullable(stream)).toBe(true);
    const it = stream as unknown as Pullable<(typeof expected)[number]>;
    const firstRead = it[PULL]();
    expect(firstRead).toBeInstanceOf(Promise);
    const got = [(await firstRead).value!];
    let atHand = 0;
    for (;;) {
      const r = it[PULL]();
      // The body's end may come in a read of its own: only the end may wait.
      const done = r instanceof Promise ? await r : r;
      if (done.done) break;
      expect(r, `chunk ${got.length} is at hand`).not.toBeInstanceOf(Promise);
      atHand++;
      got.push(done.value);
    }
    expect(atHand).toBe(expected.length - 1);
    expect(got.map((c) => ({ ...c, created: 0 }))).toEqual(expected.map((c) => ({ ...c, created: 0 })));
    expect(got.map((c) => c.choices[0]!.delta.content ?? "").join("")).toBe(text.join(""));
    expect(got.at(-1)!.choices[0]).toMatchObject({ finish_reason: "stop", native_finish_reason: "STOP" });
    expect(got.at(-1)!.usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 30 });
  });

  it("a stream that ends without a finish reason fails after its chunks, at hand or not", async () => {
    const script: Script = { text: ["a", "b", "c"], finish: "STOP", usage: { input: 1, output: 3 } };
    fake = await startFakeGemini(script);
    // The frames but the last (the finish), in one write, and a clean end of the body.
    fake.scriptFor = (req: RecordedRequest) => ({ ...script, raw: { events: [geminiWire.streamEvents(script, req).slice(0, -1).join("")] } });
    const seen: string[] = [];
    const err = await (async () => {
      for await (const c of adapter.stream(call(fake!, { stream: true }))) seen.push(c.choices[0]?.delta.content ?? "");
    })().catch((e: unknown) => e);
    expect(err).toMatchObject({ message: expect.stringContaining("ended before the response was complete") });
    expect(seen.join("")).not.toBe("");
  });
});

describe("Gemini adapter: blocked prompts", () => {
  it("a prompt blocked by promptFeedback ends with content_filter, in both modes", async () => {
    fake = await startFakeGemini({ text: [], finish: "STOP", blockReason: "SAFETY", usage: { input: 6, output: 0 } });
    const result = await adapter.complete(call(fake));
    expect(result.choices[0]).toMatchObject({ message: { content: null }, finish_reason: "content_filter", native_finish_reason: "SAFETY" });
    const chunks = await collect(adapter.stream(call(fake, { stream: true })));
    expect(chunks).toHaveLength(1);
    expect(chunks[0]!.choices[0]).toMatchObject({ finish_reason: "content_filter", native_finish_reason: "SAFETY" });
    expect(chunks[0]!.usage).toMatchObject({ prompt_tokens: 6 });
  });
});

describe("Gemini adapter contract", () => {
  adapterContract({
    adapter,
    start: startFakeGemini,
    call,
    longScript: { text: Array.from({ length: 40 }, (_, i) => `t${i} `), finish: "STOP", usage: { input: 1, output: 40 } },
    statuses: [[400, false], [403, true], [404, false], [429, true], [500, true], [503, true]],
  });
});
