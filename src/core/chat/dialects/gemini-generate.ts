/**
 * The Gemini dialect at the core's edge (`POST /api/v1beta/models/{model}:generateContent`,
 * `:streamGenerateContent`, docs/dialects.md "Gemini"): a GenerateContentRequest decoded into the canonical
 * request (model.ts, OpenAI chat-completions names), and the canonical answer encoded into a
 * GenerateContentResponse, or into the stream of them Google sends (each chunk a whole GenerateContentResponse
 * holding that piece's parts; the last with `finishReason` and `usageMetadata`; a failure after the first chunk
 * one `{error: {code, message, status}}` and the end).
 *
 * Function calls go out whole (Gemini streams a call's arguments in one part, never in pieces), in one chunk at
 * the finish. Thought signatures (`thoughtSignature`) travel through `reasoning_details` of format
 * google-gemini-v1 (providers/types.ts), so a signature sent back on the next turn reaches a Gemini endpoint on the
 * part it came on (a function call) or on the turn's last text part.
 */
import type { CanonicalRequest, CanonicalResponse, ReasoningDetail, StreamEvent, ToolCall, Usage } from "../model.js";
import type { GeminiContent, GenerateContentRequest } from "../../../contract/requests/gemini-request.js";
import { GEMINI_REASONING_FORMAT, withoutGeminiSignatures } from "../providers/types.js";
import { decodeReasoningBlob, encodeReasoningBlob } from "./openai-responses.js";
import { fail } from "../../../contract/requests/kit.js";

type Json = Record<string, unknown>;

const SHARED_FIELDS = ["models", "provider", "plugins", "session_id", "trace", "user", "service_tier", "cache"] as const;

/** What the encoder needs from the request: whether thoughts are returned (`thinkingConfig.includeThoughts`). */
export interface GeminiEcho {
  includeThoughts: boolean;
}

export function echoOf(body: GenerateContentRequest | undefined): GeminiEcho {
  return { includeThoughts: body?.generationConfig?.thinkingConfig?.includeThoughts === true };
}

/**
 * Google's OpenAPI-subset `Schema` (`responseSchema`, a declaration's `parameters`) as JSON Schema: its `type`
 * names in lower case (`OBJECT` → `object`), `nullable: true` as a `null` type; every other keyword as it is
 * (`properties`, `items`, `required`, `enum`, `format`, `description`, `anyOf`, `minItems`, `propertyOrdering`, …).
 */
export function jsonSchemaOf(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(jsonSchemaOf);
  if (!schema || typeof schema !== "object") return schema;
  const out: Json = {};
  const s = schema as Json;
  for (const [k, v] of Object.entries(s)) {
    if (k === "nullable") continue;
    if (k === "type" && typeof v === "string") out.type = v.toLowerCase();
    else if (k === "properties" && v && typeof v === "object" && !Array.isArray(v)) out.properties = Object.fromEntries(Object.entries(v as Json).map(([name, p]) => [name, jsonSchemaOf(p)]));
    else if (k === "items" || k === "anyOf") out[k] = jsonSchemaOf(v);
    else out[k] = v;
  }
  if (s.nullable === true && typeof out.type === "string") out.type = [out.type, "null"];
  return out;
}

/** The thinking budget's effort (for OpenAI-compatible endpoints, which take only an effort). */
function effortOfBudget(budget: number, maxOutputTokens: number | undefined): string {
  if (maxOutputTokens !== undefined) {
    const share = budget / maxOutputTokens;
    return share >= 0.8 ? "high" : share >= 0.5 ? "medium" : share >= 0.2 ? "low" : "minimal";
  }
  return budget <= 512 ? "minimal" : budget <= 1024 ? "low" : budget <= 8192 ? "medium" : "high";
}

