/**
 * Google Gemini `models/<model>:generateContent` and `:streamGenerateContent?alt=sse` (and `:countTokens` for
 * Messages `count_tokens`), key in the
 * `x-goog-api-key` header. The base URL includes the API version, e.g.
 * `https://generativelanguage.googleapis.com/v1beta`.
 */
import {
  UpstreamError,
  type ChatChunk,
  type ChatCompletion,
  type ChatUsage,
  type FinishReason,
  type ProviderAdapter,
  type ReasoningDetail,
  GEMINI_REASONING_FORMAT,
  type ToolCall,
  type UpstreamCall,
} from "./types.js";
import { contentText, joinUrl, linkedController, nowSeconds, parseArguments, parseEventData, postJson, readJsonRedacted, redact, batchedStream, sseMap, truncatedStream, upstreamTimeouts, type UpstreamResponse } from "./http.js";
import type { EventSourceMessage } from "eventsource-parser";
import type { ChatContentPart, ChatFunctionTool, ChatMessage, ChatReasoning } from "../../../contract/requests/chat-request.js";
import { toTurns, type PartWriter } from "./messages.js";
import { geminiGrounding } from "./native-search.js";

type Part = Record<string, unknown>;

/** `{error: {code, message, status}}` (also inside a one-element array, as some endpoints send). */
export function geminiErrorMessage(body: unknown): string | undefined {
  const b = Array.isArray(body) ? body[0] : body;
  const error = (b as { error?: { message?: unknown; status?: unknown } } | undefined)?.error;
  if (!error || typeof error.message !== "string") return undefined;
  return typeof error.status === "string" ? `${error.status}: ${error.message}` : error.message;
}

export function geminiFinish(reason: unknown, hasToolCalls: boolean): FinishReason {
  if (reason === undefined || reason === null || reason === "FINISH_REASON_UNSPECIFIED") return null;
  switch (reason) {
    case "STOP":
      return hasToolCalls ? "tool_calls" : "stop";
    case "MAX_TOKENS":
      return "length";
    case "SAFETY":
    case "RECITATION":
    case "BLOCKLIST":
    case "PROHIBITED_CONTENT":
    case "SPII":
    case "IMAGE_SAFETY":
      return "content_filter";
    case "MALFORMED_FUNCTION_CALL":
      return "error";
    default:
      return "stop";
  }
}

/**
 * How one part is written; `signatures` are the thought signatures to send back on tool calls (by tool call id),
 * text parts carry theirs as `thought_signature` (see {@link withSignatures}).
 */
function writerFor(signatures: ReadonlyMap<string | undefined, string>): PartWriter<Part> {
  return {
    text: (text, part) => (typeof part?.thought_signature === "string" ? { text, thoughtSignature: part.thought_signature } : { text }),
    image: (url, inline) => (inline ? { inlineData: { mimeType: inline.mediaType, data: inline.data } } : { fileData: { fileUri: url } }),
    toolCall: (tc) => {
      const sig = signatures.get(tc.id);
      return { functionCall: { name: tc.function?.name, args: parseArguments(tc.function?.arguments) }, ...(sig !== undefined ? { thoughtSignature: sig } : {}) };
    },
    toolResult: (m, name) => {
      const text = contentText(m.content);
      let response: unknown;
      try {
        response = JSON.parse(text);
      } catch {
        response = undefined;
      }
      const wrapped = response && typeof response === "object" && !Array.isArray(response) ? response : { content: text };
      return { functionResponse: { name: name ?? String(m.name ?? m.tool_call_id ?? "tool"), response: wrapped } };
    },
  };
}

/**
 * Gemini's thought signatures of earlier turns (`reasoning_details` of format google-gemini-v1): those of tool
 * calls by call id; the others put on the assistant message's last text part (an empty one when it has none),
 * where Gemini put its own. Messages without them are left as they are.
 */
function withSignatures(messages: readonly ChatMessage[]): { messages: ChatMessage[]; byCall: Map<string, string> } {
  const byCall = new Map<string, string>();
  const out = messages.map((m) => {
    if (m.role !== "assistant" || !Array.isArray(m.reasoning_details)) return m;
    let loose: string | undefined;
    for (const d of m.reasoning_details as ReasoningDetail[]) {
      if (d?.type !== "reasoning.encrypted" || d.format !== GEMINI_REASONING_FORMAT || typeof d.data !== "string") continue;
      if (typeof d.id === "string" && d.id !== "") byCall.set(d.id, d.data);
      else loose = d.data;
    }
    if (loose === undefined) return m;
    const parts: ChatContentPart[] =
      typeof m.content === "string" ? (m.content === "" ? [] : [{ type: "text", text: m.content }]) : Array.isArray(m.content) ? m.content.map((p) => ({ ...p })) : [];
    const last = parts.map((p) => p.type).lastIndexOf("text");
    if (last >= 0) parts[last] = { ...parts[last]!, thought_signature: loose };
    else parts.push({ type: "text", text: "", thought_signature: loose });
    return { ...m, content: parts };
  });
  return { messages: out, byCall };
}

