/**
 * The Gemini dialect (docs/dialects.md, "Gemini"): `POST /api/v1beta/models/{model}:generateContent`,
 * `:streamGenerateContent` and `:countTokens`, what `@google/genai` and gemini-cli call with the base URL
 * `<portico>/api`, translated to the core's ChatService (GenerateContent, StreamGenerateContent,
 * CountGeminiTokens); the core routes them through the chat pipeline. The gateway only translates HTTP:
 *
 * - the path: `{model}` is everything between `models/` and the last `:` (a `/` in it may come encoded, `%2F`, or
 *   as it is: the SDK sends `models/google/gemini-2.5-flash:generateContent`); the method after the `:`;
 * - the key in `x-goog-api-key`, `?key=`, or `Authorization: Bearer` (which wins);
 * - `alt=sse` on `:streamGenerateContent`: server-sent events, each `data:` one GenerateContentResponse, as
 *   Google sends them (CRLF line ends); without it Google streams one JSON array, which Portico does not: 400
 *   naming `alt`;
 * - errors in Google's envelope `{error: {code, message, status}}` (with a `google.rpc.BadRequest` field
 *   violation naming the field of a 400); after the first chunk of a stream, one `data: {error}` and the end.
 *
 * One wildcard route serves the three methods (the router cannot tell `:generateContent` from
 * `:streamGenerateContent` within one path segment), so the OpenAPI document does not list them; docs/api.md does.
 */
import { ConnectError, createClient } from "@connectrpc/connect";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ChatService } from "../../gen/portico/chat/v1/chat_service_pb.js";
import type { GatewayContext } from "../context.js";
import { publicErrorFromConnect, streamFailure } from "../errors.js";
import { Reason, ruleOf } from "../../contract/reasons.js";
import { bodyFieldsFor, callOptionsFor, serverStream } from "../rpc.js";
import { passThroughValidator } from "../schemas.js";
import { HEARTBEAT } from "../sse-relay.js";
import { errorBody } from "../../core/chat/dialects/gemini-generate.js";
import { cacheHeaders } from "../../contract/overhead.js";
import { overheadHeaders, OVERHEAD_ROUTES } from "../overhead.js";
import { replyJson } from "./dialect-reply.js";

/** The methods served, by their name after the `:`. */
const METHODS = ["generateContent", "streamGenerateContent", "countTokens"] as const;
type Method = (typeof METHODS)[number];

/** Query parameters Google's clients send that Portico reads; any other is refused naming it. */
const QUERY = new Set(["key", "alt"]);

/** A failure the gateway finds itself (before the core is called): its reason, whose status the one table gives. */
class GatewayRefusal extends Error {
  readonly status: number;
  constructor(
    readonly reason: Reason,
    message: string,
    readonly field?: string,
  ) {
    super(message);
    this.status = ruleOf(reason).status;
  }
}

/** The HTTP error of `err` in Google's envelope. */
function googleError(req: FastifyRequest, reply: FastifyReply, err: unknown): FastifyReply {
  let status: number;
  let message: string;
  let field: string | undefined;
  let retryAfter = 0;
  if (err instanceof ConnectError) {
    const pub = publicErrorFromConnect(err);
    status = pub.status;
    message = pub.body.error.message;
    retryAfter = pub.retryAfterSeconds;
    const meta = pub.body.error.metadata;
    if (typeof meta?.field === "string") field = meta.field;
    if (status >= 500) req.log.error({ err }, "core call failed");
  } else if (err instanceof GatewayRefusal) {
    status = err.status;
    message = err.message;
    field = err.field;
  } else {
    const e = err as FastifyError;
    status = e.validation ? 400 : (e.statusCode ?? 500);
    message = status >= 500 ? "Internal Server Error" : e.message;
    if (status >= 500) req.log.error({ err }, "unhandled gateway error");
  }
  if (retryAfter > 0) reply.header("retry-after", String(retryAfter));
  const body = errorBody(status, message) as { error: Record<string, unknown> };
  if (field !== undefined) body.error.details = [{ "@type": "type.googleapis.com/google.rpc.BadRequest", fieldViolations: [{ field, description: message }] }];
  return reply.code(status).type("application/json; charset=utf-8").send(JSON.stringify(body));
}