/** `generationConfig.thinkingConfig` as the canonical `reasoning` (docs/dialects.md has the table). */
function reasoningOf(config: NonNullable<GenerateContentRequest["generationConfig"]>): Json | undefined {
  const t = config.thinkingConfig;
  if (!t) return undefined;
  if (t.thinkingBudget !== undefined && t.thinkingLevel !== undefined) fail("generationConfig.thinkingConfig.thinkingLevel", "must not be given with thinkingBudget");
  const exclude = t.includeThoughts === true ? {} : { exclude: true };
  if (t.thinkingBudget === 0) return { effort: "none" };
  if (t.thinkingBudget !== undefined && t.thinkingBudget > 0) return { max_tokens: t.thinkingBudget, effort: effortOfBudget(t.thinkingBudget, config.maxOutputTokens), ...exclude };
  if (t.thinkingLevel !== undefined) return { effort: t.thinkingLevel.toLowerCase(), ...exclude };
  // -1 (dynamic) or includeThoughts alone: the model decides how much to think.
  if (t.thinkingBudget === -1 || t.includeThoughts === true) return { enabled: true, ...exclude };
  return undefined;
}

interface PendingCall {
  id: string;
  name: string;
  answered: boolean;
}

/** A validated GenerateContentRequest for `model` (from the path) as the canonical request. */
export function decodeRequest(body: GenerateContentRequest, model: string): CanonicalRequest {
  const messages: Json[] = [];
  if (body.systemInstruction) {
    const parts = body.systemInstruction.parts;
    messages.push({ role: "system", content: parts.length === 1 ? parts[0]!.text : parts.map((p) => ({ type: "text", text: p.text })) });
  }
  let pending: PendingCall[] = [];
  body.contents.forEach((c, ci) => {
    if (c.role === "model") {
      pending = [];
      messages.push(modelTurn(c, ci, pending));
    } else userTurn(c, ci, pending, messages);
  });

  // The messages are built as JSON records (each dialect's parts as they map): a narrow cast; the rest is checked.
  const req: CanonicalRequest = { model, messages: messages as CanonicalRequest["messages"] };
  const declarations = (body.tools ?? []).flatMap((t, ti) => (t.functionDeclarations ?? []).map((d, di) => ({ d, at: `tools[${ti}].functionDeclarations[${di}]` })));
  if (declarations.length > 0) {
    req.tools = declarations.map(({ d, at }) => {
      if (d.parameters !== undefined && d.parametersJsonSchema !== undefined) fail(`${at}.parametersJsonSchema`, "must not be given with parameters");
      const parameters = d.parametersJsonSchema ?? (d.parameters !== undefined ? jsonSchemaOf(d.parameters) : undefined);
      return { type: "function", function: { name: d.name, ...(d.description !== undefined ? { description: d.description } : {}), ...(parameters !== undefined ? { parameters } : {}) } };
    });
  }
  const fc = body.toolConfig?.functionCallingConfig;
  if (fc) {
    const mode = fc.mode ?? "AUTO";
    const names = fc.allowedFunctionNames;
    if (names !== undefined && mode !== "ANY") fail("toolConfig.functionCallingConfig.allowedFunctionNames", "is only allowed with mode ANY");
    if (mode === "NONE") req.tool_choice = "none";
    else if (mode === "ANY") {
      const declared = declarations.map((x) => x.d.name);
      if (names === undefined || declared.every((n) => names.includes(n))) req.tool_choice = "required";
      else if (names.length === 1) req.tool_choice = { type: "function", function: { name: names[0] } };
      else fail("toolConfig.functionCallingConfig.allowedFunctionNames", "must name one function or every declared one (a subset of several cannot be routed to every provider)");
    } else req.tool_choice = "auto";
  }
  const g = body.generationConfig;
  if (g) {
    if (g.maxOutputTokens !== undefined) req.max_tokens = g.maxOutputTokens;
    if (g.temperature !== undefined) req.temperature = g.temperature;
    if (g.topP !== undefined) req.top_p = g.topP;
    if (g.topK !== undefined) req.top_k = g.topK;
    if (g.seed !== undefined) req.seed = g.seed;
    if (g.presencePenalty !== undefined) req.presence_penalty = g.presencePenalty;
    if (g.frequencyPenalty !== undefined) req.frequency_penalty = g.frequencyPenalty;
    if (g.stopSequences !== undefined && g.stopSequences.length > 0) req.stop = g.stopSequences;
    const schema = g.responseJsonSchema ?? (g.responseSchema !== undefined ? jsonSchemaOf(g.responseSchema) : undefined);
    if (g.responseJsonSchema !== undefined && g.responseSchema !== undefined) fail("generationConfig.responseJsonSchema", "must not be given with responseSchema");
    if (schema !== undefined && g.responseMimeType !== "application/json") {
      fail(g.responseJsonSchema !== undefined ? "generationConfig.responseJsonSchema" : "generationConfig.responseSchema", 'needs responseMimeType "application/json"');
    }
    // `schema` is a JSON Schema object (jsonSchemaOf's result is typed unknown): a narrow cast.
    if (g.responseMimeType === "application/json") req.response_format = schema !== undefined ? { type: "json_schema", json_schema: { name: "response", schema: schema as Json } } : { type: "json_object" };
    const reasoning = reasoningOf(g);
    if (reasoning) req.reasoning = reasoning;
  }
  // Shared fields pass under the same names, as this dialect's schema validated them: a narrow cast for the loop.
  for (const key of SHARED_FIELDS) if (body[key] !== undefined) (req as Json)[key] = body[key];
  return req;
}

