/**
 * HTTP plumbing shared by the provider adapters: one POST with JSON, classified failures, and an SSE
 * reader whose early exit aborts the upstream request, over node:http(s) with keep-alive agents. The credential only ever travels in request headers; `redact` strips it from anything
 * the provider echoes back before it reaches an error.
 */
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
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
  /** The upstream may stay silent (no response headers, no body bytes) this long; default {@link UPSTREAM_IDLE_TIMEOUT_MS}. */
  idleTimeoutMs?: number;
}

/** Like undici's headers and body timeouts (which `fetch` applied before): 300 s without a byte fails the call. */
export const UPSTREAM_IDLE_TIMEOUT_MS = 300_000;

/** Replaces every occurrence of the key in a string or JSON value. */
export function redact<T>(value: T, apiKey: string): T {
  if (!apiKey || apiKey.length < 4) return value;
  if (typeof value === "string") return value.split(apiKey).join("[redacted]") as T;
  if (value === undefined || value === null || typeof value !== "object") return value;
  const text = JSON.stringify(value);
  return text.includes(apiKey) ? (JSON.parse(text.split(apiKey).join("[redacted]")) as T) : value;
}

/**
 * An upstream response: its status and a body read once, as text or as chunks. Backed by node:http(s)
 * rather than fetch: the WHATWG streams, AbortSignal plumbing and Response objects of fetch cost more CPU
 * per request and per chunk than the relay itself (bench/chat-relay.ts, profile in bench/README.md).
 */
export interface UpstreamResponse {
  status: number;
  ok: boolean;
  text(): Promise<string>;
  /** The body as it arrives; pauses the socket while the consumer is not reading (backpressure). */
  chunks(): AsyncIterable<Buffer>;
  /** Drops the body and the connection it arrives on. */
  cancel(): void;
  /** Reads what is left of a body no longer needed, so the connection can serve the next request. */
  release(): void;
}

const agents = {
  http: new http.Agent({ keepAlive: true, maxFreeSockets: 256, scheduling: "lifo" }),
  https: new https.Agent({ keepAlive: true, maxFreeSockets: 256, scheduling: "lifo" }),
};

/**
 * One POST. A kept-alive connection the upstream closed while it sat idle fails with ECONNRESET before any
 * response; that request never reached the upstream, so it is sent once more on a fresh connection (the
 * pattern of Node's `request.reusedSocket` documentation).
 */
function send(url: URL, headers: Record<string, string>, payload: string, signal: AbortSignal, idleMs: number, retried = false): Promise<IncomingMessage> {
  const secure = url.protocol === "https:";
  if (!secure && url.protocol !== "http:") return Promise.reject(new UpstreamError(0, `unsupported upstream URL scheme ${url.protocol}`, false));
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const req = (secure ? https : http).request(url, {
      method: "POST",
      agent: secure ? agents.https : agents.http,
      headers: { ...headers, "content-length": String(Buffer.byteLength(payload)) },
    });
    // Not the `signal` option: that one stays attached after the response and would destroy the socket
    // once it is back in the pool (or serving another request) when the caller's signal aborts later.
    let response: IncomingMessage | undefined;
    const onAbort = () => {
      if (!response?.complete) req.destroy(signal.reason as Error);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    const detach = () => signal.removeEventListener("abort", onAbort);
    req.setTimeout(idleMs, () => req.destroy(new UpstreamError(0, `upstream sent nothing for ${Math.round(idleMs / 1000)} s`, true)));
    req.once("response", (res) => {
      response = res;
      res.once("end", detach);
      res.once("close", detach);
      resolve(res);
    });
    req.on("error", (err: NodeJS.ErrnoException) => {
      if (response) return; // after the response began, its own stream reports the failure
      detach();
      if (!retried && req.reusedSocket && err.code === "ECONNRESET" && !signal.aborted) resolve(send(url, headers, payload, signal, idleMs, true));
      else reject(err);
    });
    req.end(payload);
  });
}

function wrap(res: IncomingMessage): UpstreamResponse {
  const status = res.statusCode ?? 0;
  return {
    status,
    ok: status >= 200 && status < 300,
    async text() {
      res.setEncoding("utf8");
      let out = "";
      for await (const piece of res) out += piece as string;
      return out;
    },
    chunks: () => res as AsyncIterable<Buffer>,
    cancel: () => res.destroy(),
    release: () => {
      if (res.complete) return;
      // Whatever follows the end marker (the chunked terminator) is drained; an upstream that keeps sending loses the connection.
      const timer = setTimeout(() => res.destroy(), 1000);
      timer.unref();
      res.once("close", () => clearTimeout(timer));
      res.resume();
    },
  };
}

/** POSTs JSON; resolves with a 2xx response, throws `UpstreamError` for anything else. */
export async function postJson(opts: PostOptions): Promise<UpstreamResponse> {
  let response: UpstreamResponse;
  try {
    response = wrap(await send(new URL(opts.url), { "content-type": "application/json", ...opts.headers }, JSON.stringify(opts.body), opts.signal, opts.idleTimeoutMs ?? UPSTREAM_IDLE_TIMEOUT_MS));
  } catch (err) {
    if (opts.signal.aborted) throw opts.signal.reason ?? err;
    if (err instanceof UpstreamError) throw err;
    const e = err as NodeJS.ErrnoException;
    throw new UpstreamError(0, `upstream connection failed: ${e.code ?? e.message}`, true);
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
export async function readJson(response: UpstreamResponse): Promise<unknown> {
  let text: string;
  try {
    text = await response.text();
  } catch (err) {
    throw new UpstreamError(0, `upstream response broke: ${(err as Error).message}`, true);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new UpstreamError(0, "upstream returned a body that is not JSON", true);
  }
}

/**
 * Yields the server-sent events of `response` in order. Returning early (or `controller` aborting)
 * drops the body, which closes the upstream connection; returning after the event `isLast` recognises
 * (the provider's end-of-response marker) reads the rest instead, so the connection is kept alive.
 */
export async function* sseEvents(
  response: UpstreamResponse,
  controller: AbortController,
  isLast?: (event: EventSourceMessage) => boolean,
): AsyncGenerator<EventSourceMessage> {
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (event) => queue.push(event) });
  const decoder = new TextDecoder();
  const iterator = response.chunks()[Symbol.asyncIterator]();
  let finished = false;
  let complete = false;
  const next = () => {
    const event = queue.shift()!;
    if (isLast?.(event)) complete = true;
    return event;
  };
  try {
    for (;;) {
      let chunk: IteratorResult<Buffer>;
      try {
        chunk = await iterator.next();
      } catch (err) {
        if (controller.signal.aborted) throw controller.signal.reason ?? err;
        throw new UpstreamError(0, `upstream stream broke: ${(err as Error).message}`, true);
      }
      if (chunk.done) break;
      parser.feed(decoder.decode(chunk.value, { stream: true }));
      while (queue.length > 0) yield next();
    }
    parser.feed(decoder.decode());
    parser.feed("\n\n");
    while (queue.length > 0) yield next();
    finished = true;
  } finally {
    if (!finished) {
      if (complete && !controller.signal.aborted) response.release();
      else {
        controller.abort();
        response.cancel();
      }
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
