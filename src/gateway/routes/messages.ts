/**
 * The Anthropic Messages dialect (docs/dialects.md): `POST /api/v1/messages` and
 * `POST /api/v1/messages/count_tokens`, translated to the core's ChatService (CreateMessage, StreamMessage,
 * CountMessageTokens); the core routes them through the chat pipeline. The gateway only translates HTTP:
 *
 * - the key in `x-api-key` (Anthropic's header) or `Authorization: Bearer`;
 * - `anthropic-beta` / `anthropic-version` passed to the core (and by it to Anthropic endpoints); `?beta=true`
 *   (Claude Code's) accepted;
 * - errors in Anthropic's envelope `{type: "error", error: {type, message}}` with the status of the one reason
 *   table; after the first event of a stream, an `event: error` and the end of the stream.
 */
import { ConnectError } from "@connectrpc/connect";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ChatService } from "../../gen/portico/chat/v1/chat_service_pb.js";
import { OVERHEAD_ROUTES } from "../overhead.js";
import type { GatewayContext } from "../context.js";
import { publicErrorFromConnect, streamFailure } from "../errors.js";
import { abortOnClientClose, bodyFieldsFor, modelCallOptionsFor } from "../rpc.js";
import { passThroughValidator } from "../schemas.js";
import { requestParameterSchemas } from "../../contract/requests/parameters.js";
import { requestSchemas } from "../../contract/requests/index.js";
import { errorBody, errorTypeOf } from "../../core/chat/dialects/anthropic-messages.js";
import { createClient } from "@connectrpc/connect";
import { frame, relayEvents, replyJson } from "./dialect-reply.js";

const anthropicErrorSchema = {
  type: "object",
  required: ["type", "error"],
  properties: {
    type: { type: "string", enum: ["error"] },
    error: { type: "object", required: ["type", "message"], properties: { type: { type: "string" }, message: { type: "string" } } },
    request_id: { type: "string" },
  },
} as const;
const anthropicErrors = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [s, anthropicErrorSchema]));

const messageSchema = {
  type: "object",
  additionalProperties: true,
  properties: {
    id: { type: "string", description: "The generation id (`GET /api/v1/generation?id=`)." },
    type: { type: "string", enum: ["message"] },
    role: { type: "string", enum: ["assistant"] },
    model: { type: "string" },
    content: { type: "array", items: { type: "object", additionalProperties: true } },
    stop_reason: { type: ["string", "null"] },
    stop_sequence: { type: ["string", "null"] },
    usage: { type: "object", additionalProperties: true },
  },
} as const;
const eventSchema = { type: "object", additionalProperties: true, properties: { type: { type: "string" } } } as const;

const headersSchema = {
  type: "object",
  properties: {
    "x-api-key": { type: "string", description: "The API key (Anthropic's header); `Authorization: Bearer` also works." },
    "anthropic-version": { type: "string", description: "Passed to Anthropic endpoints (default 2023-06-01)." },
    "anthropic-beta": { type: "string", description: "Passed to Anthropic endpoints." },
  },
} as const;

/** The HTTP error of `err` in Anthropic's envelope. */
function anthropicError(req: FastifyRequest, reply: FastifyReply, err: unknown): FastifyReply {
  let status: number;
  let message: string;
  let retryAfter = 0;
  const connectErr = err instanceof ConnectError ? err : undefined;
  if (connectErr) {
    const pub = publicErrorFromConnect(connectErr);
    status = pub.status;
    message = pub.body.error.message;
    retryAfter = pub.retryAfterSeconds;
    if (status >= 500) req.log.error({ err: connectErr }, "core call failed");
  } else {
    const e = err as FastifyError;
    status = e.validation ? 400 : (e.statusCode ?? 500);
    message = status >= 500 ? "Internal Server Error" : e.message;
    if (status >= 500) req.log.error({ err }, "unhandled gateway error");
  }
  if (retryAfter > 0) reply.header("retry-after", String(retryAfter));
  return reply
    .code(status)
    .type("application/json; charset=utf-8")
    .send(JSON.stringify({ type: "error", error: { type: errorTypeOf(status), message }, request_id: String(req.id) }));
}

/** Call options: the caller's key from `x-api-key` when no Authorization header came (rpc.ts `modelCallOptionsFor`). */
const optionsFor = modelCallOptionsFor;