/** The model and method of a request's path, and its query (refusing what Portico does not read). */
function parseTarget(req: FastifyRequest): { model: string; method: Method; query: URLSearchParams } {
  const url = req.raw.url ?? req.url;
  const q = url.indexOf("?");
  const path = q >= 0 ? url.slice(0, q) : url;
  const query = new URLSearchParams(q >= 0 ? url.slice(q + 1) : "");
  for (const name of query.keys()) if (!QUERY.has(name)) throw new GatewayRefusal(Reason.BAD_REQUEST, `The query parameter "${name}" is not supported (only key and alt)`, name);
  const marker = "/models/";
  const tail = path.slice(path.indexOf(marker) + marker.length);
  const colon = tail.lastIndexOf(":");
  const method = colon >= 0 ? tail.slice(colon + 1) : "";
  if (!(METHODS as readonly string[]).includes(method)) {
    throw new GatewayRefusal(Reason.NOT_FOUND, `Unknown method "${method}": Portico serves models/{model}:generateContent, :streamGenerateContent and :countTokens`);
  }
  let model: string;
  try {
    model = decodeURIComponent(tail.slice(0, colon));
  } catch {
    throw new GatewayRefusal(Reason.BAD_REQUEST, "The model in the path is not valid URL encoding", "model");
  }
  return { model, method: method as Method, query };
}

/** Call options: the caller's key from `x-goog-api-key` or `?key=` when no Authorization header came. */
function optionsFor(req: FastifyRequest, query: URLSearchParams, signal?: AbortSignal) {
  const opts = callOptionsFor(req, signal);
  const headers = opts.headers as Record<string, string>;
  const header = req.headers["x-goog-api-key"];
  const key = typeof header === "string" && header !== "" ? header : (query.get("key") ?? "");
  if (headers.authorization === undefined && key !== "") headers.authorization = `Bearer ${key}`;
  return opts;
}

/** Google frames its SSE events with CRLF line ends. */
const frame = (json: string) => `data: ${json}\r\n\r\n`;

export async function registerGeminiRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(ChatService, ctx.transport);

  api.post<{ Body: unknown }>(
    "/models/*",
    {
      validatorCompiler: passThroughValidator,
      errorHandler: (error: FastifyError, req: FastifyRequest, reply: FastifyReply) => googleError(req, reply, error),
      schema: { hide: true },
    },
    async (req, reply) => {
      let target: ReturnType<typeof parseTarget>;
      try {
        target = parseTarget(req);
      } catch (err) {
        return googleError(req, reply, err);
      }
      const { model, method, query } = target;
      const body = req.body ?? {};
      if (typeof body !== "object" || body === null || Array.isArray(body)) {
        return googleError(req, reply, new GatewayRefusal(Reason.BAD_REQUEST, "body must be a JSON object", "body"));
      }
      const json = body as Record<string, never>;
      const alt = query.get("alt");
      if (method === "streamGenerateContent" ? alt !== "sse" : alt !== null && alt !== "json") {
        const why =
          method === "streamGenerateContent"
            ? 'must be "sse": Portico streams server-sent events (alt=sse), not the JSON array Google sends without it'
            : 'must be "json" or left out';
        return googleError(req, reply, new GatewayRefusal(Reason.BAD_REQUEST, `alt ${why}`, "alt"));
      }

      if (method === "countTokens") {
        const res = await client.countGeminiTokens({ ...bodyFieldsFor(ctx, req, json), model }, optionsFor(req, query));
        reply.header("x-portico-token-count", res.exact ? "exact" : "estimate");
        return reply.type("application/json; charset=utf-8").send(JSON.stringify({ totalTokens: Number(res.totalTokens) }));
      }
      if (method === "generateContent") {
        return replyJson(ctx, reply, OVERHEAD_ROUTES.gemini, async (signal) => {
          const res = await client.generateContent({ ...bodyFieldsFor(ctx, req, json), model }, optionsFor(req, query, signal));
          return { json: res.responseJson, upstreamMs: res.upstreamMs, provider: res.provider, cache: res.cache };
        });
      }
      const call = ctx.relay.start(req, reply);
      const stream = serverStream(ctx.transport, ChatService.method.streamGenerateContent, { ...bodyFieldsFor(ctx, req, json), model }, optionsFor(req, query, call.signal));
      await call.run(stream, {
        name: "gemini",
        framed: true,
        openAfterMs: ctx.streamOpenAfterMs,
        openHeaders: (first) => (first && first.chunksJson.length > 0 ? { ...overheadHeaders(ctx, reply, OVERHEAD_ROUTES.gemini, first.upstreamMs, first.provider), ...cacheHeaders(first.cache) } : undefined),
        render: (msg) => (msg.chunksJson.length === 0 ? HEARTBEAT : msg.chunksJson.map(frame).join("")),
        onError: (err, shutdown) => {
          const { status, body } = streamFailure(err, shutdown, req.log, "gemini");
          return [frame(JSON.stringify(errorBody(status, body.error.message)))];
        },
      });
    },
  );
}