function toolConfig(choice: unknown): Record<string, unknown> | undefined {
  if (choice === "auto") return { functionCallingConfig: { mode: "AUTO" } };
  if (choice === "none") return { functionCallingConfig: { mode: "NONE" } };
  if (choice === "required") return { functionCallingConfig: { mode: "ANY" } };
  const name = (choice as { function?: { name?: unknown } } | undefined)?.function?.name;
  if (typeof name === "string") return { functionCallingConfig: { mode: "ANY", allowedFunctionNames: [name] } };
  return undefined;
}

/** Thinking budget per reasoning effort (tokens); `none` turns thinking off where the model allows. */
const effortBudget: Record<string, number> = { none: 0, minimal: 512, low: 1024, medium: 8192, high: 24576, xhigh: 32768, max: 32768 };

/** `reasoning` (`max_tokens` or `effort`) → `generationConfig.thinkingConfig`, thoughts included. */
function thinkingConfig(reasoning: ChatReasoning | undefined): Record<string, unknown> | undefined {
  if (!reasoning || typeof reasoning !== "object") return undefined;
  const r = reasoning;
  // `enabled` alone (no budget, no effort): Gemini's dynamic thinking (budget -1), as the Gemini dialect asks for it.
  const budget = typeof r.max_tokens === "number" ? r.max_tokens : typeof r.effort === "string" ? effortBudget[r.effort] : r.enabled === true ? -1 : undefined;
  if (budget === undefined) return undefined;
  // `exclude`: the model thinks, its thoughts are not returned (Gemini's includeThoughts false).
  return budget === 0 ? { thinkingBudget: 0 } : { thinkingBudget: budget, ...(r.exclude === true ? {} : { includeThoughts: true }) };
}

/**
 * Whether an answer was grounded with Google Search (its candidates' `groundingMetadata` name the queries run or
 * the pages used): Google bills per grounded prompt, so such an answer counts one `web_search_requests`.
 */
function grounded(metadata: Iterable<unknown>): boolean {
  for (const m of metadata) {
    const g = m as { webSearchQueries?: unknown; groundingChunks?: unknown } | undefined;
    if ((Array.isArray(g?.webSearchQueries) && g.webSearchQueries.length > 0) || (Array.isArray(g?.groundingChunks) && g.groundingChunks.length > 0)) return true;
  }
  return false;
}

function mapUsage(u: Record<string, unknown> | undefined, searched = false): ChatUsage | undefined {
  if (!u) return undefined;
  const n = (v: unknown) => (typeof v === "number" ? v : 0);
  const prompt = n(u.promptTokenCount);
  const reasoning = n(u.thoughtsTokenCount);
  const completion = n(u.candidatesTokenCount) + reasoning;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: typeof u.totalTokenCount === "number" ? u.totalTokenCount : prompt + completion,
    prompt_tokens_details: { cached_tokens: n(u.cachedContentTokenCount) },
    completion_tokens_details: { reasoning_tokens: reasoning },
    ...(searched ? { server_tool_use: { web_search_requests: 1 } } : {}),
  };
}

interface Translated {
  text: string;
  reasoning: string;
  toolCalls: Array<{ name: string; args: unknown; id?: string; signature?: string }>;
  /** Thought signatures on text and thought parts (those on function calls are on `toolCalls`). */
  signatures: string[];
  finish: unknown;
  /** Per part: its answer text ("" for thoughts and other parts) and where it begins in `text` (grounding offsets). */
  partTexts: string[];
  partStarts: number[];
}

