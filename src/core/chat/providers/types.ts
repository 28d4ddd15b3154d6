/**
 * The contract between the chat-completions router and the upstream provider adapters.
 *
 * The router speaks the OpenAI chat-completions shape (JSON as on the wire, snake_case); each adapter
 * translates it to its provider's wire format and back. Adapters are stateless apart from their HTTP
 * client and never log or echo the credential they are given.
 *
 * - `complete()` resolves with one `chat.completion` object.
 * - `stream()` yields `chat.completion.chunk` objects in order; the last one carries `usage` when the
 *   provider reports it. The iterator's `return()` (a consumer that stops early) and `signal` both abort
 *   the upstream HTTP request at once.
 * - Failures before the first byte of the response body throw `UpstreamError`, whose `retryable` tells
 *   the router whether to try the next (provider, model, credential) attempt. After the first chunk an
 *   error is thrown the same way; the router turns it into a `finish_reason: "error"` chunk.
 */

import type { ChatRequest } from "../../../contract/requests/chat-request.js";
import type { NativeWebSearch, UrlAnnotation } from "./native-search.js";
import type { RawSlot } from "../raw-events.js";

/**
 * A chat-completions body as JSON (OpenAI wire names). Validated before it reaches an adapter, so its type is the
 * validation's output (ChatRequest, src/contract/requests/chat-request.ts, the one definition): messages by role
 * with their content parts and tool calls, `tools`, `tool_choice`, `response_format`, `reasoning`, the sampling
 * and length fields. Every object is loose: unknown keys (top-level and nested) are allowed and kept. `model` is
 * required here (the router sets it before an adapter sees the body).
 */
export type ChatBody = ChatRequest & { model: string };

/** One attempt: which upstream model, at which base URL, with which credential. */
export interface UpstreamCall {
  /** The provider's own model id (the router strips any `<provider>/` routing prefix). */
  model: string;
  /** The request, already merged with any preset; `model` and `stream` are set by the adapter. */
  body: ChatBody;
  /** Base URL of the provider's API, e.g. `https://api.anthropic.com` (configurable per provider). */
  baseUrl: string;
  /** The decrypted provider key. Never logged, never placed in an error message. */
  apiKey: string;
  /** Aborts the upstream request (client disconnect, deadline). */
  signal: AbortSignal;
  /** The provider's response must begin (status and headers) within this many ms, else a retryable timeout. */
  firstByteTimeoutMs?: number;
  /** Extra provider-specific settings (e.g. an API version header), from operator configuration. */
  options?: Readonly<Record<string, string>>;
  /** The operator's time limits for this provider (docs/operations.md, "Upstream time limits per provider"). */
  limits?: UpstreamLimits;
  /** The provider's own web search, asked for by the `web` plugin (native-search.ts); the adapter adds its tool. */
  webSearch?: NativeWebSearch;
  /**
   * Streams: the caller passes the events on as JSON text, so an adapter may leave each event's upstream text here
   * (../raw-events.ts) where the text is exactly what the event's `JSON.stringify` would write.
   */
  rawEvents?: RawSlot;
}

/** Time limits of one provider's calls, ms; absent: the defaults. */
export interface UpstreamLimits {
  /** The TCP connection must be established within this (PORTICO_PROVIDER_<SLUG>_CONNECT_TIMEOUT_MS). */
  connectMs?: number;
  /** Streamed attempts: the response must begin within this, replacing the global limit (…_FIRST_BYTE_TIMEOUT_MS). */
  firstByteMs?: number;
  /** The longest silence, before the response or between chunks (…_IDLE_TIMEOUT_MS). */
  idleMs?: number;
}

/** Token usage (see Usage in ../model.ts for the canonical meaning of each field). */
export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number };
  completion_tokens_details?: { reasoning_tokens?: number };
  /**
   * The provider's own server tools that ran (its native web search, native-search.ts): `web_search_requests`
   * is the searches it bills (Anthropic's own count; a Gemini answer grounded with Google Search and an OpenAI
   * search-model call count one). Priced at the endpoint's `web_search` (docs/catalog.md, "Cost rules").
   */
  server_tool_use?: { web_search_requests?: number };
  /** Filled by the model catalog (cost issue); adapters leave it absent. */
  cost?: number | null;
}

export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter" | "error" | null;

