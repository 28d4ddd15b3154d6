/**
 * A real HTTP server on port 0 that plays one model provider. The response comes from a `Script`
 * (text pieces, tool calls, finish, usage) rendered in the provider's own wire format; knobs make it
 * fail with a status before the first byte, break mid-stream, or pause between chunks. Every request
 * is recorded (method, url, headers, parsed body).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface ScriptToolCall {
  id: string;
  name: string;
  /** JSON text of the arguments; streamed in `argumentPieces` when given. */
  arguments: string;
  argumentPieces?: string[];
}

export interface Script {
  /** Text streamed piece by piece (joined for non-streaming responses). */
  text: string[];
  reasoning?: string[];
  toolCalls?: ScriptToolCall[];
  /** Finish in the provider's own vocabulary (e.g. `end_turn`, `MAX_TOKENS`, `length`). */
  finish: string;
  usage: { input: number; output: number; cached?: number; reasoning?: number; /** Anthropic only: cache_creation_input_tokens. */ cacheWrite?: number; /** Anthropic only: server_tool_use.web_search_requests. */ searches?: number };
  model?: string;
  /** Gemini only: the prompt is blocked (`promptFeedback.blockReason`, no candidates). */
  blockReason?: string;
  /**
   * The provider's answer written out in its own wire format, sent as it is (shapes the script cannot express,
   * such as a native web search's blocks and citations): `completion` for a non-streamed request, `events` (SSE
   * frames, already framed) for a streamed one.
   */
  raw?: { completion?: unknown; events?: string[] };
  /** Gemini only: a `thoughtSignature` on the first functionCall part, else on the last text part. */
  signature?: string;
}

export interface Knobs {
  /** Reply with this status and the provider's error body before any byte of a success. */
  failStatus?: number;
  failMessage?: string;
  /** Extra response headers of the `failStatus` reply (e.g. `retry-after`). */
  failHeaders?: Record<string, string>;
  /** Streams only: after this many content events, send the provider's in-stream error event. */
  failAfterChunks?: number;
  /** Streams only: after this many content events, destroy the socket without a goodbye. */
  dropAfterChunks?: number;
  /** Streams only: after this many events, send nothing more until the client goes away (a stalled stream). */
  stallAfterChunks?: number;
  /** Streams only: after this many content events, end the response cleanly (no end-of-stream marker). */
  endAfterChunks?: number;
  /** Hold the response this long before the status line (a slow provider); a client abort ends the wait. */
  headerDelayMs?: number;
  /** Pause before each streamed event. */
  chunkDelayMs?: number;
  /** Reply `failStatus` (default 500) to the requests this predicate picks (e.g. only a later turn of a tool loop). */
  failWhen?: (req: RecordedRequest) => boolean;
  /** Reply 401 with the provider's error body to requests authenticated with one of these keys. */
  rejectKeys?: string[];
}

export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: any;
}

export interface Wire {
  /** Renders an error body for `status` (the provider's error shape). */
  errorBody(status: number, message: string): unknown;
  /** Streaming: the SSE frames (already framed text) for the script, split into content events. */
  streamEvents(script: Script, req: RecordedRequest): string[];
  /** The in-stream error frame. */
  streamError(message: string): string;
  /** Non-streaming JSON body. */
  completion(script: Script, req: RecordedRequest): unknown;
  /** Whether the request asks for a stream. */
  isStream(req: RecordedRequest): boolean;
  /** Another endpoint of the provider (e.g. Anthropic's count_tokens): its JSON answer, or undefined for the chat endpoint. */
  other?(script: Script, req: RecordedRequest): unknown;
}

export interface FakeUpstream {
  url: string;
  requests: RecordedRequest[];
  /** TCP connections accepted so far (keep-alive reuse shows as fewer connections than requests). */
  connections: number;
  script: Script;
  /** When set, each chat request takes the next script of this queue (the last one repeats); else `script`. */
  scripts?: Script[];
  /** When set and it returns a script for a request, that script answers it (before `scripts` and `script`). */
  scriptFor?: (req: RecordedRequest) => Script | undefined;
  knobs: Knobs;
  /** Resolves once `count` (default 1) responses lost their client before their end (the client aborted). */
  clientAborted(count?: number): Promise<void>;
  /** Resolves once `count` (default 1) requests have been received (their bodies read and recorded). */
  received(count?: number): Promise<void>;
  close(): Promise<void>;
}

export const defaultScript = (): Script => ({
  text: ["Hello", ", ", "world"],
  finish: "stop",
  usage: { input: 11, output: 3 },
});

