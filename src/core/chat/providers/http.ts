/**
 * HTTP plumbing shared by the provider adapters: one POST with JSON, classified failures, and an SSE
 * reader whose early exit aborts the upstream request, over node:http(s) with keep-alive agents. The credential only ever travels in request headers; `redact` strips it from anything
 * the provider echoes back before it reaches an error.
 */
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import { urlToHttpOptions } from "node:url";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { UpstreamError, isRetryableStatus, type UpstreamCall } from "./types.js";

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
  /**
   * The response must begin (status line and headers) this long after the request was sent, or the call fails
   * with a retryable `UpstreamError` whose `timedOut` is true; unset: only the idle limit applies.
   */
  firstByteTimeoutMs?: number;
  /** The TCP connection must be established this long after the request began; default {@link UPSTREAM_CONNECT_TIMEOUT_MS}. */
  connectTimeoutMs?: number;
}

/** A provider that does not accept the connection within this is abandoned (a retryable timeout). */
export const UPSTREAM_CONNECT_TIMEOUT_MS = 10_000;

/**
 * The time limits of one call (docs/operations.md): the operator's per-provider limits (`call.limits`) where set,
 * else the attempt's (the execute stage's first-byte limit, the default idle and connect limits). A provider's
 * first-byte limit applies to streamed calls only (a non-streamed answer begins when it is whole).
 */
export function upstreamTimeouts(call: Pick<UpstreamCall, "firstByteTimeoutMs" | "limits">, streamed: boolean): Pick<PostOptions, "firstByteTimeoutMs" | "idleTimeoutMs" | "connectTimeoutMs"> {
  const l = call.limits;
  if (l === undefined) return { firstByteTimeoutMs: call.firstByteTimeoutMs };
  return {
    firstByteTimeoutMs: streamed && l.firstByteMs !== undefined ? l.firstByteMs : call.firstByteTimeoutMs,
    ...(l.idleMs !== undefined ? { idleTimeoutMs: l.idleMs } : {}),
    ...(l.connectMs !== undefined ? { connectTimeoutMs: l.connectMs } : {}),
  };
}

/** Like undici's headers and body timeouts (which `fetch` applied before): 300 s without a byte fails the call. */
export const UPSTREAM_IDLE_TIMEOUT_MS = 300_000;

/** Longest wait a provider's `Retry-After` may impose on one credential (a bogus value cannot lock it out for days). */
export const MAX_RETRY_AFTER_MS = 3_600_000;

/**
 * The wait a 429/503 asks for: `retry-after-ms` (OpenAI) or `Retry-After` (seconds or an HTTP date), capped at
 * {@link MAX_RETRY_AFTER_MS}; undefined when absent or unreadable.
 */
export function retryAfterMs(headers: IncomingMessage["headers"], now = Date.now()): number | undefined {
  const ms = headers["retry-after-ms"];
  if (typeof ms === "string" && /^\d+(\.\d+)?$/.test(ms.trim())) return Math.min(Math.ceil(Number(ms)), MAX_RETRY_AFTER_MS);
  const value = headers["retry-after"];
  if (typeof value !== "string" || value.trim() === "") return undefined;
  const text = value.trim();
  let wait: number;
  if (/^\d+(\.\d+)?$/.test(text)) wait = Math.ceil(Number(text) * 1000);
  else {
    const at = Date.parse(text);
    if (Number.isNaN(at)) return undefined;
    wait = at - now;
  }
  return Math.min(Math.max(wait, 0), MAX_RETRY_AFTER_MS);
}

/**
 * A fast test for "the key may be in this text" and its replacement, for every streamed event: one
 * `String.prototype.includes` per form the key can take in JSON text (as is, and JSON-escaped when it holds a
 * character JSON escapes), so an event without the key costs one substring search.
 */
export function keyScrubber(apiKey: string): ((text: string) => string) | undefined {
  if (!apiKey || apiKey.length < 4) return undefined;
  const escaped = JSON.stringify(apiKey).slice(1, -1);
  const slashes = escaped.replaceAll("/", "\\/");
  const forms = [...new Set([apiKey, escaped, slashes])];
  if (forms.length === 1) return (text) => (text.includes(apiKey) ? text.split(apiKey).join("[redacted]") : text);
  return (text) => {
    for (const form of forms) if (text.includes(form)) text = text.split(form).join("[redacted]");
    return text;
  };
}

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
  /** The response headers (lower-case names). */
  headers: IncomingMessage["headers"];
  /** The body as it arrives; pauses the socket while the consumer is not reading (backpressure). */
  chunks(): AsyncIterable<Buffer>;
  /** Drops the body and the connection it arrives on. */
  cancel(): void;
  /** Reads what is left of a body no longer needed, so the connection can serve the next request. */
  release(): void;
}

