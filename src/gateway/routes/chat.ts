/**
 * `POST /api/v1/chat/completions`: the OpenAI chat-completions operation, routed by the core's ChatService
 * to upstream providers with the caller's provider credentials (issue 11). `stream: false` answers one
 * `chat.completion`; `stream: true` answers server-sent events, one `chat.completion.chunk` per `data:`
 * line, then `data: [DONE]`. A failure before the first chunk is an HTTP error in the envelope; after it,
 * a chunk with `finish_reason: "error"`. Writes wait for the socket (backpressure), and a client that
 * leaves aborts the RPC and with it the upstream request.
 */
import { ConnectError, createClient } from "@connectrpc/connect";
import { cacheHeaders, OVERHEAD_HEADER, UPSTREAM_MS_METADATA } from "../../contract/overhead.js";
import { overheadHeaders, overheadMs, OVERHEAD_ROUTES } from "../overhead.js";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { create } from "@bufbuild/protobuf";
import {
  ChatService,
  CreateChatCompletionRequestSchema,
  StreamChatCompletionRequestSchema,
  type CreateChatCompletionRequest,
  type StreamChatCompletionRequest,
} from "../../gen/portico/chat/v1/chat_service_pb.js";
import { presentModel } from "../presenters/models.js";
import { requestSchemas } from "../../contract/requests/index.js";
import type { GatewayContext } from "../context.js";
import { publicError, streamFailure } from "../errors.js";
import { abortOnClientClose, bodyJsonFor, callOptionsFor, modelCallOptionsFor, serverStream } from "../rpc.js";
import { contractRoute, errorResponses, passThroughValidator } from "../schemas.js";
import { HEARTBEAT } from "../sse-relay.js";

const NOT_AN_OBJECT = publicError(400, "Request body must be a JSON object");

/** The response objects are the providers' OpenAI-shaped objects; the schema lists the fixed fields. */
const completionSchema = {
  type: "object",
  additionalProperties: true,
  properties: {
    id: { type: "string" },
    object: { type: "string", enum: ["chat.completion"] },
    created: { type: "integer" },
    model: { type: "string" },
    provider: { type: "string", description: "The provider that served the request." },
    choices: { type: "array", items: { type: "object", additionalProperties: true } },
    usage: { type: "object", additionalProperties: true },
  },
} as const;
const chunkSchema = {
  type: "object",
  additionalProperties: true,
  properties: {
    id: { type: "string" },
    object: { type: "string", enum: ["chat.completion.chunk"] },
    created: { type: "integer" },
    model: { type: "string" },
    provider: { type: "string" },
    choices: { type: "array", items: { type: "object", additionalProperties: true } },
    usage: { type: ["object", "null"], additionalProperties: true },
    error: { type: "object", additionalProperties: true },
    server_tool_activity: {
      type: "object",
      additionalProperties: true,
      description:
        "Progress of a server tool while it runs (docs/plugins.md, \"Streaming\"), on a chunk with empty `choices`: " +
        "`{turn, call_id, type, name, status: running | completed | failed, arguments?, summary?, ms?}`.",
    },
  },
} as const;

