/**
 * The Anthropic Messages dialect at the core's edge (`POST /api/v1/messages`, docs/dialects.md): a Messages
 * body decoded into the canonical request (model.ts, OpenAI chat-completions names), and the canonical answer
 * encoded into a Messages `message` or into the exact event sequence Anthropic streams:
 *
 *   message_start (with usage) · ping · per block: content_block_start · content_block_delta* · content_block_stop
 *   · message_delta (stop_reason, usage) · message_stop        — or, after the first byte, `error` and nothing more
 *
 * Blocks are numbered from 0 in the order they open; a block closes before the next opens (thinking, then text,
 * then each tool call in its own block, its arguments as `input_json_delta` pieces as they arrive). Thinking
 * keeps its signature both ways through `reasoning_details` (see model.ts), so a thinking block sent back on the
 * next turn reaches an Anthropic upstream signed.
 */
import type { CanonicalRequest, CanonicalResponse, ReasoningDetail, StreamEvent, ToolCall, Usage } from "../model.js";
import type { MessagesRequest, CountTokensRequest } from "../../../contract/requests/messages-request.js";
import { withoutGeminiSignatures } from "../providers/types.js";

type Json = Record<string, unknown>;

/** The `format` Portico gives reasoning details decoded from this dialect (Anthropic's own). */
const FORMAT = "anthropic-claude-v1";

/** Routing fields shared with chat completions, passed on under the same names. */
const SHARED_FIELDS = ["models", "provider", "plugins", "session_id", "trace", "user", "service_tier", "stop_server_tools_when"] as const;

function textPart(block: { text: string; cache_control?: unknown }): Json {
  return block.cache_control ? { type: "text", text: block.text, cache_control: block.cache_control } : { type: "text", text: block.text };
}

