/**
 * POST /api/v1/interns/{internId}/chat/completions: the intern streaming chat. Errors before the
 * first event are JSON envelopes with {reason, retryable} metadata; after the stream opens, every
 * error becomes a finish error chunk, the final chunk and `data: [DONE]`. Closing the response
 * aborts the RPC, which cancels a streaming run on the intern (a paused run outlives its response).
 */
import { randomUUID } from "node:crypto";
import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ListValueSchema, ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  ChatMessageSchema,
  InternsService,
  StreamChatRequestSchema,
  type ChatMessage,
  type StreamChatRequest,
  type StreamChatResponse,
} from "../../gen/portico/interns/v1/interns_service_pb.js";
import type { GatewayContext } from "../context.js";
import { publicErrorFromConnect, streamFailure, type PublicError } from "../errors.js";
import { Reason, ruleOf } from "../../contract/reasons.js";
import { defaultModel, errorChunk, finalChunk, toChunk, type ChunkContext } from "../presenters/intern-chunks.js";
import { callOptionsFor, serverStream } from "../rpc.js";
import { contractRoute, errorResponses } from "../schemas.js";
import { requestSchemas } from "../../contract/requests/index.js";
import { wrongTypeField } from "../../contract/requests/intern-chat.js";
import { HEARTBEAT } from "../sse-relay.js";

const SEVERED = ruleOf(Reason.STREAM_SEVERED);

/**
 * Builds the RPC request from the JSON body. A field of the wrong JSON type (by the InternChatRequest
 * definition) is named in malformed_field, never guessed; the core checks every other rule.
 */
export function toStreamChatRequest(internId: string, body: unknown): StreamChatRequest {
  const req = create(StreamChatRequestSchema, { internId });
  const wrong = wrongTypeField(body);
  if (wrong) {
    req.malformedField = wrong;
    return req;
  }
  const b = body as Record<string, unknown>;
  req.stream = b.stream === true;
  if (typeof b.approval_mode === "string") req.approvalMode = b.approval_mode === "" ? "invalid" : b.approval_mode;
  if (typeof b.model === "string") req.model = b.model;
  if (typeof b.session_id === "string") req.sessionId = b.session_id;
  if (Array.isArray(b.messages)) {
    for (const m of b.messages as Array<Record<string, unknown>>) {
      const out: ChatMessage = create(ChatMessageSchema, { role: m.role as string });
      if (m.content !== undefined) out.content = fromJson(ValueSchema, m.content as JsonValue);
      if (typeof m.tool_call_id === "string") out.toolCallId = m.tool_call_id;
      if (Array.isArray(m.tool_calls)) out.toolCalls = fromJson(ListValueSchema, m.tool_calls as JsonValue);
      req.messages.push(out);
    }
  }
  return req;
}

/** One `data:` payload of the intern stream (chat.completion.chunk plus the service's final-chunk fields). */
const chatCompletionChunkSchema = {
  type: "object",
  required: ["id", "object", "created", "model", "choices"],
  properties: {
    id: { type: "string" },
    object: { type: "string", const: "chat.completion.chunk" },
    created: { type: "integer" },
    model: { type: "string" },
    choices: {
      type: "array",
      items: {
        type: "object",
        properties: {
          index: { type: "integer" },
          delta: {
            type: "object",
            properties: {
              role: { type: "string" },
              content: { type: ["string", "null"] },
              reasoning: { type: ["string", "null"] },
              tool_calls: { type: "array", items: { type: "object", additionalProperties: true } },
            },
            additionalProperties: true,
          },
          finish_reason: { type: ["string", "null"] },
        },
      },
    },
    usage: { type: ["object", "null"], additionalProperties: true },
    session_id: { type: "string", description: "On the final chunk: the session to continue or answer in." },
    error: { type: "object", additionalProperties: true, description: "On an error ending: {code, message, metadata}." },
  },
  additionalProperties: true,
} as const;

