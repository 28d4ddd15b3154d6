/**
 * HTTP plumbing shared by the provider adapters: one POST with JSON, classified failures, and an SSE
 * reader whose early exit aborts the upstream request. Node's fetch (undici) keeps connections alive
 * by default. The credential only ever travels in request headers; `redact` strips it from anything
 * the provider echoes back before it reaches an error.
 */
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { UpstreamError, isRetryableStatus } from "./types.js";

export interface PostOptions {
  url: string;
  headers: Record<string, string>;
  body: unknown;
  signal: AbortSignal;
  apiKey: string;
  /** Pulls a readable message out of the provider's parsed error body. */
  errorMessage: (body: unknown) => string | undefined;
}

/** Replaces every occurrence of the key in a string or JSON value. */
export function redact<T>(value: T, apiKey: string): T {
  if (!apiKey || apiKey.length < 4) return value;
  if (typeof value === "string") return value.split(apiKey).join("[redacted]") as T;
  if (value === undefined || value === null || typeof value !== "object") return value;
  const text = JSON.stringify(value);
  return text.includes(apiKey) ? (JSON.parse(text.split(apiKey).join("[redacted]")) as T) : value;
}

/** POSTs JSON; resolves with a 2xx response, throws `UpstreamError` for anything else. */
export async function postJson(opts: PostOptions): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(opts.url, {
      method: "POST",
      headers: { "content-type": "application/json", ...opts.headers },
      body: JSON.stringify(opts.body),
      signal: opts.signal,
    });
  } catch (err) {
    if (opts.signal.aborted) throw opts.signal.reason ?? err;
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new UpstreamError(0, `upstream connection failed: ${cause?.code ?? cause?.message ?? (err as Error).message}`, true);
  }
  if (response.ok) return response;
  const text = await response.text().catch(() => "");
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  const safe = redact(parsed, opts.apiKey);
  const message = opts.errorMessage(safe) ?? (text && parsed === undefined ? text.slice(0, 200) : `HTTP ${response.status}`);
  throw new UpstreamError(response.status, redact(`upstream returned ${response.status}: ${message}`, opts.apiKey), isRetryableStatus(response.status), safe);
}

/** Parses a JSON response body; a body that is not JSON is a malformed response (status 0). */
export async function readJson(response: Response): Promise<unknown> {
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new UpstreamError(0, "upstream returned a body that is not JSON", true);
  }
}

/**
 * Yields the server-sent events of `response` in order. Returning early (or `controller` aborting)
 * cancels the body, which closes the upstream connection.
 */
export async function* sseEvents(response: Response, controller: AbortController): AsyncGenerator<EventSourceMessage> {
  const body = response.body;
  if (!body) throw new UpstreamError(0, "upstream returned no body", true);
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (event) => queue.push(event) });
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let finished = false;
  try {
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (err) {
        if (controller.signal.aborted) throw controller.signal.reason ?? err;
        throw new UpstreamError(0, `upstream stream broke: ${(err as Error).message}`, true);
      }
      if (chunk.done) break;
      parser.feed(decoder.decode(chunk.value, { stream: true }));
      while (queue.length > 0) yield queue.shift()!;
    }
    parser.feed(decoder.decode());
    parser.feed("\n\n");
    while (queue.length > 0) yield queue.shift()!;
    finished = true;
  } finally {
    if (!finished) {
      controller.abort();
      reader.cancel().catch(() => undefined);
    }
  }
}

/** The error for a stream whose body ended cleanly before the provider's end-of-response marker. */
export function truncatedStream(): UpstreamError {
  return new UpstreamError(0, "upstream stream ended before the response was complete", true);
}

/** An AbortController that also aborts when the caller's signal does. */
export function linkedController(signal: AbortSignal): AbortController {
  const controller = new AbortController();
  if (signal.aborted) controller.abort(signal.reason);
  else signal.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
  return controller;
}

/** Parses one SSE data payload as JSON; malformed data is a broken stream. */
export function parseEventData(data: string): Record<string, unknown> {
  try {
    const value = JSON.parse(data) as unknown;
    if (value && typeof value === "object") return value as Record<string, unknown>;
  } catch {
    /* fall through */
  }
  throw new UpstreamError(0, "upstream sent a stream event that is not a JSON object", true);
}

/** Joins a base URL and a path without doubling or dropping the slash. */
export function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, "")}/${path.replace(/^\/+/, "")}`;
}

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** Text of an OpenAI message `content` (string or parts), for places that only take text. */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) => (part && typeof part === "object" && (part as { type?: unknown }).type === "text" ? String((part as { text?: unknown }).text ?? "") : ""))
    .join("");
}

/** Splits a `data:<mime>;base64,<data>` URL; undefined for any other URL. */
export function parseDataUrl(url: string): { mediaType: string; data: string } | undefined {
  const match = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  return match ? { mediaType: match[1]!, data: match[2]! } : undefined;
}

/** Parses tool-call arguments (a JSON string) into an object; invalid JSON becomes `{}`-wrapped text. */
export function parseArguments(args: unknown): Record<string, unknown> {
  if (args && typeof args === "object") return args as Record<string, unknown>;
  if (typeof args !== "string" || args.trim() === "") return {};
  try {
    const value = JSON.parse(args) as unknown;
    return value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : { value };
  } catch {
    return { arguments: args };
  }
}