/** A validated Messages (or count_tokens) body as the canonical request. */
export function decodeRequest(body: MessagesRequest | CountTokensRequest): CanonicalRequest {
  const messages: Json[] = [];
  if (body.system !== undefined) {
    messages.push({ role: "system", content: typeof body.system === "string" ? body.system : body.system.map(textPart) });
  }
  for (const m of body.messages) {
    if (m.role === "user") {
      if (typeof m.content === "string") {
        messages.push({ role: "user", content: m.content });
        continue;
      }
      // Tool results become `tool` messages (in order, before the turn's other parts, as Anthropic requires
      // them first); the rest of the turn is one user message.
      const parts: Json[] = [];
      for (const block of m.content) {
        if (block.type === "tool_result") {
          const content = block.content === undefined ? "" : typeof block.content === "string" ? block.content : block.content.map(textPart);
          messages.push({
            role: "tool",
            tool_call_id: block.tool_use_id,
            content,
            ...(block.is_error === true ? { is_error: true } : {}),
            ...(block.cache_control ? { cache_control: block.cache_control } : {}),
          });
        } else if (block.type === "text") parts.push(textPart(block));
        else {
          const src = block.source;
          const url = src.type === "base64" ? `data:${src.media_type};base64,${src.data}` : src.url;
          parts.push({ type: "image_url", image_url: { url }, ...(block.cache_control ? { cache_control: block.cache_control } : {}) });
        }
      }
      if (parts.length > 0) messages.push({ role: "user", content: parts });
      continue;
    }
    if (typeof m.content === "string") {
      messages.push({ role: "assistant", content: m.content });
      continue;
    }
    const parts: Json[] = [];
    const toolCalls: ToolCall[] = [];
    const details: ReasoningDetail[] = [];
    let reasoning = "";
    for (const block of m.content) {
      if (block.type === "text") parts.push(textPart(block));
      else if (block.type === "tool_use") {
        const call: ToolCall & { cache_control?: unknown } = { id: block.id, type: "function", function: { name: block.name, arguments: JSON.stringify(block.input) } };
        if (block.cache_control) call.cache_control = block.cache_control;
        toolCalls.push(call);
      }
      else if (block.type === "thinking") {
        reasoning += block.thinking;
        details.push({ type: "reasoning.text", text: block.thinking, signature: block.signature, format: FORMAT, index: details.length });
      } else details.push({ type: "reasoning.encrypted", data: block.data, format: FORMAT, index: details.length });
    }
    const out: Json = { role: "assistant", content: parts.length > 0 ? parts : toolCalls.length > 0 ? null : "" };
    if (toolCalls.length > 0) out.tool_calls = toolCalls;
    if (details.length > 0) {
      if (reasoning !== "") out.reasoning = reasoning;
      out.reasoning_details = details;
    }
    messages.push(out);
  }

  // The messages are built as JSON records (each dialect's parts as they map): a narrow cast; the rest is checked.
  const req: CanonicalRequest = { model: body.model, messages: messages as CanonicalRequest["messages"] };
  if (body.tools !== undefined && body.tools.length > 0) {
    req.tools = body.tools.map((t) => ({
      type: "function",
      function: { name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), parameters: t.input_schema },
      ...(t.cache_control ? { cache_control: t.cache_control } : {}),
    }));
  }
  const choice = body.tool_choice;
  if (choice !== undefined) {
    req.tool_choice = choice.type === "auto" ? "auto" : choice.type === "any" ? "required" : choice.type === "none" ? "none" : { type: "function", function: { name: choice.name } };
    if (choice.type !== "none" && choice.disable_parallel_tool_use === true) req.parallel_tool_calls = false;
  }
  if (body.thinking?.type === "enabled") req.reasoning = { max_tokens: body.thinking.budget_tokens };
  if (body.cache_control) req.cache_control = body.cache_control;
  // Shared fields pass under the same names, as this dialect's schema validated them: a narrow cast for the loop.
  for (const key of SHARED_FIELDS) if (body[key] !== undefined) (req as Json)[key] = body[key];
  if ("max_tokens" in body) {
    const b = body as MessagesRequest;
    req.max_tokens = b.max_tokens;
    if (b.stop_sequences !== undefined && b.stop_sequences.length > 0) req.stop = b.stop_sequences;
    for (const key of ["temperature", "top_p", "top_k"] as const) if (b[key] !== undefined) req[key] = b[key];
    // metadata.user_id is Anthropic's end-user id, the canonical `user` (an explicit `user` wins).
    if (typeof b.metadata?.user_id === "string" && req.user === undefined) req.user = b.metadata.user_id;
    if (b.stream === true) req.stream = true;
    // The Messages schema takes `cache` as any JSON value (messages-request.ts): passed on as it was, a narrow cast.
    if (b.cache !== undefined) req.cache = b.cache as CanonicalRequest["cache"];
    // The thinking budget also as an effort (its share of max_tokens), for providers that take only an effort
    // (OpenAI-compatible ones); Anthropic and Gemini endpoints use the budget itself.
    if (b.thinking?.type === "enabled") req.reasoning = { max_tokens: b.thinking.budget_tokens, effort: effortOf(b.thinking.budget_tokens / b.max_tokens) };
  }
  return req;
}

/** The reasoning effort whose share of max_tokens a thinking budget is (the Anthropic adapter's shares, read back). */
function effortOf(share: number): "high" | "medium" | "low" | "minimal" {
  return share >= 0.8 ? "high" : share >= 0.5 ? "medium" : share >= 0.2 ? "low" : "minimal";
}

export type StopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use" | "pause_turn" | "refusal";
const NATIVE_STOPS = new Set<string>(["end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"]);

/** Anthropic's stop reason: the upstream's own when it spoke Messages, else mapped from the finish reason. */
export function stopReasonOf(finish: string | null | undefined, native: string | null | undefined): StopReason {
  if (native && NATIVE_STOPS.has(native)) return native as StopReason;
  switch (finish) {
    case "length":
      return "max_tokens";
    case "tool_calls":
      return "tool_use";
    case "content_filter":
      return "refusal";
    default:
      return "end_turn";
  }
}

/**
 * Anthropic's usage: `input_tokens` excludes cache reads and writes (the canonical `prompt_tokens` includes
 * them), each reported apart; `server_tool_use.web_search_requests` when searches ran (Anthropic's own field).
 */
