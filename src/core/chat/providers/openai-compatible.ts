/**
 * OpenAI-compatible chat completions (openai, groq, deepseek, mistral, together, fireworks, xai, and any
 * vLLM or Ollama endpoint added by base URL). The body passes through; only `model`, `stream` and
 * `stream_options.include_usage` are set. The base URL includes the version path, e.g.
 * `https://api.openai.com/v1`; the adapter POSTs to `<base>/chat/completions`.
 */
import { UpstreamError, type ChatChunk, type ChatCompletion, type ChatUsage, type ProviderAdapter, type UpstreamCall } from "./types.js";
import { copyOf } from "../../../lib/copy.js";
import { createEventReader } from "../raw-events.js";
import { joinUrl, linkedController, openedStream, parseEventData, postJson, readJsonRedacted, redact, sseMap, SSE_END, truncatedStream, upstreamTimeouts, type UpstreamResponse } from "./http.js";

/** `{error: {message}}` (OpenAI and most compatibles), `{error: "text"}` or `{message}`/`{detail}`. */
export function openAiErrorMessage(body: unknown): string | undefined {
  if (!body || typeof body !== "object") return undefined;
  const b = body as { error?: unknown; message?: unknown; detail?: unknown };
  if (typeof b.error === "string") return b.error;
  if (b.error && typeof b.error === "object" && typeof (b.error as { message?: unknown }).message === "string") {
    return (b.error as { message: string }).message;
  }
  if (typeof b.message === "string") return b.message;
  if (typeof b.detail === "string") return b.detail;
  return undefined;
}

function isChatObject(value: unknown): value is { choices: unknown[] } {
  return Boolean(value && typeof value === "object" && Array.isArray((value as { choices?: unknown }).choices));
}

/**
 * Request fields that only steer this gateway (routing, plugins, presets, debugging, tracing) and are
 * never sent upstream: OpenAI rejects unknown arguments with a 400.
 */
export const GATEWAY_ONLY_FIELDS = [
  "models",
  "provider",
  "plugins",
  "preset",
  "route",
  "debug",
  "session_id",
  "trace",
  "transforms",
  "usage",
  "stop_server_tools_when",
  "image_config",
  "cache_control",
  "prompt_cache_options",
  "cache",
] as const;

/**
 * Whether the call asks a search model to search (`web_search_options`: the web plugin's native search, or the
 * caller's own field passed through). OpenAI bills such a call per search call and reports no count in its usage,
 * so the answer counts one `web_search_requests` (unless the provider reported its own count).
 */
function searches(call: UpstreamCall): boolean {
  return call.webSearch !== undefined || (call.body.web_search_options !== undefined && call.body.web_search_options !== null);
}

function withSearch(usage: ChatUsage): ChatUsage {
  return usage.server_tool_use?.web_search_requests !== undefined ? usage : { ...usage, server_tool_use: { ...usage.server_tool_use, web_search_requests: 1 } };
}

export interface OpenAICompatibleOptions {
  /** Sampling fields this provider rejects (e.g. OpenAI has no `top_k`); dropped from the body. */
  unsupported?: readonly string[];
}

export class OpenAICompatibleAdapter implements ProviderAdapter {
  readonly format = "openai" as const;
  private readonly drop: readonly string[];

  constructor(options: OpenAICompatibleOptions = {}) {
    this.drop = [...GATEWAY_ONLY_FIELDS, ...(options.unsupported ?? [])];
  }

  upstreamBody(call: UpstreamCall): Record<string, unknown> {
    return this.bodyOf(call, call.body.stream, false);
  }

  /**
   * The upstream body, streamed or not as `stream` says. `streamFirst`: the `stream` key placed before `model` (where
   * `upstreamBody({ ...call, body: { ...call.body, stream } })` placed it), without those two copies of the call and
   * its body: a spread that then adds a key the source lacks costs ≈ 2 µs on Node 20 (src/lib/copy.ts).
   */
  private bodyOf(call: UpstreamCall, stream: unknown, streamFirst: boolean): Record<string, unknown> {
    const body = copyOf(call.body) as Record<string, unknown>;
    if (streamFirst) body.stream = stream;
    body.model = call.model;
    // Most bodies have none of these: a `delete` of an absent key is a runtime call of its own (15 a request).
    for (const field of this.drop) if (Object.hasOwn(body, field)) delete body[field];
    // The chat-completions API takes `reasoning_effort`, not the `reasoning` object.
    const reasoning = body.reasoning as { effort?: unknown } | undefined;
    delete body.reasoning;
    if (body.reasoning_effort === undefined && typeof reasoning?.effort === "string") body.reasoning_effort = reasoning.effort;
    // The web plugin's native search (native-search.ts): the search models' `web_search_options`.
    if (call.webSearch) {
      const loc = call.webSearch.userLocation;
      body.web_search_options = { ...(loc ? { user_location: { type: "approximate", approximate: loc } } : {}) };
    }
    if (stream) {
      body.stream = true;
      const given = call.body.stream_options;
      body.stream_options = { ...(given && typeof given === "object" ? given : {}), include_usage: true };
    } else {
      body.stream = false;
      delete body.stream_options;
    }
    return body;
  }