/** A `model` turn: text parts as content, thought parts as reasoning, function calls as tool calls, signatures as details. */
function modelTurn(c: GeminiContent, ci: number, pending: PendingCall[]): Json {
  const parts: Json[] = [];
  const toolCalls: ToolCall[] = [];
  const details: ReasoningDetail[] = [];
  let reasoning = "";
  c.parts.forEach((p, pi) => {
    const at = `contents[${ci}].parts[${pi}]`;
    if (p.inlineData !== undefined || p.fileData !== undefined) fail(`${at}.${p.inlineData !== undefined ? "inlineData" : "fileData"}`, "is only allowed in user turns");
    if (p.functionResponse !== undefined) fail(`${at}.functionResponse`, "is only allowed in user turns");
    let callId: string | undefined;
    if (p.functionCall !== undefined) {
      callId = p.functionCall.id !== undefined && p.functionCall.id !== "" ? p.functionCall.id : `call_${ci}_${pi}`;
      toolCalls.push({ id: callId, type: "function", function: { name: p.functionCall.name, arguments: JSON.stringify(p.functionCall.args ?? {}) } });
      pending.push({ id: callId, name: p.functionCall.name, answered: false });
    } else if (p.thought === true) reasoning += p.text ?? "";
    else parts.push({ type: "text", text: p.text ?? "" });
    // A thought part's signature Portico made (another provider's signed thinking, e.g. Anthropic's): its details back.
    const restored = p.thought === true && p.thoughtSignature !== undefined ? decodeReasoningBlob(p.thoughtSignature) : undefined;
    if (restored) {
      for (const d of restored) details.push({ ...d, index: details.length });
    } else if (p.thoughtSignature !== undefined && p.thoughtSignature !== "") {
      details.push({ type: "reasoning.encrypted", data: p.thoughtSignature, format: GEMINI_REASONING_FORMAT, ...(callId !== undefined ? { id: callId } : {}), index: details.length });
    }
  });
  const text = parts.filter((p) => p.text !== "");
  const out: Json = { role: "assistant", content: text.length > 0 ? text : toolCalls.length > 0 ? null : "" };
  if (toolCalls.length > 0) out.tool_calls = toolCalls;
  if (reasoning !== "") out.reasoning = reasoning;
  if (details.length > 0) out.reasoning_details = details;
  return out;
}

