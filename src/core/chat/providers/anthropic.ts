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
import { contentText, joinUrl, linkedController, nowSeconds, parseArguments, parseEventData, postJson, readJson, redact, sseEvents, truncatedStream, upstreamTimeouts, type UpstreamResponse } from "./http.js";
import { toTurns, type PartWriter } from "./messages.js";
import { anthropicCitation, anthropicWebSearchTool, type UrlAnnotation } from "./native-search.js";

export const ANTHROPIC_VERSION = "2023-06-01";
/** Messages requires `max_tokens`; used when the request sets neither max_tokens nor max_completion_tokens. */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 4096;

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
  toolCall: (tc) => cached({ type: "tool_use", id: tc.id, name: tc.function?.name, input: parseArguments(tc.function?.arguments) }, tc as unknown as Record<string, unknown>),
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
function thinkingBudget(reasoning: unknown, maxTokens: number): number | undefined {
  if (!reasoning || typeof reasoning !== "object") return undefined;
  const r = reasoning as { max_tokens?: unknown; effort?: unknown };
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
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, prompt_tokens_details: { cached_tokens: cached, cache_write_tokens: written } };
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
      max_tokens: (b.max_tokens as number | undefined) ?? (b.max_completion_tokens as number | undefined) ?? ANTHROPIC_DEFAULT_MAX_TOKENS,
    };
    if (system !== undefined) out.system = systemParts.some((p) => p.cache_control) ? systemParts : system;
    if (b.stop !== undefined && b.stop !== null) out.stop_sequences = Array.isArray(b.stop) ? b.stop : [b.stop];
    for (const key of ["temperature", "top_p", "top_k"] as const) if (typeof b[key] === "number") out[key] = b[key];
    if (Array.isArray(b.tools) && b.tools.length > 0 && b.tool_choice !== "none") {
      out.tools = (b.tools as Array<{ function?: { name?: unknown; description?: unknown; parameters?: unknown }; cache_control?: unknown }>).map((t) => ({
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

  private request(call: UpstreamCall, stream: boolean, signal: AbortSignal): Promise<UpstreamResponse> {
    const headers: Record<string, string> = {
      "x-api-key": call.apiKey,
      "anthropic-version": call.options?.anthropic_version ?? ANTHROPIC_VERSION,
    };
    if (call.options?.anthropic_beta) headers["anthropic-beta"] = call.options.anthropic_beta;
    if (stream) headers.accept = "text/event-stream";
    return postJson({
      url: joinUrl(call.baseUrl, "v1/messages"),
      headers,
      body: this.upstreamBody({ ...call, body: { ...call.body, stream } }),
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
    const answer = redact(await readJson(response), call.apiKey) as { input_tokens?: unknown };
    if (typeof answer?.input_tokens !== "number") throw new UpstreamError(0, "upstream returned no input_tokens count", true, answer);
    return answer.input_tokens;
  }

  async complete(call: UpstreamCall): Promise<ChatCompletion> {
    const response = await this.request(call, false, call.signal);
    const msg = redact(await readJson(response), call.apiKey) as Record<string, unknown>;
    if (!Array.isArray(msg?.content)) {
      throw new UpstreamError(0, `upstream returned no message content${anthropicErrorMessage(msg) ? `: ${anthropicErrorMessage(msg)}` : ""}`, true, msg);
    }
    let text = "";
    let reasoning = "";
    const details: ReasoningDetail[] = [];
    const toolCalls: ToolCall[] = [];
    const annotations: UrlAnnotation[] = [];
    for (const block of msg.content as Block[]) {
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
      id: String(msg.id ?? ""),
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
      usage: mapUsage(msg.usage as Record<string, unknown> | undefined),
    };
  }

  async *stream(call: UpstreamCall): AsyncGenerator<ChatChunk> {
    const controller = linkedController(call.signal);
    const response = await this.request(call, true, controller.signal);
    let id = "";
    let model = call.model;
    const created = nowSeconds();
    let startUsage: Record<string, unknown> | undefined;
    /** Content block index → tool call index. */
    const toolIndex = new Map<number, number>();
    /** Content block index → reasoning detail index (thinking and redacted thinking blocks). */
    const reasoningIndex = new Map<number, number>();
    /** Text emitted so far (UTF-16 length), and per open text block its start and its web search citations. */
    let emitted = 0;
    const textBlocks = new Map<number, { start: number; citations: unknown[] }>();
    const annotations: UrlAnnotation[] = [];
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
    for await (const event of sseEvents(response, controller, (e) => e.event === "message_stop", call.apiKey)) {
      if (event.data === "") continue;
      const data = parseEventData(event.data);
      const type = (event.event ?? data.type) as string;
      switch (type) {
        case "message_start": {
          const message = data.message as Record<string, unknown>;
          id = String(message?.id ?? "");
          model = String(message?.model ?? call.model);
          startUsage = message?.usage as Record<string, unknown> | undefined;
          const first: ChatChunk & { start_usage?: ChatUsage } = chunk({ role: "assistant", content: "" });
          const known = mapUsage(startUsage, 0);
          if (known) first.start_usage = known;
          yield first;
          break;
        }
        case "content_block_start": {
          const block = data.content_block as Block;
          const index = Number(data.index);
          if (block?.type === "tool_use") {
            const at = toolIndex.size;
            toolIndex.set(index, at);
            yield chunk({ tool_calls: [{ index: at, id: String(block.id), type: "function", function: { name: String(block.name), arguments: "" } }] });
          } else if (block?.type === "text") {
            textBlocks.set(index, { start: emitted, citations: Array.isArray(block.citations) ? [...(block.citations as unknown[])] : [] });
            if (block.text) {
              emitted += String(block.text).length;
              yield chunk({ content: String(block.text) });
            }
          } else if (block?.type === "thinking") {
            reasoningIndex.set(index, reasoningIndex.size);
            yield chunk({ reasoning: String(block.thinking ?? ""), reasoning_details: [detail(index, { text: String(block.thinking ?? "") })] });
          } else if (block?.type === "redacted_thinking") {
            const at = reasoningIndex.size;
            reasoningIndex.set(index, at);
            yield chunk({ reasoning_details: [{ type: "reasoning.encrypted", data: String(block.data ?? ""), format: ANTHROPIC_REASONING_FORMAT, index: at }] });
          }
          break;
        }
        case "content_block_delta": {
          const delta = data.delta as Block;
          if (delta?.type === "text_delta") {
            emitted += String(delta.text ?? "").length;
            yield chunk({ content: String(delta.text ?? "") });
          } else if (delta?.type === "citations_delta") textBlocks.get(Number(data.index))?.citations.push(delta.citation);
          else if (delta?.type === "thinking_delta") {
            const thinking = String(delta.thinking ?? "");
            yield chunk({ reasoning: thinking, reasoning_details: [detail(Number(data.index), { text: thinking })] });
          } else if (delta?.type === "signature_delta") yield chunk({ reasoning_details: [detail(Number(data.index), { signature: String(delta.signature ?? "") })] });
          else if (delta?.type === "input_json_delta") {
            const at = toolIndex.get(Number(data.index));
            if (at !== undefined) yield chunk({ tool_calls: [{ index: at, function: { arguments: String(delta.partial_json ?? "") } }] });
          }
          break;
        }
        case "content_block_stop": {
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
          const output = typeof usage?.output_tokens === "number" ? usage.output_tokens : undefined;
          // A native web search's citations, all on the finish chunk (as the web plugin returns its own).
          yield chunk(annotations.length > 0 ? { annotations: annotations.splice(0) } : {}, anthropicFinish(delta?.stop_reason), delta?.stop_reason ?? null, mapUsage({ ...startUsage, ...usage }, output));
          break;
        }
        case "message_stop":
          return;
        case "error": {
          const safe = redact(data, call.apiKey);
          const errType = String((data.error as { type?: unknown } | undefined)?.type ?? "api_error");
          const status = errorStatus[errType] ?? 500;
          throw new UpstreamError(status, `upstream error: ${anthropicErrorMessage(safe) ?? errType}`, true, safe);
        }
        default:
          break; // ping, content_block_stop and event types added later
      }
    }
    throw truncatedStream();
  }
}
