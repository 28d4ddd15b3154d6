/**
 * Anthropic Messages (`POST <base>/v1/messages`, headers `x-api-key` and `anthropic-version`).
 * Translates the OpenAI chat body to a Messages request and Messages responses and stream events back
 * to `chat.completion` / `chat.completion.chunk`. `options.anthropic_version` and
 * `options.anthropic_beta` override the version header and add a beta header.
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
import { contentText, joinUrl, linkedController, nowSeconds, parseArguments, parseEventData, postJson, readJsonRedacted, redact, batchedStream, sseMap, SSE_END, truncatedStream, upstreamTimeouts, type UpstreamResponse } from "./http.js";
import type { EventSourceMessage } from "eventsource-parser";
import type { ChatFunctionTool, ChatReasoning } from "../../../contract/requests/chat-request.js";
import { toTurns, type PartWriter } from "./messages.js";
import { anthropicCitation, anthropicWebSearchTool, type UrlAnnotation } from "./native-search.js";

export const ANTHROPIC_VERSION = "2023-06-01";
/** Messages requires `max_tokens`; used when the request sets neither max_tokens nor max_completion_tokens. */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 4096;
/**
 * How many times one attempt continues a turn Anthropic paused (`stop_reason: "pause_turn"`, its server tools'
 * loop reached its own iteration limit) before it answers with what there is (docs/plugins.md, "Native search").
 */
export const ANTHROPIC_MAX_PAUSE_CONTINUATIONS = 4;

type Block = Record<string, unknown>;

export function anthropicFinish(reason: unknown): FinishReason {
  switch (reason) {
    case "end_turn":
    case "stop_sequence":
    case "pause_turn":
      return "stop";
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length";
    case "tool_use":
      return "tool_calls";
    case "refusal":
      return "content_filter";
    case null:
    case undefined:
      return null;
    default:
      return "stop";
  }
}

/** `{type: "error", error: {type, message}}`. */
export function anthropicErrorMessage(body: unknown): string | undefined {
  const error = (body as { error?: { type?: unknown; message?: unknown } } | undefined)?.error;
  if (!error || typeof error !== "object") return undefined;
  return typeof error.message === "string" ? (typeof error.type === "string" ? `${error.type}: ${error.message}` : error.message) : undefined;
}

/** HTTP status Anthropic uses for each error type (for errors that arrive inside a stream). */
const errorStatus: Record<string, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};

/** Keeps a part's `cache_control` (prompt caching breakpoints) on the block written for it. */
const cached = (block: Block, part: Record<string, unknown> | undefined): Block => (part?.cache_control ? { ...block, cache_control: part.cache_control } : block);

const writer: PartWriter<Block> = {
  text: (text, part) => cached({ type: "text", text }, part),
  image: (url, inline, part) =>
    cached(inline ? { type: "image", source: { type: "base64", media_type: inline.mediaType, data: inline.data } } : { type: "image", source: { type: "url", url } }, part),
  // A tool call or a tool message may carry `cache_control` too (the Messages dialect's breakpoints on
  // tool_use and tool_result blocks).
  toolCall: (tc) => cached({ type: "tool_use", id: tc.id, name: tc.function?.name, input: parseArguments(tc.function?.arguments) }, tc),
  toolResult: (m) => cached({ type: "tool_result", tool_use_id: m.tool_call_id, content: contentText(m.content), ...(m.is_error === true ? { is_error: true } : {}) }, m),
  // Thinking goes back with its signature (Anthropic refuses it without one, so unsigned reasoning from
  // another provider is not replayed), redacted thinking with its data; both before the turn's other blocks.
  reasoning: (m) => {
    const out: Block[] = [];
    for (const d of (Array.isArray(m.reasoning_details) ? m.reasoning_details : []) as ReasoningDetail[]) {
      if (d?.type === "reasoning.text" && typeof d.signature === "string" && d.signature !== "") out.push({ type: "thinking", thinking: d.text ?? "", signature: d.signature });
      else if (d?.type === "reasoning.encrypted" && typeof d.data === "string" && d.format !== GEMINI_REASONING_FORMAT) out.push({ type: "redacted_thinking", data: d.data });
    }
    return out;
  },
};

/** The `format` of the reasoning details this adapter produces. */
export const ANTHROPIC_REASONING_FORMAT = "anthropic-claude-v1";