/**
 * Idle pooled connections are closed after {@link KEEPALIVE_IDLE_MS} (or one second before the time a server's
 * `Keep-Alive: timeout=N` announces, when shorter: Node's agent reads the hint once `timeout` is set), so a
 * connection is rarely reused just as the server closes it.
 */
export const KEEPALIVE_IDLE_MS = 4_000;

const agents = {
  http: new http.Agent({ keepAlive: true, maxFreeSockets: 256, scheduling: "lifo", timeout: KEEPALIVE_IDLE_MS }),
  https: new https.Agent({ keepAlive: true, maxFreeSockets: 256, scheduling: "lifo", timeout: KEEPALIVE_IDLE_MS }),
};

/** What `http.request` takes of a URL, for the URLs most recently called (a provider's endpoint is the same every time). */
type Target = ReturnType<typeof urlToHttpOptions> & { secure: boolean };
const TARGET_CACHE_SIZE = 64;
const targets = new Map<string, Target>();

/**
 * The request options of `url`, parsed once per URL: `new URL()` and its conversion to request options cost
 * more than the rest of building the request (profile in bench/README.md).
 */
function targetOf(url: string): Target {
  let t = targets.get(url);
  if (t) return t;
  const parsed = new URL(url);
  t = { ...urlToHttpOptions(parsed), secure: parsed.protocol === "https:" };
  if (targets.size >= TARGET_CACHE_SIZE) targets.delete(targets.keys().next().value!);
  targets.set(url, t);
  return t;
}

/**
 * One POST, sent at most once unless it provably did not leave. A kept-alive connection the upstream closed
 * while it sat idle can fail when reused; the request is sent again on a fresh connection only when not one
 * byte of it was written to the reused connection (the failure came first). A connection that fails after
 * the request was written (a reset before the response) is never re-sent here: the provider may have
 * received and billed it. Errors while connecting (refused, DNS, TLS) are not re-sent either; the attempt
 * loop moves on to the next credential.
 */
function send(
  url: Target,
  headers: Record<string, string>,
  payload: string,
  signal: AbortSignal,
  idleMs: number,
  firstByteMs: number | undefined,
  connectMs: number,
  retried = false,
): Promise<IncomingMessage> {
  const secure = url.secure;
  if (!secure && url.protocol !== "http:") return Promise.reject(new UpstreamError(0, `unsupported upstream URL scheme ${url.protocol}`, false));
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const req = (secure ? https : http).request({
      ...url,
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
    let firstByte: NodeJS.Timeout | undefined;
    const detach = () => {
      clearTimeout(firstByte);
      signal.removeEventListener("abort", onAbort);
    };
    req.setTimeout(idleMs, () => req.destroy(new UpstreamError(0, `upstream sent nothing for ${Math.round(idleMs / 1000)} s`, true, undefined, { timedOut: true })));
    if (firstByteMs !== undefined) {
      firstByte = setTimeout(
        () => req.destroy(new UpstreamError(0, `upstream sent no response within ${seconds(firstByteMs)}`, true, undefined, { timedOut: true })),
        firstByteMs,
      );
    }
    // Bytes the reused connection had carried before this request: unchanged at the failure = nothing was written.
    let writtenBefore: number | undefined;
    req.once("socket", (socket) => {
      writtenBefore = socket.bytesWritten;
      if (!socket.connecting) return; // a kept-alive connection
      const timer = setTimeout(
        () => req.destroy(new UpstreamError(0, `upstream did not accept the connection within ${seconds(connectMs)}`, true, undefined, { timedOut: true })),
        connectMs,
      );
      const clear = () => clearTimeout(timer);
      socket.once("connect", clear);
      socket.once("close", clear);
    });
    req.once("response", (res) => {
      response = res;
      clearTimeout(firstByte);
      res.once("end", detach);
      res.once("close", detach);
      resolve(res);
    });
    req.on("error", (err: NodeJS.ErrnoException) => {
      if (response) return; // after the response began, its own stream reports the failure
      detach();
      const unsent = req.reusedSocket && writtenBefore !== undefined && req.socket !== null && req.socket.bytesWritten === writtenBefore;
      if (!retried && unsent && !signal.aborted && !(err instanceof UpstreamError)) {
        resolve(send(url, headers, payload, signal, idleMs, firstByteMs, connectMs, true));
      } else if (req.reusedSocket && !unsent && !(err instanceof UpstreamError) && !signal.aborted) {
        reject(new UpstreamError(0, `upstream connection broke after the request was sent (${err.code ?? err.message}); not re-sent`, true, undefined, { sent: true }));
      } else reject(err);
    });
    req.end(payload);
  });
}

function seconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

function wrap(res: IncomingMessage): UpstreamResponse {
  const status = res.statusCode ?? 0;
  return {
    status,
    ok: status >= 200 && status < 300,
    headers: res.headers,
    // With listeners rather than `for await`: a Readable's async iterator costs several promises per read.
    text() {
      return new Promise<string>((resolve, reject) => {
        res.setEncoding("utf8");
        let out = "";
        const onData = (piece: string) => (out += piece);
        const onEnd = () => {
          cleanup();
          resolve(out);
        };
        const onError = (err: Error) => {
          cleanup();
          reject(err);
        };
        // Destroyed before the end (the connection broke, or the request was aborted): as the iterator did, fail.
        const onClose = () => {
          cleanup();
          if (res.readableEnded) resolve(out);
          else reject(res.errored ?? Object.assign(new Error("Premature close"), { code: "ERR_STREAM_PREMATURE_CLOSE" }));
        };
        const cleanup = () => {
          res.off("data", onData);
          res.off("end", onEnd);
          res.off("error", onError);
          res.off("close", onClose);
        };
        res.on("data", onData);
        res.once("end", onEnd);
        res.once("error", onError);
        res.once("close", onClose);
      });
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
    const headers = { "content-type": "application/json", ...opts.headers };
    response = wrap(await send(targetOf(opts.url), headers, JSON.stringify(opts.body), opts.signal, opts.idleTimeoutMs ?? UPSTREAM_IDLE_TIMEOUT_MS, opts.firstByteTimeoutMs, opts.connectTimeoutMs ?? UPSTREAM_CONNECT_TIMEOUT_MS));
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
  const wait = response.status === 429 || response.status === 503 ? retryAfterMs(response.headers) : undefined;
  throw new UpstreamError(response.status, redact(`upstream returned ${response.status}: ${message}`, opts.apiKey), isRetryableStatus(response.status), safe, {
    retryAfterMs: wait,
  });
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
 * (the provider's end-of-response marker) reads the rest instead, so the connection is kept alive. With
 * `apiKey`, every occurrence of the key in an event's data is replaced by `[redacted]` before it is yielded.
 */
export function sseEvents(
  response: UpstreamResponse,
  controller: AbortController,
  isLast?: (event: EventSourceMessage) => boolean,
  apiKey?: string,
): AsyncGenerator<EventSourceMessage> {
  return sseMap(response, controller, (event) => event, isLast, apiKey);
}

/** What a {@link sseMap} `map` returns for the provider's end-of-response marker: the stream ends there. */
export const SSE_END: unique symbol = Symbol("end of the upstream stream");

/**
 * {@link sseEvents} with each event turned into what `map` returns (undefined: nothing yielded; {@link SSE_END}: the
 * stream ends) in the same generator: an adapter's per-event work without an async-generator layer of its own
 * (one `await` and one result object per event less; bench/README.md).
 */
export async function* sseMap<T>(
  response: UpstreamResponse,
  controller: AbortController,
  map: (event: EventSourceMessage) => T | undefined | typeof SSE_END,
  isLast?: (event: EventSourceMessage) => boolean,
  apiKey?: string,
): AsyncGenerator<T> {
  const queue: EventSourceMessage[] = [];
  // The credential never reaches a consumer: each event's data is scrubbed like a non-streamed answer.
  const scrub = apiKey ? keyScrubber(apiKey) : undefined;
  const parser = createParser({
    onEvent: scrub
      ? (event) => {
          const data = scrub(event.data);
          queue.push(data === event.data ? event : { ...event, data });
        }
      : (event) => queue.push(event),
  });
  const decoder = new TextDecoder();
  const iterator = response.chunks()[Symbol.asyncIterator]();
  let finished = false;
  let complete = false;
  const next = () => {
    const event = queue.shift()!;
    if (isLast?.(event)) complete = true;
    return map(event);
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
      while (queue.length > 0) {
        const out = next();
        if (out === SSE_END) return;
        if (out !== undefined) yield out;
      }
    }
    parser.feed(decoder.decode());
    parser.feed("\n\n");
    while (queue.length > 0) {
      const out = next();
      if (out === SSE_END) return;
      if (out !== undefined) yield out;
    }
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