export function usageOf(u: Usage | null | undefined): Json {
  const cached = u?.prompt_tokens_details?.cached_tokens ?? 0;
  const written = u?.prompt_tokens_details?.cache_write_tokens ?? 0;
  const searches = u?.server_tool_use?.web_search_requests;
  return {
    input_tokens: Math.max(0, (u?.prompt_tokens ?? 0) - cached - written),
    cache_creation_input_tokens: written,
    cache_read_input_tokens: cached,
    output_tokens: u?.completion_tokens ?? 0,
    ...(searches ? { server_tool_use: { web_search_requests: searches } } : {}),
  };
}

/** The thinking blocks of reasoning: its details when given (signatures kept), else its text unsigned. */
function thinkingBlocks(reasoning: string | null | undefined, all: ReasoningDetail[] | undefined): Json[] {
  // Gemini's thought signatures are not Anthropic thinking (only a Gemini endpoint takes them back).
  const details = withoutGeminiSignatures(all);
  if (details.length > 0) {
    return details.map((d) => (d.type === "reasoning.encrypted" ? { type: "redacted_thinking", data: d.data } : { type: "thinking", thinking: d.text ?? "", signature: d.signature ?? "" }));
  }
  return reasoning ? [{ type: "thinking", thinking: reasoning, signature: "" }] : [];
}

/** The canonical answer as a Messages `message`; its `id` is the generation id. */
export function encodeResponse(completion: CanonicalResponse): Json {
  const choice = completion.choices[0];
  const msg = choice?.message;
  const content: Json[] = thinkingBlocks(msg?.reasoning, msg?.reasoning_details);
  if (typeof msg?.content === "string" && msg.content !== "") content.push(...citedTextBlocks(msg.content, (msg as { annotations?: unknown }).annotations));
  for (const tc of msg?.tool_calls ?? []) content.push({ type: "tool_use", id: tc.id, name: tc.function.name, input: parseInput(tc.function.arguments) });
  return {
    id: completion.id,
    type: "message",
    role: "assistant",
    model: completion.model,
    content,
    stop_reason: stopReasonOf(choice?.finish_reason, choice?.native_finish_reason),
    stop_sequence: null,
    usage: usageOf(completion.usage),
  };
}

type UrlCitation = { type?: unknown; url_citation?: { url?: unknown; title?: unknown; content?: unknown; start_index?: unknown; end_index?: unknown } };

/** A `url_citation` annotation as Anthropic's `web_search_result_location` citation (no `encrypted_index`: "" ). */
export function webCitation(a: UrlCitation, text: string): Json | undefined {
  const c = a?.type === "url_citation" ? a.url_citation : undefined;
  if (!c || typeof c.url !== "string") return undefined;
  const start = typeof c.start_index === "number" ? c.start_index : 0;
  const end = typeof c.end_index === "number" ? c.end_index : start;
  return { type: "web_search_result_location", url: c.url, title: typeof c.title === "string" ? c.title : "", encrypted_index: "", cited_text: typeof c.content === "string" && c.content !== "" ? c.content : text.slice(start, end) };
}

/**
 * The answer's text as Messages text blocks with the web plugin's citations (docs/plugins.md, "The other dialects"):
 * as Anthropic cites, the text is split so that each cited span is a block of its own carrying its
 * `web_search_result_location` citations (several annotations of one span, one block); the rest are plain blocks.
 * A span overlapping the previous one joins that block. No annotations: one text block.
 */
export function citedTextBlocks(text: string, annotations: unknown): Json[] {
  const list = (Array.isArray(annotations) ? (annotations as UrlCitation[]) : [])
    .map((a) => ({ a, start: Number(a?.url_citation?.start_index), end: Number(a?.url_citation?.end_index) }))
    .filter((x) => x.a?.type === "url_citation" && Number.isInteger(x.start) && Number.isInteger(x.end) && x.start >= 0 && x.end > x.start && x.end <= text.length)
    .sort((x, y) => x.start - y.start || x.end - y.end);
  if (list.length === 0) return [{ type: "text", text }];
  const blocks: Json[] = [];
  let at = 0;
  let last: { end: number; citations: Json[] } | undefined;
  for (const { a, start, end } of list) {
    const citation = webCitation(a, text);
    if (!citation) continue;
    if (last && start < last.end) {
      last.citations.push(citation);
      continue;
    }
    if (start > at) blocks.push({ type: "text", text: text.slice(at, start) });
    last = { end, citations: [citation] };
    blocks.push({ type: "text", text: text.slice(start, end), citations: last.citations });
    at = end;
  }
  if (at < text.length) blocks.push({ type: "text", text: text.slice(at) });
  return blocks;
}