function toolChoice(choice: unknown, parallel: unknown): Block | undefined {
  let out: Block | undefined;
  if (choice === "auto") out = { type: "auto" };
  else if (choice === "none") out = { type: "none" };
  else if (choice === "required") out = { type: "any" };
  else if (choice && typeof choice === "object") {
    const name = (choice as { function?: { name?: unknown } }).function?.name;
    if (typeof name === "string") out = { type: "tool", name };
  }
  if (parallel === false) out = { ...(out ?? { type: "auto" }), disable_parallel_tool_use: true };
  return out;
}

/** Share of `max_tokens` given to thinking per reasoning effort. */
const effortShare: Record<string, number> = { max: 0.95, xhigh: 0.9, high: 0.8, medium: 0.5, low: 0.2, minimal: 0.1 };
/** Anthropic's smallest accepted thinking budget. */
const MIN_THINKING_BUDGET = 1024;

/**
 * Extended thinking budget from `reasoning` (`max_tokens`, or `effort` as a share of `max_tokens`), at
 * least 1024 and below `max_tokens`; undefined (no thinking) when that cannot hold or effort is `none`.
 */
function thinkingBudget(reasoning: ChatReasoning | undefined, maxTokens: number): number | undefined {
  if (!reasoning || typeof reasoning !== "object") return undefined;
  const r = reasoning;
  const wanted = typeof r.max_tokens === "number" ? r.max_tokens : typeof r.effort === "string" && effortShare[r.effort] ? Math.floor(maxTokens * effortShare[r.effort]!) : undefined;
  if (wanted === undefined) return undefined;
  const budget = Math.max(MIN_THINKING_BUDGET, Math.min(wanted, maxTokens - 1));
  return budget < maxTokens ? budget : undefined;
}

function mapUsage(u: Record<string, unknown> | undefined, outputTokens?: number): ChatUsage | undefined {
  if (!u && outputTokens === undefined) return undefined;
  const n = (v: unknown) => (typeof v === "number" ? v : 0);
  // Anthropic counts cache reads and cache writes apart from `input_tokens`; the canonical prompt_tokens holds
  // all three, with the read and written ones named in prompt_tokens_details (each billed once, at its own price).
  const cached = n(u?.cache_read_input_tokens);
  const written = n(u?.cache_creation_input_tokens);
  const prompt = n(u?.input_tokens) + cached + written;
  const completion = outputTokens ?? n(u?.output_tokens);
  // The searches Anthropic's web search server tool ran (priced per search: the catalog's `web_search`).
  const searches = n((u?.server_tool_use as Record<string, unknown> | undefined)?.web_search_requests);
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cached, cache_write_tokens: written },
    ...(searches > 0 ? { server_tool_use: { web_search_requests: searches } } : {}),
  };
}

/**
 * Two of Anthropic's raw `usage` objects added up (the messages of a paused turn and its continuations: each is
 * billed, each reports its own counts): every number, and `server_tool_use`'s counts.
 */
function addRawUsage(a: Record<string, unknown> | undefined, b: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!a) return b;
  if (!b) return a;
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    if (typeof v === "number") out[k] = (typeof out[k] === "number" ? (out[k] as number) : 0) + v;
    else if (k === "server_tool_use" && v && typeof v === "object") out[k] = addRawUsage(out[k] as Record<string, unknown> | undefined, v as Record<string, unknown>);
    else if (!(k in out)) out[k] = v;
  }
  return out;
}

/**
 * The body of a continuation of a paused turn: the paused assistant content appended as the last assistant turn,
 * unchanged (server_tool_use and web_search_tool_result blocks included), as Anthropic's docs say to continue a
 * `pause_turn` ("pass the paused response back as-is"); it joins a trailing assistant turn (a prefill) rather
 * than following it.
 */
function withPausedTurn(body: Record<string, unknown>, paused: readonly Block[]): Record<string, unknown> {
  if (paused.length === 0) return body;
  const messages = [...(body.messages as Array<{ role: string; content: unknown }>)];
  const last = messages.at(-1);
  if (last?.role === "assistant") {
    const before = typeof last.content === "string" ? [{ type: "text", text: last.content }] : Array.isArray(last.content) ? (last.content as Block[]) : [];
    messages[messages.length - 1] = { role: "assistant", content: [...before, ...paused] };
  } else messages.push({ role: "assistant", content: [...paused] });
  return { ...body, messages };
}