  private request(call: UpstreamCall, stream: boolean, signal: AbortSignal): Promise<UpstreamResponse> {
    // A keyless provider (PORTICO_KEYLESS_PROVIDERS) is called with an empty key: no Authorization header.
    const headers: Record<string, string> = call.apiKey === "" ? {} : { authorization: `Bearer ${call.apiKey}` };
    if (stream) headers.accept = "text/event-stream";
    return postJson({
      url: joinUrl(call.baseUrl, "chat/completions"),
      headers,
      body: this.bodyOf(call, stream, true),
      signal,
      apiKey: call.apiKey,
      errorMessage: openAiErrorMessage,
      ...upstreamTimeouts(call, stream),
    });
  }

  async complete(call: UpstreamCall): Promise<ChatCompletion> {
    const response = await this.request(call, false, call.signal);
    const value = await readJsonRedacted(response, call.apiKey);
    if (!isChatObject(value)) {
      const message = openAiErrorMessage(value);
      throw new UpstreamError(message ? 502 : 0, message ? `upstream error: ${message}` : "upstream returned no choices", true, value);
    }
    const completion = value as unknown as ChatCompletion;
    if (completion.usage && searches(call)) completion.usage = withSearch(completion.usage);
    for (const choice of completion.choices) {
      if (choice.native_finish_reason === undefined) choice.native_finish_reason = choice.finish_reason;
    }
    return completion;
  }

  /**
   * The reader is opened with the first read and handed on as it is (`openedStream`: no async-generator layer per
   * event); the per-event work runs inside the SSE reader (`sseMap`).
   */
  stream(call: UpstreamCall): AsyncIterableIterator<ChatChunk> {
    return openedStream(() => this.openStream(call));
  }

  private async openStream(call: UpstreamCall): Promise<AsyncIterator<ChatChunk>> {
    const controller = linkedController(call.signal);
    const response = await this.request(call, true, controller.signal);
    // Some compatible servers omit `[DONE]`; a stream that ends after a finish reason is complete.
    let finished = false;
    let done = false;
    const searched = searches(call);
    // Events the caller passes on as JSON text keep their text where it is exact (../raw-events.ts).
    const read = call.rawEvents ? createEventReader(parseEventData, call.rawEvents) : parseEventData;
    return sseMap(
      response,
      controller,
      (event): ChatChunk | undefined | typeof SSE_END => {
        const data = event.data.trim();
        if (data === "[DONE]") {
          done = true;
          return SSE_END;
        }
        if (data === "") return undefined;
        const value = read(data);
        if (value.error !== undefined && !isChatObject(value)) {
          const safe = redact(value, call.apiKey);
          const status = Number((value.error as { code?: unknown })?.code);
          const code = Number.isInteger(status) && status >= 400 && status < 600 ? status : 502;
          throw new UpstreamError(code, `upstream error: ${openAiErrorMessage(safe) ?? "stream error"}`, true, safe);
        }
        const chunk = value as unknown as ChatChunk;
        if (Array.isArray(chunk.choices)) {
          for (const choice of chunk.choices) {
            if (choice.finish_reason) {
              finished = true;
              if (choice.native_finish_reason === undefined) choice.native_finish_reason = choice.finish_reason;
            }
          }
        }
        if (searched && chunk.usage) chunk.usage = withSearch(chunk.usage);
        return chunk;
      },
      (e) => e.data.trim() === "[DONE]",
      call.apiKey,
      // The body ended without `[DONE]`: complete only after a finish reason.
      () => {
        if (!done && !finished) throw truncatedStream();
      },
    );
  }
}