/** A `user` (or `function`) turn: function responses as `tool` messages first, in order, then the rest as one user message. */
function userTurn(c: GeminiContent, ci: number, pending: PendingCall[], messages: Json[]): void {
  const parts: Json[] = [];
  c.parts.forEach((p, pi) => {
    const at = `contents[${ci}].parts[${pi}]`;
    if (p.thought === true) fail(`${at}.thought`, "is only allowed in model turns");
    if (p.functionCall !== undefined) fail(`${at}.functionCall`, "is only allowed in model turns");
    if (p.functionResponse !== undefined) {
      const fr = p.functionResponse;
      // The call it answers: by id, else the first unanswered call of that name in the model turn before.
      const call = pending.find((x) => !x.answered && fr.id !== undefined && x.id === fr.id) ?? pending.find((x) => !x.answered && x.name === fr.name);
      if (call) call.answered = true;
      messages.push({ role: "tool", tool_call_id: call?.id ?? (fr.id !== undefined && fr.id !== "" ? fr.id : `call_${ci}_${pi}`), name: fr.name, content: JSON.stringify(fr.response) });
      return;
    }
    if (p.text !== undefined) parts.push({ type: "text", text: p.text });
    else if (p.inlineData !== undefined) {
      if (!p.inlineData.mimeType.startsWith("image/")) fail(`${at}.inlineData.mimeType`, `must be an image type (image/png, image/jpeg, …), got "${p.inlineData.mimeType}"`);
      parts.push({ type: "image_url", image_url: { url: `data:${p.inlineData.mimeType};base64,${p.inlineData.data}` } });
    } else if (p.fileData !== undefined) {
      if (p.fileData.mimeType !== undefined && !p.fileData.mimeType.startsWith("image/")) fail(`${at}.fileData.mimeType`, `must be an image type (image/png, image/jpeg, …), got "${p.fileData.mimeType}"`);
      parts.push({ type: "image_url", image_url: { url: p.fileData.fileUri } });
    }
  });
  if (parts.length > 0) messages.push({ role: "user", content: parts });
}

const GEMINI_FINISHES = new Set([
  "STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "LANGUAGE", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "MALFORMED_FUNCTION_CALL",
  "IMAGE_SAFETY", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS",
]);

/** Gemini's finish reason: a Gemini upstream's own, else mapped from the finish reason. */
export function finishReasonOf(finish: string | null | undefined, native: string | null | undefined): string {
  if (native && GEMINI_FINISHES.has(native)) return native;
  switch (finish) {
    case "length":
      return "MAX_TOKENS";
    case "content_filter":
      return "SAFETY";
    case "error":
      return "OTHER";
    default:
      return "STOP";
  }
}

/** Gemini's usageMetadata: `candidatesTokenCount` excludes the thoughts, counted apart (the canonical completion includes them). */
export function usageOf(u: Usage | null | undefined): Json {
  const thoughts = u?.completion_tokens_details?.reasoning_tokens ?? 0;
  const cached = u?.prompt_tokens_details?.cached_tokens ?? 0;
  const prompt = u?.prompt_tokens ?? 0;
  const completion = u?.completion_tokens ?? 0;
  return {
    promptTokenCount: prompt,
    candidatesTokenCount: Math.max(0, completion - thoughts),
    totalTokenCount: u?.total_tokens ?? prompt + completion,
    ...(cached > 0 ? { cachedContentTokenCount: cached } : {}),
    ...(thoughts > 0 ? { thoughtsTokenCount: thoughts } : {}),
  };
}

function parseArgs(args: string): unknown {
  if (args.trim() === "") return {};
  try {
    return JSON.parse(args);
  } catch {
    return {};
  }
}

/** Signatures of the details: by tool call id, and the ones of no call. */
function signaturesOf(details: readonly ReasoningDetail[] | undefined): { byCall: Map<string, string>; loose: string[] } {
  const byCall = new Map<string, string>();
  const loose: string[] = [];
  for (const d of details ?? []) {
    if (d.type !== "reasoning.encrypted" || d.format !== GEMINI_REASONING_FORMAT) continue;
    if (d.id) byCall.set(d.id, d.data);
    else loose.push(d.data);
  }
  return { byCall, loose };
}

