/**
 * `POST /api/v1/embeddings`: OpenAI's embeddings operation, translated to the core's EmbeddingsService
 * (CreateEmbeddings), which routes it through the chat pipeline's stages (docs/dialects.md, "Embeddings").
 * The gateway only translates HTTP: the body goes to the core as received (the core checks it after
 * authenticating the caller), the answer comes back as the core's JSON text, errors in the OpenAI envelope.
 */
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { OVERHEAD_HEADER } from "../../contract/overhead.js";
import { requestSchemas } from "../../contract/requests/index.js";
import { requestParameterSchemas } from "../../contract/requests/parameters.js";
import { EmbeddingsService } from "../../gen/portico/embeddings/v1/embeddings_service_pb.js";
import type { GatewayContext } from "../context.js";
import { overheadMs, OVERHEAD_ROUTES } from "../overhead.js";
import { publicError } from "../errors.js";
import { abortOnClientClose, modelCallOptionsFor } from "../rpc.js";
import { errorResponses, passThroughValidator } from "../schemas.js";

const NOT_AN_OBJECT = publicError(400, "Request body must be a JSON object");

const embeddingsSchema = {
  type: "object",
  required: ["object", "data", "model", "usage"],
  properties: {
    object: { type: "string", enum: ["list"] },
    data: {
      type: "array",
      items: {
        type: "object",
        required: ["object", "index", "embedding"],
        properties: {
          object: { type: "string", enum: ["embedding"] },
          index: { type: "integer" },
          embedding: {
            description: "The vector: numbers (`encoding_format: float`) or little-endian float32 bytes in base64 (`base64`).",
            oneOf: [{ type: "array", items: { type: "number" } }, { type: "string" }],
          },
        },
      },
    },
    model: { type: "string", description: "The model as the request named it." },
    usage: {
      type: "object",
      additionalProperties: true,
      properties: {
        prompt_tokens: { type: "integer" },
        total_tokens: { type: "integer" },
        cost: { type: ["number", "null"], description: "What it cost the account in USD (0 when your own provider key paid); null when the catalog has no price." },
        is_byok: { type: "boolean" },
        cost_details: { type: "object", additionalProperties: true },
      },
    },
    id: { type: "string", description: "The generation id (`GET /api/v1/generation?id=`)." },
    provider: { type: "string", description: "The provider that served the request." },
  },
} as const;

export async function registerEmbeddingsRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(EmbeddingsService, ctx.transport);
  api.post<{ Body: unknown }>(
    "/embeddings",
    {
      validatorCompiler: passThroughValidator,
      schema: {
        operationId: "createEmbeddings",
        summary: "Create embeddings through the provider the model names",
        description:
          "An OpenAI embeddings request. `model` is `<provider>/<model>` or a catalog slug of an embedding model; it is routed like a chat " +
          "request (the caller's BYOK credentials, the operator's shared keys, the key's spend limit and rates) to an OpenAI-compatible " +
          "`/embeddings` endpoint or Gemini's `embedContent` / `batchEmbedContents`, and recorded as a generation with its cost " +
          "(docs/dialects.md). Unknown fields are refused naming them.",
        tags: ["chat"],
        ...requestParameterSchemas("createEmbeddings"),
        body: requestSchemas(ctx.brand).createEmbeddings,
        response: {
          200: embeddingsSchema,
          ...errorResponses(400, 401, 402, 403, 404, 429, 502, 504),
        },
      },
    },
    async (req, reply) => {
      const body = req.body;
      if (typeof body !== "object" || body === null || Array.isArray(body)) {
        return reply.code(400).type("application/json; charset=utf-8").send(NOT_AN_OBJECT.body);
      }
      const watch = abortOnClientClose(reply);
      try {
        const res = await client.createEmbeddings({ body: body as Record<string, never> }, modelCallOptionsFor(req, watch.signal));
        reply.header(OVERHEAD_HEADER, overheadMs(ctx, reply, OVERHEAD_ROUTES.embeddings, res.upstreamMs, res.provider));
        return reply.type("application/json; charset=utf-8").send(res.responseJson);
      } finally {
        watch.release();
      }
    },
  );
}