function translateCandidate(candidate: Record<string, unknown> | undefined): Translated {
  const out: Translated = { text: "", reasoning: "", toolCalls: [], signatures: [], finish: candidate?.finishReason, partTexts: [], partStarts: [] };
  const parts = ((candidate?.content as { parts?: Part[] } | undefined)?.parts ?? []) as Part[];
  for (const part of parts) {
    out.partStarts.push(out.text.length);
    out.partTexts.push(typeof part.text === "string" && part.thought !== true ? part.text : "");
    const sig = typeof part.thoughtSignature === "string" && part.thoughtSignature !== "" ? part.thoughtSignature : undefined;
    if (part.functionCall && typeof part.functionCall === "object") {
      const fc = part.functionCall as { name?: unknown; args?: unknown; id?: unknown };
      out.toolCalls.push({ name: String(fc.name ?? ""), args: fc.args ?? {}, ...(typeof fc.id === "string" && fc.id !== "" ? { id: fc.id } : {}), ...(sig ? { signature: sig } : {}) });
      continue;
    }
    if (typeof part.text === "string") {
      if (part.thought === true) out.reasoning += part.text;
      else out.text += part.text;
    }
    if (sig) out.signatures.push(sig);
  }
  return out;
}

/** The thought signatures of a candidate's parts as reasoning details (`ids`: the tool call ids, in order). */
function signatureDetails(t: Translated, ids: string[], first: number): ReasoningDetail[] {
  const out: ReasoningDetail[] = [];
  t.toolCalls.forEach((tc, k) => {
    if (tc.signature) out.push({ type: "reasoning.encrypted", data: tc.signature, format: GEMINI_REASONING_FORMAT, id: ids[k]!, index: first + out.length });
  });
  for (const sig of t.signatures) out.push({ type: "reasoning.encrypted", data: sig, format: GEMINI_REASONING_FORMAT, index: first + out.length });
  return out;
}

/** Gemini error statuses that can arrive inside a stream, as HTTP statuses. */
const statusCodes: Record<string, number> = {
  INVALID_ARGUMENT: 400,
  FAILED_PRECONDITION: 400,
  PERMISSION_DENIED: 403,
  NOT_FOUND: 404,
  RESOURCE_EXHAUSTED: 429,
  INTERNAL: 500,
  UNAVAILABLE: 503,
  DEADLINE_EXCEEDED: 504,
};

export class GeminiAdapter implements ProviderAdapter {
  readonly format = "gemini" as const;

  upstreamBody(call: UpstreamCall): Record<string, unknown> {
    const b = call.body;
    const signed = withSignatures(b.messages);
    const { system, turns } = toTurns(signed.messages, writerFor(signed.byCall));
    const contents = turns.map((t) => ({ role: t.role === "assistant" ? "model" : "user", parts: t.parts }));
    const out: Record<string, unknown> = { contents };
    if (system !== undefined) out.systemInstruction = { parts: [{ text: system }] };
    const gc: Record<string, unknown> = {};
    const num = (k: string) => (typeof b[k] === "number" ? (b[k] as number) : undefined);
    const set = (k: string, v: unknown) => {
      if (v !== undefined) gc[k] = v;
    };
    set("temperature", num("temperature"));
    set("topP", num("top_p"));
    set("topK", num("top_k"));
    set("maxOutputTokens", num("max_completion_tokens") ?? num("max_tokens"));
    set("candidateCount", num("n"));
    set("presencePenalty", num("presence_penalty"));
    set("frequencyPenalty", num("frequency_penalty"));
    set("seed", num("seed"));
    if (b.stop !== undefined && b.stop !== null) gc.stopSequences = Array.isArray(b.stop) ? b.stop : [b.stop];
    const format = b.response_format;
    if (format?.type === "json_object") gc.responseMimeType = "application/json";
    if (format?.type === "json_schema") {
      gc.responseMimeType = "application/json";
      if (format.json_schema?.schema) gc.responseJsonSchema = format.json_schema.schema;
    }
    const thinking = thinkingConfig(b.reasoning ?? (b.reasoning_effort ? { effort: b.reasoning_effort } : undefined));
    if (thinking) gc.thinkingConfig = thinking;
    if (Object.keys(gc).length > 0) out.generationConfig = gc;
    if (Array.isArray(b.tools) && b.tools.length > 0) {
      out.tools = [
        {
          functionDeclarations: (b.tools as ChatFunctionTool[]).map((t) => ({
            name: t.function?.name,
            ...(t.function?.description !== undefined ? { description: t.function.description } : {}),
            ...(t.function?.parameters !== undefined ? { parametersJsonSchema: t.function.parameters } : {}),
          })),
        },
      ];
      const config = toolConfig(b.tool_choice);
      if (config) out.toolConfig = config;
    }
    // The web plugin's native search (native-search.ts): Grounding with Google Search, which takes no options.
    if (call.webSearch) out.tools = [...(Array.isArray(out.tools) ? (out.tools as Part[]) : []), { google_search: {} }];
    return out;
  }