export async function startFake(wire: Wire, script: Script, knobs: Knobs = {}): Promise<FakeUpstream> {
  const requests: RecordedRequest[] = [];
  let abortWaiters: Array<{ count: number; resolve: () => void }> = [];
  let receiveWaiters: Array<{ count: number; resolve: () => void }> = [];
  let aborted = 0;
  const fake: FakeUpstream = {
    url: "",
    requests,
    connections: 0,
    script,
    knobs,
    clientAborted: (count = 1) =>
      aborted >= count ? Promise.resolve() : new Promise<void>((resolve) => abortWaiters.push({ count, resolve })),
    received: (count = 1) =>
      requests.length >= count ? Promise.resolve() : new Promise<void>((resolve) => receiveWaiters.push({ count, resolve })),
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
  const markAborted = () => {
    aborted += 1;
    const ready = abortWaiters.filter((w) => aborted >= w.count);
    abortWaiters = abortWaiters.filter((w) => aborted < w.count);
    for (const w of ready) w.resolve();
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    let body: unknown;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      body = raw;
    }
    const recorded: RecordedRequest = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body };
    requests.push(recorded);
    const arrived = receiveWaiters.filter((w) => requests.length >= w.count);
    receiveWaiters = receiveWaiters.filter((w) => requests.length < w.count);
    for (const w of arrived) w.resolve();
    const k = fake.knobs;
    if (k.headerDelayMs) {
      const gone = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), k.headerDelayMs);
        res.once("close", () => {
          clearTimeout(timer);
          resolve(true);
        });
      });
      if (gone) {
        markAborted();
        return;
      }
    }
    if (k.rejectKeys?.length) {
      const presented = [req.headers.authorization, req.headers["x-api-key"], req.headers["x-goog-api-key"], req.url].join(" ");
      if (k.rejectKeys.some((key) => presented.includes(key))) {
        res.writeHead(401, { "content-type": "application/json" });
        res.end(JSON.stringify(wire.errorBody(401, "invalid api key")));
        return;
      }
    }
    if (k.failWhen?.(recorded)) {
      const status = k.failStatus ?? 500;
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(wire.errorBody(status, k.failMessage ?? "fake upstream failure")));
      return;
    }
    if (k.failStatus) {
      res.writeHead(k.failStatus, { "content-type": "application/json", ...k.failHeaders });
      res.end(JSON.stringify(wire.errorBody(k.failStatus, k.failMessage ?? "fake upstream failure")));
      return;
    }
    const script =
      fake.scriptFor?.(recorded) ?? (fake.scripts?.length ? (fake.scripts.length > 1 ? fake.scripts.shift()! : fake.scripts[0]!) : fake.script);
    const other = wire.other?.(script, recorded);
    if (other !== undefined) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(other));
      return;
    }
    if (!wire.isStream(recorded)) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(script.raw?.completion ?? wire.completion(script, recorded)));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    res.flushHeaders();
    let closedEarly = false;
    let ended = false;
    res.on("close", () => {
      if (!ended) {
        closedEarly = true;
        markAborted();
      }
    });
    const events = script.raw?.events ?? wire.streamEvents(script, recorded);
    let sent = 0;
    for (const frame of events) {
      if (closedEarly) return;
      if (k.chunkDelayMs) await new Promise((r) => setTimeout(r, k.chunkDelayMs));
      if (closedEarly) return;
      if (k.failAfterChunks !== undefined && sent === k.failAfterChunks) {
        ended = true;
        res.end(wire.streamError(k.failMessage ?? "fake upstream failed mid-stream"));
        return;
      }
      if (k.endAfterChunks !== undefined && sent === k.endAfterChunks) {
        ended = true;
        res.end();
        return;
      }
      if (k.stallAfterChunks !== undefined && sent === k.stallAfterChunks) {
        await new Promise((r) => res.once("close", r));
        return;
      }
      if (k.dropAfterChunks !== undefined && sent === k.dropAfterChunks) {
        ended = true;
        res.socket?.destroy();
        return;
      }
      const ok = res.write(frame);
      sent += 1;
      if (!ok) await new Promise((r) => res.once("drain", r));
    }
    ended = true;
    res.end();
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(err));
    });
  });
  server.keepAliveTimeout = 5_000;
  server.on("connection", () => {
    fake.connections += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}

export const sse = (data: unknown, event?: string): string =>
  `${event ? `event: ${event}\n` : ""}data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`;

/**
 * The fake vector of input `i` with `dims` entries: (i + 1) / 2 + j / 8, exact in float32 (so a base64 round
 * trip gives the same numbers back).
 */
export const fakeVector = (i: number, dims = 4): number[] => Array.from({ length: dims }, (_, j) => (i + 1) / 2 + j / 8);