const functionCallPart = (id: string, name: string, args: string, sig: string | undefined): Json => ({ functionCall: { id, name, args: parseArgs(args) }, ...(sig !== undefined ? { thoughtSignature: sig } : {}) });

/** The canonical answer as a GenerateContentResponse; `responseId` is the generation id. */
export function encodeResponse(completion: CanonicalResponse, echo: GeminiEcho): Json {
  const choice = completion.choices[0];
  const msg = choice?.message;
  const sigs = signaturesOf(msg?.reasoning_details);
  const parts: Json[] = [];
  if (echo.includeThoughts && msg?.reasoning) {
    // Another provider's signed thinking (Anthropic's) rides on the thought part as Portico's blob, so it goes back signed.
    const foreign = withoutGeminiSignatures(msg.reasoning_details);
    parts.push({ text: msg.reasoning, thought: true, ...(foreign.length > 0 ? { thoughtSignature: encodeReasoningBlob(foreign) } : {}) });
  }
  if (typeof msg?.content === "string" && msg.content !== "") parts.push({ text: msg.content });
  const loose = sigs.loose.at(-1);
  if (loose !== undefined) {
    const last = parts.at(-1);
    if (last) last.thoughtSignature = loose;
    else parts.push({ text: "", thoughtSignature: loose });
  }
  for (const tc of msg?.tool_calls ?? []) parts.push(functionCallPart(tc.id, tc.function.name, tc.function.arguments, sigs.byCall.get(tc.id)));
  const candidate: Json = { content: { role: "model", parts }, finishReason: finishReasonOf(choice?.finish_reason, choice?.native_finish_reason), index: 0 };
  return { candidates: [candidate], usageMetadata: usageOf(completion.usage), modelVersion: completion.model, responseId: completion.id };
}

/** Google's status name for an HTTP status (the error envelope's `status`). */
export function statusNameOf(code: number): string {
  switch (code) {
    case 400:
    case 413:
    case 422:
      return "INVALID_ARGUMENT";
    case 401:
      return "UNAUTHENTICATED";
    case 402:
      return "FAILED_PRECONDITION";
    case 403:
      return "PERMISSION_DENIED";
    case 404:
      return "NOT_FOUND";
    case 409:
      return "ABORTED";
    case 429:
      return "RESOURCE_EXHAUSTED";
    case 499:
      return "CANCELLED";
    case 501:
      return "UNIMPLEMENTED";
    case 503:
      return "UNAVAILABLE";
    case 504:
      return "DEADLINE_EXCEEDED";
    default:
      return "INTERNAL";
  }
}

/** Google's error body. */
export function errorBody(code: number, message: string): Json {
  return { error: { code, message, status: statusNameOf(code) } };
}

/**
 * Turns canonical stream events into GenerateContentResponse chunks, one encoder per stream. `push` takes each
 * event in order and gives the chunks to send (at most one); `end` gives the last chunk (finish reason, usage,
 * the function calls) once the stream ended normally.
 */
export class GeminiStreamEncoder {
  private id = "";
  private model: string;
  private usage: Usage | undefined;
  private finish: string | null = null;
  private native: string | null = null;
  private ended = false;
  /** Tool call index → the call, its arguments gathered (sent whole at the finish). */
  private readonly calls = new Map<number, { id: string; name: string; args: string }>();
  private readonly callSigs = new Map<string, string>();
  /** Another provider's reasoning details (Anthropic's signed thinking), gathered by index until the thinking ends. */
  private readonly foreign = new Map<number, ReasoningDetail>();

  constructor(
    fallbackModel: string,
    private readonly echo: GeminiEcho,
  ) {
    this.model = fallbackModel;
  }