/** Builds the content blocks of a streamed message from its events (what a continuation sends back). */
class StreamedBlocks {
  readonly blocks: Block[] = [];
  private readonly open = new Map<number, { block: Block; json: string }>();

  start(index: number, block: Block): void {
    const copy: Block = { ...block };
    if (Array.isArray(block.citations)) copy.citations = [...(block.citations as unknown[])];
    this.open.set(index, { block: copy, json: "" });
    this.blocks.push(copy);
  }

  delta(index: number, delta: Block): void {
    const entry = this.open.get(index);
    if (!entry) return;
    const b = entry.block;
    if (delta.type === "text_delta") b.text = String(b.text ?? "") + String(delta.text ?? "");
    else if (delta.type === "thinking_delta") b.thinking = String(b.thinking ?? "") + String(delta.thinking ?? "");
    else if (delta.type === "signature_delta") b.signature = String(delta.signature ?? "");
    else if (delta.type === "citations_delta") b.citations = [...(Array.isArray(b.citations) ? (b.citations as unknown[]) : []), delta.citation];
    else if (delta.type === "input_json_delta") entry.json += String(delta.partial_json ?? "");
  }

  stop(index: number): void {
    const entry = this.open.get(index);
    if (!entry) return;
    if (entry.json !== "") entry.block.input = parseArguments(entry.json);
    this.open.delete(index);
  }
}

export class AnthropicAdapter implements ProviderAdapter {
  readonly format = "anthropic" as const;

  upstreamBody(call: UpstreamCall): Record<string, unknown> {
    const b = call.body;
    const { system, systemParts, turns } = toTurns(b.messages, writer);
    const messages = turns.map((t) => ({ role: t.role, content: t.parts }));
    const out: Record<string, unknown> = {
      model: call.model,
      messages,
      max_tokens: b.max_tokens ?? b.max_completion_tokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS,
    };
    if (system !== undefined) out.system = systemParts.some((p) => p.cache_control) ? systemParts : system;
    if (b.stop !== undefined && b.stop !== null) out.stop_sequences = Array.isArray(b.stop) ? b.stop : [b.stop];
    for (const key of ["temperature", "top_p", "top_k"] as const) if (typeof b[key] === "number") out[key] = b[key];
    if (Array.isArray(b.tools) && b.tools.length > 0 && b.tool_choice !== "none") {
      out.tools = (b.tools as ChatFunctionTool[]).map((t) => ({
        name: t.function?.name,
        ...(t.function?.description !== undefined ? { description: t.function.description } : {}),
        input_schema: t.function?.parameters ?? { type: "object", properties: {} },
        ...(t.cache_control ? { cache_control: t.cache_control } : {}),
      }));
      const choice = toolChoice(b.tool_choice, b.parallel_tool_calls);
      if (choice) out.tool_choice = choice;
    }
    // The web plugin's native search (native-search.ts): Anthropic's own server tool, beside the function tools.
    if (call.webSearch) out.tools = [...(Array.isArray(out.tools) ? (out.tools as Block[]) : []), anthropicWebSearchTool(call.webSearch)];
    const budget = thinkingBudget(b.reasoning ?? (b.reasoning_effort ? { effort: b.reasoning_effort } : undefined), out.max_tokens as number);
    if (budget !== undefined) out.thinking = { type: "enabled", budget_tokens: budget };
    if (typeof b.user === "string") out.metadata = { user_id: b.user };
    if (b.cache_control && typeof b.cache_control === "object") out.cache_control = b.cache_control;
    if (b.stream) out.stream = true;
    return out;
  }

  private request(call: UpstreamCall, stream: boolean, signal: AbortSignal, paused: readonly Block[] = []): Promise<UpstreamResponse> {
    const headers: Record<string, string> = {
      "x-api-key": call.apiKey,
      "anthropic-version": call.options?.anthropic_version ?? ANTHROPIC_VERSION,
    };
    if (call.options?.anthropic_beta) headers["anthropic-beta"] = call.options.anthropic_beta;
    if (stream) headers.accept = "text/event-stream";
    return postJson({
      url: joinUrl(call.baseUrl, "v1/messages"),
      headers,
      body: withPausedTurn(this.upstreamBody({ ...call, body: { ...call.body, stream } }), paused),
      signal,
      apiKey: call.apiKey,
      errorMessage: anthropicErrorMessage,
      ...upstreamTimeouts(call, stream),
    });
  }