export async function registerChatRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(ChatService, ctx.transport);
  const modelsContract = contractRoute("listModels");
  api.get<{ Querystring: { offset?: number; limit?: number } }>(
    "/models",
    {
      validatorCompiler: modelsContract.validatorCompiler,
      schema: {
        operationId: "listModels",
        summary: "What the caller can route to",
        description:
          "The real-world service's model list (and OpenAI's `object`/`owned_by`): the workspace's presets as `@preset/<slug>`, then one entry " +
          "per catalog model the calling key can reach (a BYOK credential it may use, or the operator's shared key, allows the provider of one " +
          "of its endpoints, unless an `is_required` credential removes it) under its canonical slug, with `pricing` and `top_provider` of " +
          "its cheapest reachable endpoint; ids the catalog does not describe (`<provider>/*`, an allowed model the catalog lacks) with " +
          "`context_length` null and prices \"-1\". `offset` and `limit` page the list as @openrouter/sdk sends them (the one list outside the cursor rule; " +
          "docs/api.md#pagination, docs/catalog.md).",
        tags: ["chat"],
        ...modelsContract.schema,
        response: {
          200: {
            type: "object",
            required: ["object", "data", "total_count", "links"],
            properties: {
              object: { type: "string", enum: ["list"] },
              total_count: { type: "integer", description: "Entries without offset and limit." },
              links: { type: "object", properties: { next: { type: ["string", "null"], description: "The next page's path, or null." } } },
              data: {
                type: "array",
                items: {
                  type: "object",
                  required: ["id", "object", "created", "owned_by", "canonical_slug", "name", "context_length", "architecture", "pricing", "supported_parameters", "top_provider"],
                  properties: {
                    id: { type: "string" },
                    object: { type: "string", enum: ["model"] },
                    created: { type: "integer" },
                    owned_by: { type: "string" },
                    canonical_slug: { type: "string" },
                    name: { type: "string" },
                    description: { type: "string" },
                    context_length: { type: ["integer", "null"] },
                    architecture: {
                      type: "object",
                      properties: {
                        modality: { type: "string" },
                        input_modalities: { type: "array", items: { type: "string" } },
                        output_modalities: { type: "array", items: { type: "string" } },
                        tokenizer: { type: "string" },
                      },
                    },
                    pricing: {
                      type: "object",
                      description: "USD per token (per request, per image) as decimal strings; \"-1\" when it depends on the model reached",
                      properties: Object.fromEntries(
                        ["prompt", "completion", "request", "image", "input_cache_read", "input_cache_write", "internal_reasoning", "web_search"].map((k) => [k, { type: "string" }]),
                      ),
                    },
                    supported_parameters: { type: "array", items: { type: "string" } },
                    top_provider: {
                      type: "object",
                      properties: { context_length: { type: ["integer", "null"] }, max_completion_tokens: { type: ["integer", "null"] }, is_moderated: { type: "boolean" } },
                    },
                    per_request_limits: { type: "null" },
                    default_parameters: { type: "null" },
                    supported_voices: { type: "null" },
                    links: { type: "object", properties: { details: { type: "string" } } },
                  },
                },
              },
            },
          },
          ...errorResponses(400, 401, 500),
        },
      },
    },
    async (req) => {
      const offset = req.query.offset ?? 0;
      const limit = req.query.limit ?? 0;
      const res = await client.listModels({ offset, limit }, callOptionsFor(req));
      const end = offset + res.models.length;
      return {
        object: "list",
        data: res.models.map(presentModel),
        total_count: res.totalCount,
        links: { next: limit > 0 && end < res.totalCount ? `/api/v1/models?offset=${end}&limit=${limit}` : null },
      };
    },
  );
  api.post<{ Body: unknown }>(
    "/chat/completions",
    {
      validatorCompiler: passThroughValidator,
      schema: {
        operationId: "createChatCompletion",
        summary: "Create a chat completion through the providers the model names",
        description:
          "An OpenAI chat-completions request. `model` is `<provider>/<model>` or `@preset/<slug>[@<version>]` (or name a preset in `preset`); " +
          "`models` lists fallbacks and `provider` orders, restricts or ignores providers. The caller's BYOK credentials for the provider and the " +
          "operator's shared provider keys are used, in the order the BYOK flags define (docs/chat.md). With `stream: true` the answer is " +
          "server-sent events ending with `data: [DONE]`. `cache: {ttl_seconds}` (or a preset's, or the workspace's `response_cache_ttl_seconds`) answers from Portico's response cache when an identical " +
          "request was answered within the time to live (header `x-portico-cache: hit|miss`; docs/operations.md, \"Response cache\"). The header `x-request-timeout-ms` lowers the request's time budget (504 `timeout` " +
          "beyond it); a provider's 429 wait is passed on as 429 with `Retry-After` when no other candidate may serve the request.",
        tags: ["chat"],
        body: requestSchemas(ctx.brand).createChatCompletion,
        response: {
          200: {
            description: "`stream: false`: one chat.completion (JSON). `stream: true`: text/event-stream of chat.completion.chunk objects.",
            content: { "application/json": { schema: completionSchema }, "text/event-stream": { schema: chunkSchema } },
          },
          ...errorResponses(400, 401, 403, 404, 429, 502, 504),
        },
      },
    },
    async (req, reply) => {
      const body = req.body;
      if (typeof body !== "object" || body === null || Array.isArray(body)) {
        return reply.code(400).type("application/json; charset=utf-8").send(NOT_AN_OBJECT.body);
      }
      const json = body as Record<string, never>;
      if ((body as { stream?: unknown }).stream !== true) {
        const watch = abortOnClientClose(reply);
        try {
          const res = await client.createChatCompletion(chatInput(ctx, req, json, CREATE_REQUEST), modelCallOptionsFor(req, watch.signal));
          overhead(ctx, reply, res.upstreamMs, res.provider);
          reply.headers(cacheHeaders(res.cache));
          return reply.type("application/json; charset=utf-8").send(res.completionJson || JSON.stringify(res.completion ?? {}));
        } catch (err) {
          overheadOfError(ctx, reply, err);
          throw err;
        } finally {
          watch.release();
        }
      }
      return streamCompletion(req, reply, ctx, json);
    },
  );
}

