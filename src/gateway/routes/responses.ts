/**
 * The OpenAI Responses dialect (docs/dialects.md): `POST /api/v1/responses`, translated to the core's ChatService
 * (CreateResponse, StreamResponse); the core routes it through the chat pipeline. The gateway only translates HTTP:
 *
 * - the key in `Authorization: Bearer`;
 * - errors in OpenAI's envelope `{error: {message, type, param, code}}` with the status of the one reason table
 *   (`param` the field a 400 names, `code` the reason); after the first event of a stream, an `error` event and
 *   `response.failed`, and the end of the stream (no `[DONE]`: the Responses API sends none).
 */
import { ConnectError, createClient } from "@connectrpc/connect";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ChatService } from "../../gen/portico/chat/v1/chat_service_pb.js";
import { OVERHEAD_ROUTES } from "../overhead.js";
import type { GatewayContext } from "../context.js";
import { publicErrorFromConnect, streamFailure } from "../errors.js";
import { bodyFieldsFor, modelCallOptionsFor } from "../rpc.js";
import { passThroughValidator } from "../schemas.js";
import { requestParameterSchemas } from "../../contract/requests/parameters.js";
import { requestSchemas } from "../../contract/requests/index.js";
import { errorBody, failureCodeOf } from "../../core/chat/dialects/openai-responses.js";
import { frame, relayEvents, replyJson } from "./dialect-reply.js";

const openAiErrorSchema = {
  type: "object",
  required: ["error"],
  properties: {
    error: {
      type: "object",
      required: ["message", "type"],
      properties: { message: { type: "string" }, type: { type: "string" }, param: { type: ["string", "null"] }, code: { type: ["string", "null"] } },
    },
  },
} as const;
const openAiErrors = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [s, openAiErrorSchema]));

const responseSchema = {
  type: "object",
  additionalProperties: true,
  properties: {
    id: { type: "string", description: "The generation id (`GET /api/v1/generation?id=`)." },
    object: { type: "string", enum: ["response"] },
    created_at: { type: "integer" },
    status: { type: "string", enum: ["completed", "incomplete", "failed", "in_progress"] },
    model: { type: "string" },
    output: { type: "array", items: { type: "object", additionalProperties: true } },
    usage: { type: ["object", "null"], additionalProperties: true },
  },
} as const;
const eventSchema = { type: "object", additionalProperties: true, properties: { type: { type: "string" }, sequence_number: { type: "integer" } } } as const;

/** The HTTP error of `err` in OpenAI's envelope. */
function openAiError(req: FastifyRequest, reply: FastifyReply, err: unknown): FastifyReply {
  let status: number;
  let message: string;
  let param: string | null = null;
  let code: string | null = null;
  let retryAfter = 0;
  if (err instanceof ConnectError) {
    const pub = publicErrorFromConnect(err);
    status = pub.status;
    message = pub.body.error.message;
    retryAfter = pub.retryAfterSeconds;
    const meta = pub.body.error.metadata;
    if (typeof meta?.field === "string") param = meta.field;
    if (typeof meta?.reason === "string") code = meta.reason;
    if (status >= 500) req.log.error({ err }, "core call failed");
  } else {
    const e = err as FastifyError;
    status = e.validation ? 400 : (e.statusCode ?? 500);
    message = status >= 500 ? "Internal Server Error" : e.message;
    if (status >= 500) req.log.error({ err }, "unhandled gateway error");
  }
  if (retryAfter > 0) reply.header("retry-after", String(retryAfter));
  return reply.code(status).type("application/json; charset=utf-8").send(JSON.stringify(errorBody(status, message, param, code)));
}

export async function registerResponsesRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(ChatService, ctx.transport);
  const schemas = requestSchemas(ctx.brand);

  api.post<{ Body: unknown }>(
    "/responses",
    {
      validatorCompiler: passThroughValidator,
      errorHandler: (error: FastifyError, req: FastifyRequest, reply: FastifyReply) => openAiError(req, reply, error),
      schema: {
        operationId: "createResponse",
        summary: "Create a model response (OpenAI Responses dialect, stateless)",
        description:
          "An OpenAI Responses request, routed like chat completions (`model` is `<provider>/<model>` or `@preset/<slug>`; `models` and " +
          "`provider` as in chat completions) to any provider, translated both ways (docs/dialects.md). Stateless: `previous_response_id` " +
          "and `store: true` are refused (400 naming the field). With `stream: true` the answer is OpenAI's server-sent events " +
          "(`response.created`, `response.in_progress`, `response.output_item.added`, …, `response.completed` or `response.incomplete`; " +
          "`error` and `response.failed` after the first event), each with `sequence_number`. Errors use OpenAI's envelope " +
          "`{error: {message, type, param, code}}`.",
        tags: ["chat"],
        ...requestParameterSchemas("createResponse"),
        body: schemas.createResponse,
        response: {
          200: {
            description: "`stream: false`: one response object (JSON). `stream: true`: text/event-stream of Responses events.",
            content: { "application/json": { schema: responseSchema }, "text/event-stream": { schema: eventSchema } },
          },
          ...openAiErrors(400, 401, 402, 403, 404, 429, 502, 504),
        },
      },
    },
    async (req, reply) => {
      const body = req.body;
      if (typeof body !== "object" || body === null || Array.isArray(body)) {
        return openAiError(req, reply, { statusCode: 400, message: "body must be a JSON object" });
      }
      const json = body as Record<string, never>;
      if ((body as { stream?: unknown }).stream !== true) {
        return replyJson(ctx, reply, OVERHEAD_ROUTES.responses, async (signal) => {
          const res = await client.createResponse(bodyFieldsFor(ctx, req, json), modelCallOptionsFor(req, signal));
          return { json: res.responseJson, upstreamMs: res.upstreamMs, provider: res.provider, cache: res.cache };
        });
      }
      // The events relayed so far (the next sequence_number) and the JSON text of `response.created` (parsed only
      // when the stream fails: its response is the one `response.failed` repeats).
      let sent = 0;
      let createdJson: string | undefined;
      await relayEvents(ctx, req, reply, {
        method: ChatService.method.streamResponse,
        input: bodyFieldsFor(ctx, req, json),
        options: (signal) => modelCallOptionsFor(req, signal),
        name: "responses",
        route: OVERHEAD_ROUTES.responses,
        onEvent: (e) => {
          if (sent === 0 && e.type === "response.created") createdJson = e.dataJson;
          sent++;
        },
        onError: (err, shutdown) => {
          const { status, body } = streamFailure(err, shutdown, req.log, "responses");
          const message = body.error.message;
          const code = failureCodeOf(status);
          const out: string[] = [];
          // Failed after the response opened but before the first event (a keepalive went out): clients need
          // `response.created` first (the SDK's stream helper refuses any other first event), so a minimal one.
          let shell = createdJson === undefined ? undefined : (JSON.parse(createdJson) as { response?: Record<string, unknown> }).response;
          if (!shell) {
            shell = { id: "", object: "response", created_at: Math.floor(Date.now() / 1000), status: "in_progress", error: null, incomplete_details: null, model: typeof json.model === "string" ? json.model : "", output: [], usage: null };
            out.push(frame("response.created", JSON.stringify({ type: "response.created", response: shell, sequence_number: sent++ })));
          }
          out.push(frame("error", JSON.stringify({ type: "error", code, message, param: null, sequence_number: sent++ })));
          const response = { ...shell, status: "failed", error: { code, message } };
          out.push(frame("response.failed", JSON.stringify({ type: "response.failed", response, sequence_number: sent++ })));
          return out;
        },
      });
    },
  );
}