  private request(call: UpstreamCall, stream: boolean, signal: AbortSignal): Promise<UpstreamResponse> {
    const model = encodeURIComponent(call.model.replace(/^models\//, ""));
    return postJson({
      url: joinUrl(call.baseUrl, stream ? `models/${model}:streamGenerateContent?alt=sse` : `models/${model}:generateContent`),
      headers: { "x-goog-api-key": call.apiKey, ...(stream ? { accept: "text/event-stream" } : {}) },
      body: this.upstreamBody(call),
      signal,
      apiKey: call.apiKey,
      errorMessage: geminiErrorMessage,
      ...upstreamTimeouts(call, stream),
    });
  }

  /**
   * `POST <base>/models/<model>:countTokens` with the request as a `generateContentRequest` (contents, system
   * instruction and tools are counted; the generation settings are left out): Gemini's own count, `totalTokens`.
   */
  async countTokens(call: UpstreamCall): Promise<number> {
    const id = call.model.replace(/^models\//, "");
    const { generationConfig: _settings, ...prompt } = this.upstreamBody(call);
    const response = await postJson({
      url: joinUrl(call.baseUrl, `models/${encodeURIComponent(id)}:countTokens`),
      headers: { "x-goog-api-key": call.apiKey },
      body: { generateContentRequest: { model: `models/${id}`, ...prompt } },
      signal: call.signal,
      apiKey: call.apiKey,
      errorMessage: geminiErrorMessage,
      ...upstreamTimeouts(call, false),
    });
    const answer = await readJsonRedacted(response, call.apiKey) as { totalTokens?: unknown };
    if (typeof answer?.totalTokens !== "number") throw new UpstreamError(0, "upstream returned no totalTokens count", true, answer);
    return answer.totalTokens;
  }

  async complete(call: UpstreamCall): Promise<ChatCompletion> {
    const response = await this.request(call, false, call.signal);
    const value = await readJsonRedacted(response, call.apiKey) as Record<string, unknown>;
    const candidates = value?.candidates as Array<Record<string, unknown>> | undefined;
    if (!Array.isArray(candidates)) {
      const blocked = (value?.promptFeedback as { blockReason?: unknown } | undefined)?.blockReason;
      if (blocked) {
        return this.completion(call, value, [{ index: 0, message: { role: "assistant", content: null }, finish_reason: "content_filter", native_finish_reason: String(blocked) }]);
      }
      throw new UpstreamError(0, "upstream returned no candidates", true, value);
    }
    let counter = 0;
    const choices = candidates.map((candidate, i) => {
      const t = translateCandidate(candidate);
      const toolCalls: ToolCall[] = t.toolCalls.map((tc) => ({ id: tc.id ?? `call_${counter++}`, type: "function", function: { name: tc.name, arguments: JSON.stringify(tc.args) } }));
      const annotations = geminiGrounding(candidate.groundingMetadata, t.partTexts, t.partStarts);
      const details = signatureDetails(t, toolCalls.map((tc) => tc.id), 0);
      return {
        index: typeof candidate.index === "number" ? candidate.index : i,
        message: {
          role: "assistant" as const,
          content: t.text === "" && toolCalls.length > 0 ? null : t.text,
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
          ...(t.reasoning ? { reasoning: t.reasoning } : {}),
          ...(annotations.length > 0 ? { annotations } : {}),
          ...(details.length > 0 ? { reasoning_details: details } : {}),
        },
        finish_reason: geminiFinish(t.finish, toolCalls.length > 0),
        native_finish_reason: (t.finish as string | undefined) ?? null,
      };
    });
    return this.completion(call, value, choices);
  }

  private completion(call: UpstreamCall, value: Record<string, unknown>, choices: ChatCompletion["choices"]): ChatCompletion {
    return {
      id: String(value.responseId ?? ""),
      object: "chat.completion",
      created: nowSeconds(),
      model: String(value.modelVersion ?? call.model),
      choices,
      usage: mapUsage(value.usageMetadata as Record<string, unknown> | undefined, grounded(((value.candidates as Array<Record<string, unknown>> | undefined) ?? []).map((c) => c?.groundingMetadata))),
    };
  }

  /**
   * The answer's chunks, one per SSE event: the SSE reader (`sseMap`) turns each event into its chunk, and
   * `batchedStream` hands them out, those already parsed at hand (`[PULL]()`, ../../../lib/pull.ts), as the
   * Anthropic adapter does: no async-generator resumption and its promises per chunk. A body that ends without
   * a finish reason is a truncated stream; an error event fails the stream after the chunks before it.
   */
  stream(call: UpstreamCall): AsyncIterableIterator<ChatChunk> {
    const created = nowSeconds();
    let first = true;
    /** Per candidate index: tool calls seen so far. */
    const toolCounts = new Map<number, number>();
    let callCounter = 0;
    let signatureCount = 0;
    let anyFinished = false;
    /** Per candidate index: its answer text so far and its latest grounding (Google Search citations). */
    const texts = new Map<number, string>();
    const grounding = new Map<number, unknown>();
    const onEvent = (event: EventSourceMessage): ChatChunk[] | undefined => {
      if (event.data.trim() === "") return undefined;
      const value = parseEventData(event.data);
      if (value.error) {
        const safe = redact(value, call.apiKey);
        const err = value.error as { code?: unknown; status?: unknown };
        const status = typeof err.code === "number" && err.code >= 400 ? err.code : (statusCodes[String(err.status)] ?? 500);
        throw new UpstreamError(status, `upstream error: ${geminiErrorMessage(safe) ?? "stream error"}`, true, safe);
      }
      const candidates = (value.candidates as Array<Record<string, unknown>> | undefined) ?? [];
      const blocked = (value.promptFeedback as { blockReason?: unknown } | undefined)?.blockReason;
      const usageMeta = value.usageMetadata as Record<string, unknown> | undefined;
      const choices: ChatChunk["choices"] = [];
      let finished = false;
      candidates.forEach((candidate, i) => {
        const index = typeof candidate.index === "number" ? candidate.index : i;
        const t = translateCandidate(candidate);
        const delta: ChatChunk["choices"][number]["delta"] = {};
        texts.set(index, (texts.get(index) ?? "") + t.text);
        if (candidate.groundingMetadata) grounding.set(index, candidate.groundingMetadata);
        if (first) delta.role = "assistant";
        if (t.text) delta.content = t.text;
        else if (first) delta.content = "";
        if (t.reasoning) delta.reasoning = t.reasoning;
        const ids: string[] = [];
        if (t.toolCalls.length > 0) {
          const before = toolCounts.get(index) ?? 0;
          delta.tool_calls = t.toolCalls.map((tc, k) => {
            const id = tc.id ?? `call_${callCounter++}`;
            ids.push(id);
            return { index: before + k, id, type: "function" as const, function: { name: tc.name, arguments: JSON.stringify(tc.args) } };
          });
          toolCounts.set(index, before + t.toolCalls.length);
        }
        const details = signatureDetails(t, ids, signatureCount);
        if (details.length > 0) {
          delta.reasoning_details = details;
          signatureCount += details.length;
        }
        const finish = geminiFinish(t.finish, (toolCounts.get(index) ?? 0) > 0);
        if (finish) {
          finished = true;
          // The grounding's offsets count bytes of the whole answer (its parts arrive one a chunk): on the finish chunk.
          const annotations = geminiGrounding(grounding.get(index), [texts.get(index) ?? ""], [0]);
          if (annotations.length > 0) delta.annotations = annotations;
        }
        choices.push({ index, delta, finish_reason: finish, ...(finish ? { native_finish_reason: String(t.finish) } : {}) });
      });
      if (blocked && choices.length === 0) {
        finished = true;
        choices.push({ index: 0, delta: first ? { role: "assistant", content: "" } : {}, finish_reason: "content_filter", native_finish_reason: String(blocked) });
      }
      first = false;
      if (finished) anyFinished = true;
      return [
        {
          id: String(value.responseId ?? ""),
          object: "chat.completion.chunk",
          created,
          model: String(value.modelVersion ?? call.model),
          choices,
          ...(finished && usageMeta ? { usage: mapUsage(usageMeta, grounded(grounding.values())) } : {}),
        },
      ];
    };
    // One response: the first read opens it, there is no second. Gemini has no end-of-response event: the body's
    // end is the stream's, and a stream none of whose candidates finished is a truncated one.
    let opened = false;
    const open = async () => {
      if (opened) return undefined;
      opened = true;
      const controller = linkedController(call.signal);
      const response = await this.request(call, true, controller.signal);
      return sseMap(response, controller, onEvent, undefined, call.apiKey, () => {
        if (!anyFinished) throw truncatedStream();
      });
    };
    return batchedStream(open);
  }
}
