/**
 * Call options for RPCs made on behalf of an HTTP request: the caller's credentials and session
 * header pass through unchanged (the core decides everything about auth), the chat time budget header
 * (`x-request-timeout-ms`, checked by the core), plus the request id and, when tracing is on, the request's span.
 */
import type { DescMessage, DescMethodServerStreaming, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import type { CallOptions, Transport } from "@connectrpc/connect";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { GatewayContext } from "./context.js";

import { SESSION_HEADERS } from "../contract/session-headers.js";
import { LightAbortController } from "../lib/light-abort.js";
import { oneValue } from "../lib/one-value.js";
import { PULL, type Pullable, type Pulled } from "../lib/pull.js";
import { traceCallValues } from "../lib/tracing.js";

/** The session headers go through as sent: the core reads the first present (src/contract/session-headers.ts). */
const FORWARDED_HEADERS = ["authorization", ...SESSION_HEADERS, "x-request-timeout-ms"] as const;

export function callOptionsFor(req: FastifyRequest, signal?: AbortSignal): CallOptions {
  const headers: Record<string, string> = { "x-request-id": String(req.id) };
  for (const name of FORWARDED_HEADERS) {
    const value = req.headers[name];
    if (typeof value === "string") headers[name] = value;
  }
  const opts: CallOptions = { headers };
  // Tracing on: the request's span goes with the call (its context values), the core's spans continue it: handed over
  // as is in process, as a W3C `traceparent` header over gRPC (src/lib/tracing.ts `withTraceHeaders`).
  const values = traceCallValues(req);
  if (values) opts.contextValues = values;
  if (signal) opts.signal = signal;
  return opts;
}

/** The headers a model endpoint takes its key from, after `Authorization: Bearer`: Anthropic's, then Google's. */
const MODEL_KEY_HEADERS = ["x-api-key", "x-goog-api-key"] as const;

/**
 * Call options for a model endpoint (chat completions, Messages, count_tokens, Responses, embeddings, the Gemini
 * dialect): as `callOptionsFor`, with the key also taken from `x-api-key` or `x-goog-api-key` when no
 * Authorization header came (the headers agents send; an intern run's credential comes in any of the three,
 * docs/interns.md). A new model endpoint opts in by calling this in place of `callOptionsFor`; the core decides
 * which procedures accept a run credential (src/core/auth.ts `acceptRunCredential`).
 */
export function modelCallOptionsFor(req: FastifyRequest, signal?: AbortSignal): CallOptions {
  const opts = callOptionsFor(req, signal);
  const headers = opts.headers as Record<string, string>;
  if (headers.authorization === undefined) {
    for (const name of MODEL_KEY_HEADERS) {
      const key = req.headers[name];
      if (typeof key === "string" && key !== "") {
        headers.authorization = `Bearer ${key}`;
        break;
      }
    }
  }
  return opts;
}

/**
 * The text to send the core as a request's `body_json` (chat completions, Messages, count_tokens, Responses, the
 * Gemini dialect): the JSON text the gateway received, when the core is over the wire (GatewayOptions.coreOverTheWire;
 * far cheaper to encode and decode than a Struct) and the request came with a JSON body; otherwise undefined, and
 * the parsed body goes as `body` (handed over as is in process).
 */
export function bodyJsonFor(ctx: GatewayContext, req: FastifyRequest): string | undefined {
  return ctx.jsonBodies && req.jsonText !== "" ? req.jsonText : undefined;
}

/** A dialect request's body fields: `{bodyJson}` when bodyJsonFor gives the text, else `{body}`. */
export function bodyFieldsFor<B>(ctx: GatewayContext, req: FastifyRequest, body: B): { body: B } | { bodyJson: string } {
  const text = bodyJsonFor(ctx, req);
  return text === undefined ? { body } : { bodyJson: text };
}

/**
 * A server-streaming call straight on the transport, read with `next()`: the messages arrive without the
 * promise client's wrapper (a down-levelled async generator costing several promise turns per message), and the
 * request is one value, not connect's `createAsyncIterable` generator (a transport of this process takes it as is).
 * Errors, including ones raised before the first message, surface from `next()`, as with the client.
 */
export function serverStream<I extends DescMessage, O extends DescMessage>(
  transport: Transport,
  method: DescMethodServerStreaming<I, O>,
  input: MessageInitShape<I>,
  options: CallOptions,
): { next(): Promise<IteratorResult<MessageShape<O>>>; pull(): Pulled<MessageShape<O>>; return(): Promise<void> } {
  let iterator: AsyncIterator<MessageShape<O>> | undefined;
  const opened = transport
    .stream(method, options.signal, options.timeoutMs, options.headers, oneValue(input), options.contextValues)
    .then((res) => (iterator = res.message[Symbol.asyncIterator]()));
  opened.catch(() => undefined); // reported by the first next()
  return {
    // Not an async wrapper: a promise and a turn per message less once the stream is open.
    next: () => (iterator ? iterator.next() : opened.then((it) => it.next())),
    /** `next()`, with a message at hand as it is (the in-process transport's `[PULL]()`, src/lib/pull.ts); may throw. */
    pull: () => {
      if (iterator === undefined) return opened.then((it) => it.next());
      const p = (iterator as Partial<Pullable<MessageShape<O>>>)[PULL];
      return p !== undefined ? p.call(iterator) : iterator.next();
    },
    /** Stops reading: the call ends (in process, the handler's generator finishes and its signal aborts). */
    async return() {
      const it = iterator ?? (await opened.catch(() => undefined));
      await it?.return?.();
    },
  };
}

/**
 * Watches the HTTP client of `reply`: the signal aborts when the client goes away before the reply finished
 * (the RPC made with it stops, and with it the upstream work). `release()` stops watching.
 */
export function abortOnClientClose(reply: FastifyReply): { signal: AbortSignal; release(): void } {
  const ac = new LightAbortController();
  const onClose = () => {
    if (!reply.raw.writableFinished) ac.abort();
  };
  const raw = reply.raw as WatchedResponse;
  if (raw[kClientClose] === null) {
    // The gateway's own close listener (watchClientClose) calls it: no listener added and removed per request.
    raw[kClientClose] = onClose;
    return { signal: ac.signal, release: () => void (raw[kClientClose] = null) };
  }
  raw.on("close", onClose);
  return { signal: ac.signal, release: () => raw.off("close", onClose) };
}

const kClientClose = Symbol("portico client close");
type WatchedResponse = FastifyReply["raw"] & { [kClientClose]?: (() => void) | null };

/**
 * The gateway's one `close` listener of a response (its onRequest hook): runs `onClose`, then what
 * {@link abortOnClientClose} left to run on that response.
 */
export function watchClientClose(reply: FastifyReply, onClose: () => void): void {
  const raw = reply.raw as WatchedResponse;
  raw[kClientClose] = null;
  raw.once("close", () => {
    onClose();
    const then = raw[kClientClose];
    raw[kClientClose] = null;
    then?.();
  });
}

/**
 * The first message of a stream answering `reply`. An error before it is thrown (it becomes an HTTP error in
 * the envelope); when the client already left, nobody reads the answer: the reply is dropped and the
 * result is undefined.
 */
export async function firstMessage<T>(
  stream: { next(): Promise<IteratorResult<T>> },
  reply: FastifyReply,
  client: { signal: AbortSignal; release(): void },
): Promise<IteratorResult<T> | undefined> {
  try {
    return await stream.next();
  } catch (err) {
    client.release();
    if (!client.signal.aborted) throw err;
    reply.hijack();
    reply.raw.destroy();
    return undefined;
  }
}