function parseInput(args: string): unknown {
  if (args.trim() === "") return {};
  try {
    return JSON.parse(args);
  } catch {
    return {};
  }
}

/** Anthropic's error type for an HTTP status. */
export function errorTypeOf(status: number): string {
  switch (status) {
    case 400:
    case 422:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 402:
      return "billing_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return "api_error";
  }
}

/** Anthropic's error body. */
export function errorBody(status: number, message: string): Json {
  return { type: "error", error: { type: errorTypeOf(status), message } };
}

/** One server-sent event of the dialect: its `event:` name and its `data:` object. */
export interface MessageEvent {
  type: string;
  data: Json;
}

type Open = { kind: "thinking"; detail: number } | { kind: "text" } | { kind: "tool"; tool: number };

/**
 * Turns canonical stream events into Messages events, one encoder per stream. `push` takes each event in order;
 * `end` gives the closing events once the stream ended normally (not after an error).
 */
export class MessagesStreamEncoder {
  private started = false;
  private next = 0;
  private open: (Open & { index: number }) | undefined;
  /** Tool call index → its block index (a tool call's pieces go to its block). */
  private readonly toolBlocks = new Map<number, number>();
  private finish: string | null = null;
  private native: string | null = null;
  private usage: Usage | undefined;
  private ended = false;
  /** The answer's text so far (a citation's cited text is cut from it). */
  private text = "";

  constructor(private readonly fallbackModel: string) {}