  push(event: StreamEvent): Json[] {
    if (this.ended) return [];
    if (event.id) this.id = event.id;
    if (event.model) this.model = event.model;
    if (event.error !== undefined) {
      this.ended = true;
      return [errorBody(event.error.code, event.error.message)];
    }
    if (event.usage) this.usage = event.usage;
    const choice = event.choices?.[0];
    if (!choice) return [];
    const delta = choice.delta ?? {};
    const parts: Json[] = [];
    if (this.echo.includeThoughts) this.gather(withoutGeminiSignatures(delta.reasoning_details));
    // The thinking ended (text or a call follows): its signed details as one empty thought part.
    if (((typeof delta.content === "string" && delta.content !== "") || (delta.tool_calls?.length ?? 0) > 0)) this.flushForeign(parts);
    const sigs = signaturesOf(delta.reasoning_details);
    for (const [id, sig] of sigs.byCall) this.callSigs.set(id, sig);
    if (this.echo.includeThoughts && typeof delta.reasoning === "string" && delta.reasoning !== "") parts.push({ text: delta.reasoning, thought: true });
    if (typeof delta.content === "string" && delta.content !== "") parts.push({ text: delta.content });
    const loose = sigs.loose.at(-1);
    if (loose !== undefined) {
      const last = parts.at(-1);
      if (last) last.thoughtSignature = loose;
      else parts.push({ text: "", thoughtSignature: loose });
    }
    for (const tc of delta.tool_calls ?? []) {
      let call = this.calls.get(tc.index);
      if (!call) this.calls.set(tc.index, (call = { id: tc.id ?? "", name: tc.function?.name ?? "", args: "" }));
      if (tc.id && !call.id) call.id = tc.id;
      if (tc.function?.name && !call.name) call.name = tc.function.name;
      if (tc.function?.arguments) call.args += tc.function.arguments;
    }
    if (choice.finish_reason) {
      this.finish = choice.finish_reason;
      this.native = choice.native_finish_reason ?? null;
    }
    return parts.length > 0 ? [this.chunk(parts)] : [];
  }

  /** The last chunk of a stream that ended normally: the function calls, the finish reason and the usage. */
  end(): Json[] {
    if (this.ended) return [];
    this.ended = true;
    const parts: Json[] = [];
    this.flushForeign(parts);
    parts.push(...[...this.calls.entries()].sort((a, b) => a[0] - b[0]).map(([, c]) => functionCallPart(c.id, c.name, c.args, this.callSigs.get(c.id))));
    // As Google ends a text answer: an empty text part beside the finish reason.
    const last = this.chunk(parts.length > 0 ? parts : [{ text: "" }]);
    (last.candidates as Json[])[0]!.finishReason = finishReasonOf(this.finish, this.native);
    last.usageMetadata = usageOf(this.usage);
    return [last];
  }

  private gather(details: ReasoningDetail[]): void {
    for (const d of details) {
      const at = d.index ?? 0;
      const have = this.foreign.get(at);
      if (d.type === "reasoning.encrypted" || !have || have.type !== "reasoning.text") {
        this.foreign.set(at, d.type === "reasoning.text" ? { type: d.type, text: d.text ?? "", ...(d.signature ? { signature: d.signature } : {}), ...(d.format ? { format: d.format } : {}), index: at } : { ...d });
        continue;
      }
      have.text = (have.text ?? "") + (d.text ?? "");
      if (d.signature) have.signature = d.signature;
    }
  }

  private flushForeign(parts: Json[]): void {
    if (this.foreign.size === 0) return;
    const details = [...this.foreign.entries()].sort((a, b) => a[0] - b[0]).map(([, d]) => d);
    this.foreign.clear();
    parts.push({ text: "", thought: true, thoughtSignature: encodeReasoningBlob(details) });
  }

  private chunk(parts: Json[]): Json {
    return { candidates: [{ content: { role: "model", parts }, index: 0 }], modelVersion: this.model, responseId: this.id };
  }
}