/** The zero messages the chat requests are copied from (chatInput). */
const CREATE_REQUEST = create(CreateChatCompletionRequestSchema);
const STREAM_REQUEST = create(StreamChatCompletionRequestSchema);

/**
 * The chat request message: the body as the JSON text received when the core is over the wire (`body_json`,
 * far cheaper than a Struct), else the parsed object (handed over as is in process). Answers as JSON text.
 */
function chatInput<M extends CreateChatCompletionRequest | StreamChatCompletionRequest>(ctx: GatewayContext, req: FastifyRequest, body: Record<string, never>, zero: M): M {
  // A message already (its `$typeName`), so neither transport calls `create` on it: in process that was ≈ 0.4–1 µs and
  // ≈ 0.9 % of serve's CPU per request (bench/README.md, "The request's common shape without zod"). A copy of the zero
  // message by Object.assign, then assignments: a spread that adds `body` would give each copy a hidden class of its own.
  const message = Object.assign({}, zero);
  const text = bodyJsonFor(ctx, req);
  if (text !== undefined) message.bodyJson = text;
  else message.body = body;
  message.jsonText = true;
  // Over the wire, a stream's chunks at hand come packed in one message (one frame, one decode, one write); in
  // process a message costs no encoding, and the relay already reads the chunks at hand without a promise.
  if (ctx.jsonBodies && "packChunks" in message) message.packChunks = true;
  return message;
}

async function streamCompletion(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: GatewayContext,
  body: Record<string, never>,
): Promise<void> {
  const call = ctx.relay.start(req, reply);
  const stream = serverStream(ctx.transport, ChatService.method.streamChatCompletion, chatInput(ctx, req, body, STREAM_REQUEST), modelCallOptionsFor(req, call.signal));
  await call.run(stream, {
    name: "chat",
    // Portico's time to the first chunk; unknown (no header) when the stream opened before it (on the core's
    // keepalive or the gateway's own timer).
    openHeaders: (first) =>
      first && (first.chunkJson || first.chunk) ? { ...overheadHeaders(ctx, reply, OVERHEAD_ROUTES.chat, first.upstreamMs, first.provider), ...cacheHeaders(first.cache) } : undefined,
    // Errors before the first chunk (bad request, no credential, every provider down quickly) are HTTP
    // errors; a provider that keeps the caller waiting gets the response opened and keepalive comments.
    openAfterMs: ctx.streamOpenAfterMs,
    // A message without a chunk is the core saying "still working": a keepalive.
    // A packed message (`pack_chunks`) carries the chunks at hand after its first: all written in one write.
    render: (msg) => {
      const more = msg.moreChunksJson as string[] | undefined;
      if (more !== undefined && more.length > 0) return [msg.chunkJson, ...more];
      return msg.chunkJson || (msg.chunk ? JSON.stringify(msg.chunk) : HEARTBEAT);
    },
    onError: (err, shutdown) => {
      const { error } = streamFailure(err, shutdown, req.log, "chat").body;
      return [JSON.stringify({ object: "chat.completion.chunk", choices: [{ index: 0, delta: {}, finish_reason: "error" }], error })];
    },
  }).catch((err: unknown) => {
    overheadOfError(ctx, reply, err);
    throw err;
  });
}

function overhead(ctx: GatewayContext, reply: FastifyReply, upstreamMs: number, provider: string): void {
  reply.header(OVERHEAD_HEADER, overheadMs(ctx, reply, OVERHEAD_ROUTES.chat, upstreamMs, provider));
}

/** An error answered in the envelope: its wait on providers comes in the error's metadata (zero when none). */
function overheadOfError(ctx: GatewayContext, reply: FastifyReply, err: unknown): void {
  if (reply.sent || reply.raw.headersSent) return;
  const upstream = err instanceof ConnectError ? Number(err.metadata.get(UPSTREAM_MS_METADATA) ?? 0) : 0;
  overhead(ctx, reply, Number.isFinite(upstream) ? upstream : 0, "");
}
