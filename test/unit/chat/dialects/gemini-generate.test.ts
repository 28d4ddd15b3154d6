/**
 * The Gemini dialect's decoder and encoder on inputs the fakes do not produce (docs/dialects.md, "Gemini"): calls
 * matched to their responses by id and by name, signatures both ways, schema conversion, the thinking table,
 * usage and finish mapping, and the stream encoder's bookkeeping (argument pieces gathered, usage after the
 * finish, an error ending the stream).
 */
import { describe, expect, it } from "vitest";
import { decodeRequest, encodeResponse, finishReasonOf, GeminiStreamEncoder, jsonSchemaOf, usageOf } from "../../../../src/core/chat/dialects/gemini-generate.js";
import { GenerateContentRequest } from "../../../../src/contract/requests/gemini-request.js";
import { RuleViolation } from "../../../../src/contract/requests/kit.js";
import type { StreamEvent } from "../../../../src/core/chat/model.js";

const decode = (body: unknown) => decodeRequest(GenerateContentRequest.parse(body), "google/gemini-2.5-flash");
const fieldOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (err) {
    if (err instanceof RuleViolation) return err.field;
    throw err;
  }
  return undefined;
};

describe("Gemini dialect: decoding", () => {
  it("turns model turns into assistant messages and function responses into tool messages, matched by id or name", () => {
    const req = decode({
      systemInstruction: { parts: [{ text: "Be brief." }] },
      contents: [
        { role: "user", parts: [{ text: "weather?" }] },
        {
          role: "model",
          parts: [
            { text: "plan", thought: true },
            { text: "Checking." },
            { functionCall: { name: "w", args: { c: "P" } }, thoughtSignature: "s1" },
            { functionCall: { id: "x9", name: "w", args: { c: "R" } } },
          ],
        },
        { role: "user", parts: [{ functionResponse: { id: "x9", name: "w", response: { t: 2 } } }, { functionResponse: { name: "w", response: { t: 1 } } }, { text: "thanks" }] },
      ],
    });
    expect(req.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: [{ type: "text", text: "weather?" }] },
      {
        role: "assistant",
        content: [{ type: "text", text: "Checking." }],
        reasoning: "plan",
        tool_calls: [
          { id: "call_1_2", type: "function", function: { name: "w", arguments: '{"c":"P"}' } },
          { id: "x9", type: "function", function: { name: "w", arguments: '{"c":"R"}' } },
        ],
        reasoning_details: [{ type: "reasoning.encrypted", data: "s1", format: "google-gemini-v1", id: "call_1_2", index: 0 }],
      },
      { role: "tool", tool_call_id: "x9", name: "w", content: '{"t":2}' },
      { role: "tool", tool_call_id: "call_1_2", name: "w", content: '{"t":1}' },
      { role: "user", content: [{ type: "text", text: "thanks" }] },
    ]);
  });

  it("maps the settings and the thinking table", () => {
    const base = { contents: [{ parts: [{ text: "hi" }] }] };
    expect(decode({ ...base, generationConfig: { maxOutputTokens: 100, thinkingConfig: { thinkingBudget: 80, includeThoughts: true } } })).toMatchObject({ max_tokens: 100, reasoning: { max_tokens: 80, effort: "high" } });
    expect(decode({ ...base, generationConfig: { thinkingConfig: { thinkingBudget: 2048 } } }).reasoning).toEqual({ max_tokens: 2048, effort: "medium", exclude: true });
    expect(decode({ ...base, generationConfig: { thinkingConfig: { thinkingBudget: 0 } } }).reasoning).toEqual({ effort: "none" });
    expect(decode({ ...base, generationConfig: { thinkingConfig: { thinkingBudget: -1, includeThoughts: true } } }).reasoning).toEqual({ enabled: true });
    expect(decode({ ...base, generationConfig: { thinkingConfig: { thinkingLevel: "HIGH" } } }).reasoning).toEqual({ effort: "high", exclude: true });
    expect(fieldOf(() => decode({ ...base, generationConfig: { thinkingConfig: { thinkingLevel: "LOW", thinkingBudget: 5 } } }))).toBe("generationConfig.thinkingConfig.thinkingLevel");
    expect(decode({ ...base, generationConfig: { responseMimeType: "application/json" } }).response_format).toEqual({ type: "json_object" });
    expect(decode({ ...base, tools: [{ functionDeclarations: [{ name: "a" }, { name: "b" }] }], toolConfig: { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["a", "b"] } } }).tool_choice).toBe("required");
    expect(decode({ ...base, toolConfig: { functionCallingConfig: { mode: "NONE" } } }).tool_choice).toBe("none");
    expect(fieldOf(() => decode({ ...base, tools: [{ functionDeclarations: [{ name: "a" }, { name: "b" }, { name: "c" }] }], toolConfig: { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["a", "b"] } } }))).toBe(
      "toolConfig.functionCallingConfig.allowedFunctionNames",
    );
    expect(fieldOf(() => decode({ contents: [{ role: "model", parts: [{ inlineData: { mimeType: "image/png", data: "AA" } }] }] }))).toBe("contents[0].parts[0].inlineData");
    expect(fieldOf(() => decode({ contents: [{ parts: [{ text: "a", functionCall: { name: "f" } }] }] }))).toBe("contents[0].parts[0]");
  });

  it("converts Google's schema to JSON Schema", () => {
    expect(jsonSchemaOf({ type: "OBJECT", properties: { a: { type: "ARRAY", items: { type: "STRING", nullable: true } } }, required: ["a"], propertyOrdering: ["a"] })).toEqual({
      type: "object",
      properties: { a: { type: "array", items: { type: ["string", "null"] } } },
      required: ["a"],
      propertyOrdering: ["a"],
    });
  });
});

