/** Fake Anthropic Messages upstream (`POST /v1/messages`), events framed as Anthropic sends them. */
import { defaultScript, sse, startFake, type FakeUpstream, type Knobs, type Script, type Wire } from "./server.js";

const errorTypes: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  504: "timeout_error",
  529: "overloaded_error",
};

const ev = (type: string, data: Record<string, unknown>) => sse({ type, ...data }, type);
/** The searches of the web search server tool, as Anthropic reports them in `usage`. */
const searches = (s: Script) => (s.usage.searches !== undefined ? { server_tool_use: { web_search_requests: s.usage.searches } } : {});

export const anthropicWire: Wire = {
  isStream: (req) => req.body?.stream === true,
  // count_tokens answers the script's input tokens.
  other: (s, req) => (req.url.split("?")[0]!.endsWith("/v1/messages/count_tokens") ? { input_tokens: s.usage.input } : undefined),
  errorBody: (status, message) => ({ type: "error", error: { type: errorTypes[status] ?? "api_error", message }, request_id: "req_fake" }),
  streamError: (message) => ev("error", { error: { type: "overloaded_error", message } }),
  completion: (s, req) => {
    const content: unknown[] = [];
    if (s.reasoning?.length) content.push({ type: "thinking", thinking: s.reasoning.join(""), signature: "sig" });
    if (s.text.length) content.push({ type: "text", text: s.text.join("") });
    for (const t of s.toolCalls ?? []) content.push({ type: "tool_use", id: t.id, name: t.name, input: JSON.parse(t.arguments) });
    return {
      id: "msg_fake1",
      type: "message",
      role: "assistant",
      model: s.model ?? req.body?.model,
      content,
      stop_reason: s.finish,
      stop_sequence: null,
      usage: { input_tokens: s.usage.input, cache_creation_input_tokens: s.usage.cacheWrite ?? 0, cache_read_input_tokens: s.usage.cached ?? 0, output_tokens: s.usage.output, ...searches(s) },
    };
  },
  streamEvents: (s, req) => {
    const frames = [
      ev("message_start", {
        message: {
          id: "msg_fake1", type: "message", role: "assistant", model: s.model ?? req.body?.model, content: [], stop_reason: null, stop_sequence: null,
          usage: { input_tokens: s.usage.input, cache_creation_input_tokens: s.usage.cacheWrite ?? 0, cache_read_input_tokens: s.usage.cached ?? 0, output_tokens: 1 },
        },
      }),
      ev("ping", {}),
    ];
    let index = 0;
    if (s.reasoning?.length) {
      frames.push(ev("content_block_start", { index, content_block: { type: "thinking", thinking: "" } }));
      for (const piece of s.reasoning) frames.push(ev("content_block_delta", { index, delta: { type: "thinking_delta", thinking: piece } }));
      frames.push(ev("content_block_delta", { index, delta: { type: "signature_delta", signature: "sig" } }));
      frames.push(ev("content_block_stop", { index }));
      index += 1;
    }
    if (s.text.length) {
      frames.push(ev("content_block_start", { index, content_block: { type: "text", text: "" } }));
      for (const piece of s.text) frames.push(ev("content_block_delta", { index, delta: { type: "text_delta", text: piece } }));
      frames.push(ev("content_block_stop", { index }));
      index += 1;
    }
    for (const t of s.toolCalls ?? []) {
      frames.push(ev("content_block_start", { index, content_block: { type: "tool_use", id: t.id, name: t.name, input: {} } }));
      for (const piece of t.argumentPieces ?? [t.arguments]) frames.push(ev("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: piece } }));
      frames.push(ev("content_block_stop", { index }));
      index += 1;
    }
    frames.push(ev("message_delta", { delta: { stop_reason: s.finish, stop_sequence: null }, usage: { output_tokens: s.usage.output, ...searches(s) } }));
    frames.push(ev("message_stop", {}));
    return frames;
  },
};

export function startFakeAnthropic(script: Script = { ...defaultScript(), finish: "end_turn" }, knobs: Knobs = {}): Promise<FakeUpstream> {
  return startFake(anthropicWire, script, knobs);
}

/**
 * A whole Messages answer (`{id, model, content, stop_reason, usage}`) as the SSE events Anthropic streams for it:
 * text in two deltas, a text block's citations as `citations_delta`s, a (server) tool use's input as one
 * `input_json_delta`, thinking as `thinking_delta` + `signature_delta`, other blocks (web_search_tool_result) whole
 * in `content_block_start`; usage in `message_start` (output 1) and `message_delta`.
 */
export function messageEvents(message: { id: string; model: string; content: Array<Record<string, any>>; stop_reason: string; usage: Record<string, unknown> }): string[] {
  const frames = [ev("message_start", { message: { id: message.id, type: "message", role: "assistant", model: message.model, content: [], stop_reason: null, stop_sequence: null, usage: { ...message.usage, output_tokens: 1 } } })];
  message.content.forEach((block, index) => {
    if (block.type === "text") {
      frames.push(ev("content_block_start", { index, content_block: { type: "text", text: "", ...(block.citations ? { citations: [] } : {}) } }));
      for (const citation of block.citations ?? []) frames.push(ev("content_block_delta", { index, delta: { type: "citations_delta", citation } }));
      const half = Math.ceil(block.text.length / 2);
      for (const piece of [block.text.slice(0, half), block.text.slice(half)]) if (piece) frames.push(ev("content_block_delta", { index, delta: { type: "text_delta", text: piece } }));
    } else if (block.type === "server_tool_use" || block.type === "tool_use") {
      frames.push(ev("content_block_start", { index, content_block: { ...block, input: {} } }));
      frames.push(ev("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input) } }));
    } else if (block.type === "thinking") {
      frames.push(ev("content_block_start", { index, content_block: { type: "thinking", thinking: "" } }));
      frames.push(ev("content_block_delta", { index, delta: { type: "thinking_delta", thinking: block.thinking } }));
      frames.push(ev("content_block_delta", { index, delta: { type: "signature_delta", signature: block.signature } }));
    } else frames.push(ev("content_block_start", { index, content_block: block }));
    frames.push(ev("content_block_stop", { index }));
  });
  const { input_tokens: _i, cache_creation_input_tokens: _c, cache_read_input_tokens: _r, ...delta } = message.usage;
  frames.push(ev("message_delta", { delta: { stop_reason: message.stop_reason, stop_sequence: null }, usage: delta }));
  frames.push(ev("message_stop", {}));
  return frames;
}
