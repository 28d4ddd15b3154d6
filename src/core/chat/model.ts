/**
 * The canonical model of one LLM call in the core: the request, the response, the stream event, usage, tool
 * calls and errors that every pipeline stage (src/core/chat/pipeline) and every provider adapter
 * (src/core/chat/providers) exchange.
 *
 * Decision: the canonical model uses the field names and shapes of the OpenAI chat-completions wire format
 * (snake_case JSON objects), the lingua franca most providers and peers already speak (Envoy AI Gateway and
 * Portkey translate every schema to and from it). So:
 *
 * - the OpenAI chat-completions dialect (src/core/chat/dialects/openai-chat.ts) decodes by validating and
 *   encodes by stamping the generation id and provider (in place); a plain content chunk of an OpenAI-compatible
 *   upstream leaves as its own JSON text with `id` and `provider` rewritten (raw-events.ts);
 * - a second dialect (Anthropic Messages, Responses) decodes into these shapes at the edge and encodes out of
 *   them, and provider adapters for other wire formats (Anthropic, Gemini) translate from and to them;
 * - fields the OpenAI format lacks are added here under their own names (usage `cache_write_tokens`, `cost`)
 *   and are optional, so existing producers stay valid.
 *
 * Nothing here is a class or does work: these are the types; the pipeline's per-request state is in
 * pipeline/stage.ts.
 */
import type { Reason } from "../../contract/reasons.js";
import type { ChatBody, ChatChunk, ChatCompletion, ChatUsage, FinishReason, ReasoningDetail, ToolCall } from "./providers/types.js";

export type { FinishReason, ReasoningDetail, ToolCall };

/**
 * A validated request. Its type is the JSON validation's output (ChatRequest in
 * src/contract/requests/chat-request.ts, via ChatBody), so the type and the validation cannot drift: messages
 * discriminated by `role` with their content parts and tool calls (ChatMessage, ChatContentPart, ChatToolCall),
 * `tools` (ChatTool), `tool_choice` (ChatToolChoice), `response_format`, `reasoning`, the sampling and length
 * fields. Every object in it is loose: unknown fields, top-level and nested, are allowed and kept (the API accepts
 * them; dialect decoders add `reasoning_details`, `cache_control`). A type only: nothing parses or copies for it.
 * Stages that change the request (preset) replace the object rather than mutate the caller's.
 */
export type CanonicalRequest = ChatBody;

/** A complete (non-streamed) answer: one `chat.completion` object with `id` (generation id) and `provider`. */
export type CanonicalResponse = ChatCompletion & { provider?: string; plugins?: PluginReport[] };

/** What one plugin of the request did (the plugins stage, docs/plugins.md): on the answer as `plugins`, and on the generation. */
export interface PluginReport {
  id: string;
  [field: string]: unknown;
}

/**
 * One event of a streamed answer: one `chat.completion.chunk`, `id` and `provider` stamped.
 *
 * Reasoning: `delta.reasoning` is its text (as the real-world service streams it) and `delta.reasoning_details`
 * the same pieces with what a provider needs to take them back on the next turn (Anthropic's thinking
 * `signature`, its `redacted_thinking` data); a message's `reasoning_details` on a request are sent back to
 * providers that accept them. `start_usage` is the usage known when the stream began (the prompt's tokens, from
 * an Anthropic upstream's `message_start`), for dialects that report it first (Anthropic Messages); the OpenAI
 * dialect does not show it.
 */
export type StreamEvent = ChatChunk & { provider?: string; error?: CanonicalError; debug?: Record<string, unknown>; start_usage?: Usage; plugins?: PluginReport[] };

/**
 * Token usage: the OpenAI names, plus what the catalog and cost issues need: cached prompt tokens read
 * (`prompt_tokens_details.cached_tokens`) and written (`prompt_tokens_details.cache_write_tokens`), reasoning
 * tokens (`completion_tokens_details.reasoning_tokens`) and `cost` (absent until the model catalog prices it).
 */
export type Usage = ChatUsage;

/**
 * An error inside a stream after its first byte (`finish_reason: "error"` chunk). `reason` is the error's
 * entry in the one table (src/contract/reasons.ts); `code` is the HTTP status the chunk shows: the provider's
 * own status when it gave one, else the reason's. A dialect encodes it out (the OpenAI one as `{code, message, metadata: {reason, retryable}}`).
 */
export interface CanonicalError {
  reason: Reason;
  code: number;
  message: string;
}