export async function registerInternRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {

  const createInternChatCompletionContract = contractRoute("createInternChatCompletion", "core", requestSchemas(ctx.brand).createInternChatCompletion);
  api.post<{ Params: { internId: string } }>(
    "/interns/:internId/chat/completions",
    {
      validatorCompiler: createInternChatCompletionContract.validatorCompiler,
      config: { errorMetadata: true },
      // The core checks the body (after the caller) with the InternChatRequest definition.
      schema: {
        operationId: "createInternChatCompletion",
        summary: "Stream a chat completion with an intern",
        tags: ["interns"],
        ...createInternChatCompletionContract.schema,
        response: {
          200: {
            description:
              "Server-sent events: each `data:` line holds one chat.completion.chunk (this schema); the stream ends with `data: [DONE]`. Lines starting with `:` are keepalive comments.",
            content: { "text/event-stream": { schema: chatCompletionChunkSchema } },
          },
          ...errorResponses(400, 401, 403, 404, 409, 410, 413, 429, 502, 503, 504),
        },
      },
    },
    async (req, reply) => streamChat(req, reply, ctx),
  );
}

async function streamChat(
  req: FastifyRequest<{ Params: { internId: string } }>,
  reply: FastifyReply,
  ctx: GatewayContext,
): Promise<void> {
  const call = ctx.relay.start(req, reply);
  const rpcRequest = toStreamChatRequest(req.params.internId, req.body);
  const stream = serverStream(ctx.transport, InternsService.method.streamChat, rpcRequest, callOptionsFor(req, call.signal));
  const chunkCtx: ChunkContext = { id: `chatcmpl-${randomUUID()}`, created: Math.floor(Date.now() / 1000), brand: ctx.brand };
  const model = defaultModel(ctx.brand);
  let opened = false;
  let finished = false;
  let finalSent = false;
  const finalIfMissing = (): string[] =>
    finalSent ? [] : [JSON.stringify(finalChunk(chunkCtx, model, rpcRequest.sessionId ?? null, null))];

  await call.run(stream, {
    name: "intern",
    render: (ev: StreamChatResponse) => {
      opened = true;
      const out = toChunk(ev, chunkCtx);
      if (out.kind === "heartbeat") return HEARTBEAT;
      if (out.kind === "none") return undefined;
      if (ev.event.case === "finish") finished = true;
      if (ev.event.case === "final") finalSent = true;
      return JSON.stringify(out.chunk);
    },
    onEnd: () => {
      // The core always sends at least one event; an empty stream is a core fault, in band as any other.
      if (!opened) return [JSON.stringify(errorChunk(chunkCtx, model, inBandError(new ConnectError("the intern stream ended before it started", Code.Internal)))), ...finalIfMissing()];
      return finalIfMissing();
    },
    onError: (err, shutdown) => {
      if (shutdown) {
        // The gateway stopping: the model routes' in-band error (core_unavailable, the relay's message).
        const chunk = errorChunk(chunkCtx, model, fromEnvelope(streamFailure(err, shutdown, req.log, "intern").body.error));
        return [...(finished ? [] : [JSON.stringify(chunk)]), ...finalIfMissing()];
      }
      const e = inBandError(err);
      if (e.code >= 500 && err.code !== Code.Canceled) req.log.warn({ code: Code[err.code] }, "intern stream broke after it opened");
      return [...(finished ? [] : [JSON.stringify(errorChunk(chunkCtx, model, e))]), ...finalIfMissing()];
    },
  });
}

/** The error chunk's body for a stream that broke after it opened. */
function inBandError(ce: ConnectError): { code: number; message: string; reason: string; retryable: boolean } {
  const severed = ce.code === Code.Unavailable || ce.code === Code.Internal || ce.code === Code.Unknown;
  if (severed) {
    return { code: SEVERED.status, message: "The connection to the intern broke without its confirmation.", reason: SEVERED.wire, retryable: SEVERED.retryable };
  }
  return fromEnvelope(publicErrorFromConnect(ce).body.error);
}

/** An error chunk's body from the gateway's envelope: the same fields (docs/api.md, docs/interns.md). */
function fromEnvelope({ code, message, metadata }: PublicError["body"]["error"]): { code: number; message: string; reason: string; retryable: boolean } {
  const reason = (metadata?.reason as string | undefined) ?? ruleOf(Reason.INTERNAL_ERROR).wire;
  return { code, message, reason, retryable: (metadata?.retryable as boolean | undefined) ?? false };
}