  /** `POST <base>/v1/messages/count_tokens` with the request's Messages body (no `max_tokens`, no `stream`). */
  async countTokens(call: UpstreamCall): Promise<number> {
    const { max_tokens: _max, stream: _stream, metadata: _metadata, ...body } = this.upstreamBody({ ...call, body: { ...call.body, stream: false } });
    const headers: Record<string, string> = { "x-api-key": call.apiKey, "anthropic-version": call.options?.anthropic_version ?? ANTHROPIC_VERSION };
    if (call.options?.anthropic_beta) headers["anthropic-beta"] = call.options.anthropic_beta;
    const response = await postJson({
      url: joinUrl(call.baseUrl, "v1/messages/count_tokens"),
      headers,
      body,
      signal: call.signal,
      apiKey: call.apiKey,
      errorMessage: anthropicErrorMessage,
      ...upstreamTimeouts(call, false),
    });
    const answer = await readJsonRedacted(response, call.apiKey) as { input_tokens?: unknown };
    if (typeof answer?.input_tokens !== "number") throw new UpstreamError(0, "upstream returned no input_tokens count", true, answer);
    return answer.input_tokens;
  }

  async complete(call: UpstreamCall): Promise<ChatCompletion> {
    // A paused turn (`pause_turn`: the server tools' loop hit its limit) is continued by sending its content back
    // as the last assistant turn, up to ANTHROPIC_MAX_PAUSE_CONTINUATIONS times; the answer is all the messages'
    // content in order, their usage summed, the last one's stop reason.
    const paused: Block[] = [];
    let msg: Record<string, unknown>;
    let firstId: unknown;
    let rawUsage: Record<string, unknown> | undefined;
    for (let continuations = 0; ; continuations++) {
      const response = await this.request(call, false, call.signal, paused);
      msg = await readJsonRedacted(response, call.apiKey) as Record<string, unknown>;
      if (!Array.isArray(msg?.content)) {
        throw new UpstreamError(0, `upstream returned no message content${anthropicErrorMessage(msg) ? `: ${anthropicErrorMessage(msg)}` : ""}`, true, msg);
      }
      firstId ??= msg.id;
      rawUsage = addRawUsage(rawUsage, msg.usage as Record<string, unknown> | undefined);
      paused.push(...(msg.content as Block[]));
      if (msg.stop_reason !== "pause_turn" || continuations >= ANTHROPIC_MAX_PAUSE_CONTINUATIONS) break;
    }
    let text = "";
    let reasoning = "";
    const details: ReasoningDetail[] = [];
    const toolCalls: ToolCall[] = [];
    const annotations: UrlAnnotation[] = [];
    for (const block of paused) {
      if (block.type === "text") {
        const start = text.length;
        text += String(block.text ?? "");
        // A native web search's citations of this block (server_tool_use and web_search_tool_result blocks are not text).
        if (Array.isArray(block.citations)) for (const c of block.citations) {
          const a = anthropicCitation(c, start, text.length);
          if (a) annotations.push(a);
        }
      }
      else if (block.type === "thinking") {
        reasoning += String(block.thinking ?? "");
        details.push({ type: "reasoning.text", text: String(block.thinking ?? ""), signature: typeof block.signature === "string" ? block.signature : null, format: ANTHROPIC_REASONING_FORMAT, index: details.length });
      } else if (block.type === "redacted_thinking") {
        details.push({ type: "reasoning.encrypted", data: String(block.data ?? ""), format: ANTHROPIC_REASONING_FORMAT, index: details.length });
      } else if (block.type === "tool_use") {
        toolCalls.push({ id: String(block.id), type: "function", function: { name: String(block.name), arguments: JSON.stringify(block.input ?? {}) } });
      }
    }
    return {
      id: String(firstId ?? ""),
      object: "chat.completion",
      created: nowSeconds(),
      model: String(msg.model ?? call.model),
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: text === "" && toolCalls.length > 0 ? null : text,
            ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
            ...(reasoning ? { reasoning } : {}),
            ...(details.length > 0 ? { reasoning_details: details } : {}),
            ...(annotations.length > 0 ? { annotations } : {}),
          },
          finish_reason: anthropicFinish(msg.stop_reason),
          native_finish_reason: (msg.stop_reason as string | null | undefined) ?? null,
        },
      ],
      usage: mapUsage(rawUsage),
    };
  }

  /**
   * The answer's chunks: one message of Anthropic's, then one more per continuation of a paused turn (`pause_turn`), up
   * to ANTHROPIC_MAX_PAUSE_CONTINUATIONS: the caller's stream carries on across them (one role chunk, one finish
   * chunk). Each message's SSE reader (`sseMap`) turns each event into its chunks, and `batchedStream` hands them out
   * one by one, those already parsed at hand (`[PULL]()`, ../../../lib/pull.ts), as the OpenAI-compatible adapter's
   * reader does: no async-generator resumption and its promises per chunk.
   */
  stream(call: UpstreamCall): AsyncIterableIterator<ChatChunk> {
    let controller: AbortController | undefined;
    let id = "";
    let model = call.model;
    const created = nowSeconds();
    /** The raw usage of the messages of a paused turn already ended (its continuations add theirs). */
    let doneUsage: Record<string, unknown> | undefined;
    /** Content block index (of the current message) → tool call index (of the answer). */
    const toolIndex = new Map<number, number>();
    let tools = 0;
    /** Content block index (of the current message) → reasoning detail index (thinking and redacted thinking blocks). */
    const reasoningIndex = new Map<number, number>();
    let details = 0;
    /** Text emitted so far (UTF-16 length), and per open text block its start and its web search citations. */
    let emitted = 0;
    const textBlocks = new Map<number, { start: number; citations: unknown[] }>();
    const annotations: UrlAnnotation[] = [];
    /** The content of the paused messages so far, sent back to continue the turn. */
    const paused: Block[] = [];
    const detail = (blockIndex: number, piece: { text?: string; signature?: string }): ReasoningDetail => ({
      type: "reasoning.text",
      ...piece,
      format: ANTHROPIC_REASONING_FORMAT,
      index: reasoningIndex.get(blockIndex) ?? 0,
    });
    const chunk = (delta: ChatChunk["choices"][number]["delta"], finish: FinishReason = null, native?: string | null, usage?: ChatUsage): ChatChunk => ({
      id,
      object: "chat.completion.chunk",
      created,
      model,
      choices: [{ index: 0, delta, finish_reason: finish, ...(native !== undefined ? { native_finish_reason: native } : {}) }],
      ...(usage ? { usage } : {}),
    });
    /** Messages opened so far (the first, then its continuations), and the current one's state. */
    let continuations = -1;
    let blocks = new StreamedBlocks();
    let startUsage: Record<string, unknown> | undefined;
    let pausedHere = false;
    /** The chunks of the event being read. */
    let out: ChatChunk[] | undefined;
    const emit = (c: ChatChunk) => {
      if (out === undefined) out = [c];
      else out.push(c);
    };
    const onEvent = (event: EventSourceMessage): ChatChunk[] | undefined | typeof SSE_END => {
      if (event.data === "") return undefined;
      const data = parseEventData(event.data);
      const type = (event.event ?? data.type) as string;
      out = undefined;
      switch (type) {
        case "message_start": {
          const message = data.message as Record<string, unknown>;
          startUsage = message?.usage as Record<string, unknown> | undefined;
          if (continuations > 0) break; // a continuation: the caller's stream has begun already
          id = String(message?.id ?? "");
          model = String(message?.model ?? call.model);
          const first: ChatChunk & { start_usage?: ChatUsage } = chunk({ role: "assistant", content: "" });
          const known = mapUsage(startUsage, 0);
          if (known) first.start_usage = known;
          emit(first);
          break;
        }
        case "content_block_start": {
          const block = data.content_block as Block;
          const index = Number(data.index);
          if (block && typeof block === "object") blocks.start(index, block);
          if (block?.type === "tool_use") {
            const at = tools++;
            toolIndex.set(index, at);
            emit(chunk({ tool_calls: [{ index: at, id: String(block.id), type: "function", function: { name: String(block.name), arguments: "" } }] }));
          } else if (block?.type === "text") {
            textBlocks.set(index, { start: emitted, citations: Array.isArray(block.citations) ? [...(block.citations as unknown[])] : [] });
            if (block.text) {
              emitted += String(block.text).length;
              emit(chunk({ content: String(block.text) }));
            }
          } else if (block?.type === "thinking") {
            reasoningIndex.set(index, details++);
            emit(chunk({ reasoning: String(block.thinking ?? ""), reasoning_details: [detail(index, { text: String(block.thinking ?? "") })] }));
          } else if (block?.type === "redacted_thinking") {
            const at = details++;
            reasoningIndex.set(index, at);
            emit(chunk({ reasoning_details: [{ type: "reasoning.encrypted", data: String(block.data ?? ""), format: ANTHROPIC_REASONING_FORMAT, index: at }] }));
          }
          break;
        }
        case "content_block_delta": {
          const delta = data.delta as Block;
          if (delta && typeof delta === "object") blocks.delta(Number(data.index), delta);
          if (delta?.type === "text_delta") {
            emitted += String(delta.text ?? "").length;
            emit(chunk({ content: String(delta.text ?? "") }));
          } else if (delta?.type === "citations_delta") textBlocks.get(Number(data.index))?.citations.push(delta.citation);
          else if (delta?.type === "thinking_delta") {
            const thinking = String(delta.thinking ?? "");
            emit(chunk({ reasoning: thinking, reasoning_details: [detail(Number(data.index), { text: thinking })] }));
          } else if (delta?.type === "signature_delta") emit(chunk({ reasoning_details: [detail(Number(data.index), { signature: String(delta.signature ?? "") })] }));
          else if (delta?.type === "input_json_delta") {
            const at = toolIndex.get(Number(data.index));
            if (at !== undefined) emit(chunk({ tool_calls: [{ index: at, function: { arguments: String(delta.partial_json ?? "") } }] }));
          }
          break;
        }
        case "content_block_stop": {
          blocks.stop(Number(data.index));
          const block = textBlocks.get(Number(data.index));
          if (block) {
            for (const c of block.citations) {
              const a = anthropicCitation(c, block.start, emitted);
              if (a) annotations.push(a);
            }
            textBlocks.delete(Number(data.index));
          }
          break;
        }
        case "message_delta": {
          const delta = data.delta as { stop_reason?: string | null } | undefined;
          const usage = data.usage as Record<string, unknown> | undefined;
          // message_delta's usage is the message's so far (its output tokens counted to here), over message_start's.
          const message = { ...startUsage, ...usage };
          if (delta?.stop_reason === "pause_turn" && continuations < ANTHROPIC_MAX_PAUSE_CONTINUATIONS) {
            pausedHere = true;
            doneUsage = addRawUsage(doneUsage, message);
            break;
          }
          const total = addRawUsage(doneUsage, message);
          const output = typeof total?.output_tokens === "number" ? total.output_tokens : undefined;
          // A native web search's citations, all on the finish chunk (as the web plugin returns its own).
          emit(chunk(annotations.length > 0 ? { annotations: annotations.splice(0) } : {}, anthropicFinish(delta?.stop_reason), delta?.stop_reason ?? null, mapUsage(total, output)));
          break;
        }
        case "message_stop":
          return SSE_END;
        case "error": {
          const safe = redact(data, call.apiKey);
          const errType = String((data.error as { type?: unknown } | undefined)?.type ?? "api_error");
          const status = errorStatus[errType] ?? 500;
          throw new UpstreamError(status, `upstream error: ${anthropicErrorMessage(safe) ?? errType}`, true, safe);
        }
        default:
          break; // ping and event types added later
      }
      return out;
    };
    // The next message's reader: the first, or a paused turn's continuation; none after a message that ended the turn.
    const open = async () => {
      if (continuations >= 0) {
        if (!pausedHere) return undefined;
        paused.push(...blocks.blocks);
      }
      continuations++;
      controller ??= linkedController(call.signal);
      const response = await this.request(call, true, controller.signal, paused);
      blocks = new StreamedBlocks();
      startUsage = undefined;
      pausedHere = false;
      toolIndex.clear();
      reasoningIndex.clear();
      textBlocks.clear();
      // A body that ends before message_stop is a truncated stream.
      return sseMap(response, controller, onEvent, (e) => e.event === "message_stop", call.apiKey, () => {
        throw truncatedStream();
      });
    };
    return batchedStream(open);
  }
}