  push(event: StreamEvent): MessageEvent[] {
    if (this.ended) return [];
    const out: MessageEvent[] = [];
    if (!this.started) this.start(event, out);
    if (event.error !== undefined) {
      this.ended = true;
      out.push({ type: "error", data: errorBody(event.error.code, event.error.message) });
      return out;
    }
    if (event.usage) this.usage = event.usage;
    const choice = event.choices?.[0];
    if (!choice) return out;
    const delta = choice.delta ?? {};
    const details = withoutGeminiSignatures(delta.reasoning_details);
    if (details.length > 0) {
      for (const d of details) this.reasoningDetail(d, out);
    } else if (typeof delta.reasoning === "string" && delta.reasoning !== "") {
      if (this.open?.kind !== "thinking") this.openBlock({ kind: "thinking", detail: -1 }, { type: "thinking", thinking: "", signature: "" }, out);
      out.push(this.delta({ type: "thinking_delta", thinking: delta.reasoning }));
    }
    if (typeof delta.content === "string" && delta.content !== "") {
      if (this.open?.kind !== "text") this.openBlock({ kind: "text" }, { type: "text", text: "" }, out);
      this.text += delta.content;
      out.push(this.delta({ type: "text_delta", text: delta.content }));
    }
    for (const tc of delta.tool_calls ?? []) {
      let index = this.toolBlocks.get(tc.index);
      if (index === undefined) {
        this.openBlock({ kind: "tool", tool: tc.index }, { type: "tool_use", id: tc.id ?? "", name: tc.function?.name ?? "", input: {} }, out);
        index = this.open!.index;
        this.toolBlocks.set(tc.index, index);
      }
      const piece = tc.function?.arguments;
      if (piece) out.push({ type: "content_block_delta", data: { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: piece } } });
    }
    // The web plugin's citations (on the finishing chunk): citations_delta events on the open text block, before its
    // stop. The text already went out, so each citation is the block's whole (docs/plugins.md, "The other dialects").
    const annotations = (delta as { annotations?: unknown }).annotations;
    if (Array.isArray(annotations) && this.open?.kind === "text") {
      for (const a of annotations as UrlCitation[]) {
        const citation = webCitation(a, this.text);
        if (citation) out.push(this.delta({ type: "citations_delta", citation }));
      }
    }
    if (choice.finish_reason) {
      this.finish = choice.finish_reason;
      this.native = choice.native_finish_reason ?? null;
      this.close(out);
    }
    return out;
  }

  /** The closing events of a stream that ended normally: message_delta with the stop reason and usage, message_stop. */
  end(): MessageEvent[] {
    if (this.ended) return [];
    this.ended = true;
    const out: MessageEvent[] = [];
    if (!this.started) this.start(undefined, out);
    this.close(out);
    out.push({
      type: "message_delta",
      data: { type: "message_delta", delta: { stop_reason: stopReasonOf(this.finish, this.native), stop_sequence: null }, usage: usageOf(this.usage) },
    });
    out.push({ type: "message_stop", data: { type: "message_stop" } });
    return out;
  }

  private start(event: StreamEvent | undefined, out: MessageEvent[]): void {
    this.started = true;
    const usage = event?.start_usage ? usageOf(event.start_usage) : usageOf(undefined);
    out.push({
      type: "message_start",
      data: {
        type: "message_start",
        message: { id: event?.id ?? "", type: "message", role: "assistant", model: event?.model || this.fallbackModel, content: [], stop_reason: null, stop_sequence: null, usage },
      },
    });
    out.push({ type: "ping", data: { type: "ping" } });
  }

  private reasoningDetail(d: ReasoningDetail, out: MessageEvent[]): void {
    const detail = d.index ?? 0;
    if (d.type === "reasoning.encrypted") {
      this.openBlock({ kind: "thinking", detail }, { type: "redacted_thinking", data: d.data }, out);
      this.close(out);
      return;
    }
    if (this.open?.kind !== "thinking" || this.open.detail !== detail) this.openBlock({ kind: "thinking", detail }, { type: "thinking", thinking: "", signature: "" }, out);
    if (d.text) out.push(this.delta({ type: "thinking_delta", thinking: d.text }));
    if (d.signature) out.push(this.delta({ type: "signature_delta", signature: d.signature }));
  }

  private delta(delta: Json): MessageEvent {
    return { type: "content_block_delta", data: { type: "content_block_delta", index: this.open!.index, delta } };
  }

  private openBlock(kind: Open, block: Json, out: MessageEvent[]): void {
    this.close(out);
    const index = this.next++;
    this.open = { ...kind, index };
    out.push({ type: "content_block_start", data: { type: "content_block_start", index, content_block: block } });
  }

  private close(out: MessageEvent[]): void {
    if (!this.open) return;
    out.push({ type: "content_block_stop", data: { type: "content_block_stop", index: this.open.index } });
    this.open = undefined;
  }
}

/**
 * A documented estimate of a prompt's input tokens for providers without a counting endpoint: the prompt's text
 * (system, messages' text and tool results, thinking, tool calls' names and arguments, tools' JSON definitions)
 * counted with `count` (the o200k tokenizer, src/lib/token-count.ts), plus 3 per message (the chat template's
 * tokens around it); an image counts 1,600 tokens (Anthropic's figure for a ~1.15-megapixel image). Exact for
 * OpenAI's o200k models' text, within tens of percent of other providers' tokenizers; never billed.
 */
export function estimateInputTokens(req: CanonicalRequest, count: (text: string) => number): number {
  let tokens = 0;
  const text = (v: unknown): void => {
    if (typeof v === "string") tokens += count(v);
    else if (Array.isArray(v)) {
      for (const p of v as Json[]) {
        if (p?.type === "image_url") tokens += 1600;
        else text(p?.text);
      }
    }
  };
  for (const m of req.messages) {
    tokens += 3;
    text(m.content);
    text(m.reasoning);
    for (const tc of (m.tool_calls as ToolCall[] | undefined) ?? []) tokens += count(tc.function.name) + count(tc.function.arguments);
  }
  for (const t of (req.tools as Array<{ function?: Json }> | undefined) ?? []) tokens += count(JSON.stringify(t.function ?? {}));
  return Math.max(1, tokens);
}