describe("Gemini dialect: encoding", () => {
  it("maps finish reasons and usage", () => {
    expect(finishReasonOf("stop", "end_turn")).toBe("STOP");
    expect(finishReasonOf("tool_calls", null)).toBe("STOP");
    expect(finishReasonOf("length", null)).toBe("MAX_TOKENS");
    expect(finishReasonOf("content_filter", "refusal")).toBe("SAFETY");
    expect(finishReasonOf("content_filter", "RECITATION")).toBe("RECITATION");
    expect(finishReasonOf(null, null)).toBe("STOP");
    expect(usageOf({ prompt_tokens: 10, completion_tokens: 7, total_tokens: 17, prompt_tokens_details: { cached_tokens: 4 }, completion_tokens_details: { reasoning_tokens: 5 } })).toEqual({
      promptTokenCount: 10,
      candidatesTokenCount: 2,
      totalTokenCount: 17,
      cachedContentTokenCount: 4,
      thoughtsTokenCount: 5,
    });
  });

  it("puts signatures back on their parts", () => {
    const res = encodeResponse(
      {
        id: "gen-1",
        object: "chat.completion",
        created: 0,
        model: "m",
        choices: [
          {
            index: 0,
            message: {
              role: "assistant",
              content: "ok",
              tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "" } }],
              reasoning: "r",
              reasoning_details: [
                { type: "reasoning.encrypted", data: "sc", format: "google-gemini-v1", id: "c1" },
                { type: "reasoning.encrypted", data: "st", format: "google-gemini-v1" },
                { type: "reasoning.text", text: "r", signature: "anthropic", format: "anthropic-claude-v1" },
              ],
            },
            finish_reason: "tool_calls",
          },
        ],
      },
      { includeThoughts: true },
    );
    const parts = (res.candidates as any)[0].content.parts;
    expect(parts).toEqual([
      { text: "r", thought: true, thoughtSignature: expect.stringMatching(/^portico\.r1\./) },
      { text: "ok", thoughtSignature: "st" },
      { functionCall: { id: "c1", name: "f", args: {} }, thoughtSignature: "sc" },
    ]);
    // The thought part's blob is Anthropic's signed thinking, which decoding restores.
    const back = decode({ contents: [{ parts: [{ text: "q" }] }, { role: "model", parts }] });
    expect(back.messages[1]!.reasoning_details).toEqual([
      { type: "reasoning.text", text: "r", signature: "anthropic", format: "anthropic-claude-v1", index: 0 },
      { type: "reasoning.encrypted", data: "st", format: "google-gemini-v1", index: 1 },
      { type: "reasoning.encrypted", data: "sc", format: "google-gemini-v1", id: "c1", index: 2 },
    ]);
  });

  it("streams: text at once, calls gathered and sent whole at the end with the finish and the usage that came after it", () => {
    const enc = new GeminiStreamEncoder("fallback", { includeThoughts: false });
    const ev = (e: Partial<StreamEvent>): StreamEvent => ({ id: "gen-2", object: "chat.completion.chunk", created: 0, model: "m", choices: [], ...e }) as StreamEvent;
    expect(enc.push(ev({ choices: [{ index: 0, delta: { reasoning: "hidden" }, finish_reason: null }] }))).toEqual([]);
    expect(enc.push(ev({ choices: [{ index: 0, delta: { content: "Hi" }, finish_reason: null }] }))).toEqual([
      { candidates: [{ content: { role: "model", parts: [{ text: "Hi" }] }, index: 0 }], modelVersion: "m", responseId: "gen-2" },
    ]);
    enc.push(ev({ choices: [{ index: 0, delta: { tool_calls: [{ index: 1, id: "b", function: { name: "g", arguments: '{"y"' } }] }, finish_reason: null }] }));
    enc.push(ev({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: "a", function: { name: "f", arguments: "{}" } }] }, finish_reason: null }] }));
    enc.push(ev({ choices: [{ index: 0, delta: { tool_calls: [{ index: 1, function: { arguments: ":2}" } }] }, finish_reason: "tool_calls" }] }));
    enc.push(ev({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } }));
    expect(enc.end()).toEqual([
      {
        candidates: [{ content: { role: "model", parts: [{ functionCall: { id: "a", name: "f", args: {} } }, { functionCall: { id: "b", name: "g", args: { y: 2 } } }] }, index: 0, finishReason: "STOP" }],
        modelVersion: "m",
        responseId: "gen-2",
        usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 4, totalTokenCount: 7 },
      },
    ]);
    expect(enc.end()).toEqual([]);
  });

  it("an error ends the stream with Google's envelope and nothing after", () => {
    const enc = new GeminiStreamEncoder("m", { includeThoughts: true });
    const out = enc.push({ id: "", object: "chat.completion.chunk", created: 0, model: "", choices: [], error: { reason: "upstream_failed" as never, code: 429, message: "slow down" } });
    expect(out).toEqual([{ error: { code: 429, message: "slow down", status: "RESOURCE_EXHAUSTED" } }]);
    expect(enc.end()).toEqual([]);
  });
});