function dialectHeaders(req: FastifyRequest): { anthropicBeta: string; anthropicVersion: string } {
  const h = (name: string) => {
    const v = req.headers[name];
    return Array.isArray(v) ? v.join(",") : (v ?? "");
  };
  return { anthropicBeta: h("anthropic-beta"), anthropicVersion: h("anthropic-version") };
}

export async function registerMessagesRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(ChatService, ctx.transport);
  const schemas = requestSchemas(ctx.brand);
  const errorHandler = (error: FastifyError, req: FastifyRequest, reply: FastifyReply) => anthropicError(req, reply, error);

  api.post<{ Body: unknown }>(
    "/messages",
    {
      validatorCompiler: passThroughValidator,
      errorHandler,
      schema: {
        operationId: "createMessage",
        summary: "Create a message (Anthropic Messages dialect)",
        description:
          "An Anthropic Messages request, routed like chat completions (`model` is `<provider>/<model>` or `@preset/<slug>`; `models` and " +
          "`provider` as in chat completions) to any provider, translated both ways (docs/dialects.md). With `stream: true` the answer is " +
          "Anthropic's server-sent events (`message_start`, `ping`, `content_block_*`, `message_delta`, `message_stop`; `error` after the first " +
          "event). Errors use Anthropic's envelope `{type: \"error\", error: {type, message}}`.",
        tags: ["chat"],
        ...requestParameterSchemas("createMessage"),
        headers: headersSchema,
        body: schemas.createMessage,
        response: {
          200: {
            description: "`stream: false`: one message (JSON). `stream: true`: text/event-stream of Messages events.",
            content: { "application/json": { schema: messageSchema }, "text/event-stream": { schema: eventSchema } },
          },
          ...anthropicErrors(400, 401, 403, 404, 429, 502, 504),
        },
      },
    },
    async (req, reply) => {
      const body = req.body;
      if (typeof body !== "object" || body === null || Array.isArray(body)) {
        return anthropicError(req, reply, { statusCode: 400, message: "body must be a JSON object" });
      }
      const json = body as Record<string, never>;
      const input = { ...bodyFieldsFor(ctx, req, json), ...dialectHeaders(req) };
      if ((body as { stream?: unknown }).stream !== true) {
        return replyJson(ctx, reply, OVERHEAD_ROUTES.messages, async (signal) => {
          const res = await client.createMessage(input, optionsFor(req, signal));
          return { json: res.messageJson, upstreamMs: res.upstreamMs, provider: res.provider, cache: res.cache };
        });
      }
      await relayEvents(ctx, req, reply, {
        method: ChatService.method.streamMessage,
        input,
        options: (signal) => optionsFor(req, signal),
        name: "messages",
        route: OVERHEAD_ROUTES.messages,
        onError: (err, shutdown) => {
          const { status, body } = streamFailure(err, shutdown, req.log, "messages");
          return [frame("error", JSON.stringify(errorBody(status, body.error.message)))];
        },
      });
    },
  );

  api.post<{ Body: unknown }>(
    "/messages/count_tokens",
    {
      validatorCompiler: passThroughValidator,
      errorHandler,
      schema: {
        operationId: "countMessageTokens",
        summary: "Count a Messages prompt's input tokens (Anthropic shape)",
        description:
          "The prompt fields of a Messages request. Counted by the provider when the first endpoint the request would be routed to offers " +
          "counting (Anthropic's `count_tokens`); otherwise Portico's estimate (docs/dialects.md). The header `x-portico-token-count` says " +
          "which: `exact` or `estimate`.",
        tags: ["chat"],
        ...requestParameterSchemas("countMessageTokens"),
        headers: headersSchema,
        body: schemas.countMessageTokens,
        response: {
          200: { type: "object", required: ["input_tokens"], properties: { input_tokens: { type: "integer" } } },
          ...anthropicErrors(400, 401, 403, 404, 429, 502),
        },
      },
    },
    async (req, reply) => {
      const body = req.body;
      if (typeof body !== "object" || body === null || Array.isArray(body)) {
        return anthropicError(req, reply, { statusCode: 400, message: "body must be a JSON object" });
      }
      const watch = abortOnClientClose(reply);
      try {
        const res = await client.countMessageTokens({ ...bodyFieldsFor(ctx, req, body as Record<string, never>), ...dialectHeaders(req) }, optionsFor(req, watch.signal));
        reply.header("x-portico-token-count", res.exact ? "exact" : "estimate");
        return { input_tokens: Number(res.inputTokens) };
      } finally {
        watch.release();
      }
    },
  );
}