/**
 * One piece of a model's reasoning, in the real-world service's `reasoning_details` shape: readable thinking
 * (`reasoning.text`, with the provider's `signature` that lets it be sent back), or thinking the provider
 * returns only encrypted (`reasoning.encrypted`, Anthropic's `redacted_thinking`). `index` orders the pieces
 * of one answer; in a stream, deltas with the same index extend the same piece (text appended, the signature
 * arriving last). `format` names the provider's flavour (`anthropic-claude-v1`).
 */
export type ReasoningDetail =
  | { type: "reasoning.text"; text?: string; signature?: string | null; format?: string; index?: number }
  | { type: "reasoning.encrypted"; data: string; format?: string; index?: number; id?: string };

/**
 * The `format` of Gemini's thought signatures (`thoughtSignature` on a response part), kept as
 * `reasoning.encrypted` details whose `data` is the signature and whose `id` is the tool call whose
 * `functionCall` part carried it (absent: the signature was on a text or thought part). Only a Gemini endpoint
 * takes them back; the Anthropic adapter and the Messages and Responses encoders leave them out.
 */
export const GEMINI_REASONING_FORMAT = "google-gemini-v1";

/** The reasoning details other than Gemini's thought signatures (what Anthropic-shaped consumers read). */
export function withoutGeminiSignatures<T extends { format?: string }>(details: readonly T[] | undefined): T[] {
  return (details ?? []).filter((d) => d.format !== GEMINI_REASONING_FORMAT);
}

/** An OpenAI `chat.completion` object. */
export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: Array<{
    index: number;
    message: { role: "assistant"; content: string | null; tool_calls?: ToolCall[]; reasoning?: string | null; reasoning_details?: ReasoningDetail[]; annotations?: UrlAnnotation[] };
    finish_reason: FinishReason;
    /** The provider's own stop reason, unmapped (e.g. Anthropic `end_turn`). */
    native_finish_reason?: string | null;
  }>;
  usage?: ChatUsage;
}

/** An OpenAI `chat.completion.chunk` object. */
export interface ChatChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: Array<{
    index: number;
    delta: {
      role?: "assistant";
      content?: string | null;
      reasoning?: string | null;
      reasoning_details?: ReasoningDetail[];
      tool_calls?: Array<{ index: number; id?: string; type?: "function"; function?: { name?: string; arguments?: string } }>;
      /** Citations of the answer (a native web search's, native-search.ts), on the chunk that finishes the choice. */
      annotations?: UrlAnnotation[];
    };
    finish_reason: FinishReason;
    native_finish_reason?: string | null;
  }>;
  usage?: ChatUsage | null;
}

/** An upstream failure, already classified. `message` never contains the credential. */
export class UpstreamError extends Error {
  constructor(
    /** HTTP status from the provider, or 0 for a connect/DNS/TLS error or a malformed response. */
    readonly status: number,
    message: string,
    /** True for 401, 403, 408, 429, 5xx and connect errors: the router may try the next attempt. */
    readonly retryable: boolean,
    /** The provider's error body, parsed when it was JSON (for `metadata.raw`); never contains the key. */
    readonly providerBody?: unknown,
    facts: { retryAfterMs?: number; timedOut?: boolean; sent?: boolean; reason?: FailureReason } = {},
  ) {
    super(message);
    this.name = "UpstreamError";
    this.#reason = facts.reason;
    this.retryAfterMs = facts.retryAfterMs;
    this.timedOut = facts.timedOut ?? false;
    this.sent = facts.sent ?? false;
  }

