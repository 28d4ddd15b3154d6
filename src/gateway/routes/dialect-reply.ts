/**
 * The reply plumbing the Anthropic Messages (messages.ts), OpenAI Responses (responses.ts) and, for its unary answer, Gemini (gemini.ts) routes share: the
 * core answers both in the same shapes (a unary answer as JSON text; a stream of messages each carrying whole
 * events `{type, dataJson}`), and each route adds only its dialect's errors and its credentials header.
 *
 * - A non-streamed answer: the core's JSON text as it is, with the overhead and cache headers.
 * - A stream: relayed by the SSE relay as whole SSE frames (`event:` and `data:` lines, no `[DONE]`), opened with
 *   the overhead and cache headers of the first message that carries events; a message without events is the
 *   core's keepalive.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { CallOptions, ConnectError } from "@connectrpc/connect";
import type { DescMessage, DescMethodServerStreaming, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import type { GatewayContext } from "../context.js";
import { abortOnClientClose, serverStream } from "../rpc.js";
import { HEARTBEAT } from "../sse-relay.js";
import { cacheHeaders, OVERHEAD_HEADER } from "../../contract/overhead.js";
import { overheadHeaders, overheadMs, type OverheadRoute } from "../overhead.js";

/** One event of a dialect's stream, as the core sends it. */
export interface DialectEvent {
  type: string;
  dataJson: string;
}

/** What the core answers a dialect's stream with (StreamMessageResponse, StreamResponseResponse). */
interface DialectStreamMessage {
  events: DialectEvent[];
  upstreamMs: number;
  provider: string;
  cache: string;
}

/** One server-sent event of a dialect: its name and its JSON text. */
export const frame = (type: string, dataJson: string) => `event: ${type}\ndata: ${dataJson}\n\n`;

/** A unary answer: the core's JSON text, with the overhead and cache headers. */
export async function replyJson(
  ctx: GatewayContext,
  reply: FastifyReply,
  route: OverheadRoute,
  call: (signal: AbortSignal) => Promise<{ json: string; upstreamMs: number; provider: string; cache: string }>,
): Promise<FastifyReply> {
  const watch = abortOnClientClose(reply);
  try {
    const res = await call(watch.signal);
    reply.header(OVERHEAD_HEADER, overheadMs(ctx, reply, route, res.upstreamMs, res.provider));
    reply.headers(cacheHeaders(res.cache));
    return reply.type("application/json; charset=utf-8").send(res.json);
  } finally {
    watch.release();
  }
}

/**
 * Relays the core's stream as the dialect's server-sent events. `onEvent` sees each event as it is written;
 * `onError` gives the frames ending a stream broken after it opened (`shutdown`: the server is stopping).
 */
export async function relayEvents<I extends DescMessage, O extends DescMessage>(
  ctx: GatewayContext,
  req: FastifyRequest,
  reply: FastifyReply,
  stream: {
    method: DescMethodServerStreaming<I, O>;
    input: MessageInitShape<I>;
    options: (signal: AbortSignal) => CallOptions;
    name: string;
    route: OverheadRoute;
    onEvent?: (e: DialectEvent) => void;
    onError: (err: ConnectError, shutdown: boolean) => string[];
  },
): Promise<void> {
  const call = ctx.relay.start(req, reply);
  const source = serverStream(ctx.transport, stream.method, stream.input, stream.options(call.signal)) as unknown as {
    next(): Promise<IteratorResult<MessageShape<O> & DialectStreamMessage>>;
    return(): Promise<void>;
  };
  const onEvent = stream.onEvent;
  await call.run(source, {
    name: stream.name,
    framed: true,
    openAfterMs: ctx.streamOpenAfterMs,
    openHeaders: (first) =>
      first && first.events.length > 0 ? { ...overheadHeaders(ctx, reply, stream.route, first.upstreamMs, first.provider), ...cacheHeaders(first.cache) } : undefined,
    render: (msg) => {
      if (msg.events.length === 0) return HEARTBEAT;
      let out = "";
      for (const e of msg.events) {
        onEvent?.(e);
        out += frame(e.type, e.dataJson);
      }
      return out;
    },
    onError: stream.onError,
  });
}