  /** Why the attempt failed, classified from the status and the provider's error body ({@link classifyFailure}). */
  get reason(): FailureReason {
    return (this.#reason ??= classifyFailure(this.status, this.providerBody, this.message, this.timedOut));
  }
  #reason: FailureReason | undefined;

  /**
   * Whether the next candidate may serve the request instead: a retryable failure, or one another provider or
   * model can get past (context length, the provider's content filter, a model the provider does not serve).
   */
  get fallback(): boolean {
    return this.retryable || FALLBACK_REASONS.has(this.reason);
  }

  /** The wait the provider asked for (`Retry-After` of a 429 or 503), in ms. */
  readonly retryAfterMs: number | undefined;
  /** The provider did not answer in time (first-byte or idle limit). */
  readonly timedOut: boolean;
  /** The connection broke after the request was written: the provider may have received it (never re-sent). */
  readonly sent: boolean;
}

/**
 * Why an upstream attempt ended (the generation's `attempts_log`, docs/operations.md "Retries and fallback"):
 * `rate_limited` 429; `timeout` no answer within a limit; `outage` no response, 408 or 5xx; `auth_failed`
 * 401/403; `context_length`, `content_filter`, `model_unavailable` read from the provider's error; `slow_stream`
 * streamed below the floor during the probe; `client_error` any other 4xx (the request itself is wrong).
 */
export type FailureReason =
  | "rate_limited"
  | "timeout"
  | "outage"
  | "auth_failed"
  | "context_length"
  | "content_filter"
  | "model_unavailable"
  | "slow_stream"
  | "client_error";

/** Failures the next candidate may get past although their status is not retryable (a 400 or 404). */
export const FALLBACK_REASONS: ReadonlySet<FailureReason> = new Set(["context_length", "content_filter", "model_unavailable"]);

/** The provider's error text (its codes, types and messages), lower case, for {@link classifyFailure}. */
function errorText(body: unknown, message: string): string {
  let text = message;
  if (body !== undefined && body !== null) {
    try {
      text += " " + (typeof body === "string" ? body : JSON.stringify(body));
    } catch {
      /* not serialisable: the message alone */
    }
  }
  return text.toLowerCase();
}

const CONTEXT_LENGTH =
  /context_length_exceeded|context[ _-]length|context window|maximum context|prompt is too long|prompt too long|too many (input )?tokens|input token count.{0,40}exceeds|exceeds the maximum number of tokens|token limit|string_above_max_length|request_too_large|input is too long/;
const CONTENT_FILTER = /content_filter|content_policy|content management policy|responsibleaipolicyviolation|safety system|flagged by|blocked by (the )?(safety|content)|violat\w* (our|the) (usage|content) polic/;
const MODEL_UNAVAILABLE =
  /model_not_found|not_found_error|"status":"not_found"|model .{0,80}(not found|does not exist|not available|unavailable|not supported|decommissioned|deprecated|no longer)|no such model|unknown model|invalid model|model_not_available|unsupported model/;

/**
 * Classifies an upstream failure from its status and error body in each adapter's wire shape (table in
 * docs/operations.md, "Retries and fallback"): OpenAI-compatible `error.code` `context_length_exceeded` or
 * its messages, Anthropic `invalid_request_error` "prompt is too long", Gemini `INVALID_ARGUMENT` "input token
 * count … exceeds", 404 or `model_not_found` / `not_found_error` for a model the provider does not serve,
 * `content_filter` / `content_policy_violation` for a refusal by the provider's filter.
 */
export function classifyFailure(status: number, body: unknown, message: string, timedOut = false): FailureReason {
  if (timedOut) return "timeout";
  if (status === 429) return "rate_limited";
  if (status === 401 || status === 403) {
    const text = errorText(body, message);
    return CONTENT_FILTER.test(text) ? "content_filter" : "auth_failed";
  }
  if (status === 0 || status === 408 || status >= 500) return "outage";
  const text = errorText(body, message);
  if (status === 413 || CONTEXT_LENGTH.test(text)) return "context_length";
  if (CONTENT_FILTER.test(text)) return "content_filter";
  if (status === 404 || MODEL_UNAVAILABLE.test(text)) return "model_unavailable";
  return "client_error";
}

/** True for statuses after which the router moves on to the next attempt. */
export function isRetryableStatus(status: number): boolean {
  return status === 0 || status === 401 || status === 403 || status === 408 || status === 429 || status >= 500;
}

export interface ProviderAdapter {
  /** The wire format this adapter speaks: "openai" (chat completions), "anthropic" (Messages), "gemini". */
  readonly format: "openai" | "anthropic" | "gemini";
  complete(call: UpstreamCall): Promise<ChatCompletion>;
  stream(call: UpstreamCall): AsyncIterable<ChatChunk>;
  /**
   * The provider request body this adapter would send for `call` (for `debug.echo_upstream_body`).
   * Must not contain the credential.
   */
  upstreamBody(call: UpstreamCall): unknown;
  /**
   * The prompt's input tokens as the provider counts them (Anthropic's `count_tokens`), for providers that
   * offer counting; absent otherwise.
   */
  countTokens?(call: UpstreamCall): Promise<number>;
}
