/**
 * `GET /api/v1/generation?id=…`: the record of one chat-completions request of the caller's organization.
 * `GET /api/v1/generations`: the request log, newest first, filtered, cursor-paged (docs/operations.md,
 * "Request log"): a management key lists the organization's, any other key its own.
 */
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { GenerationsService, type Generation } from "../../gen/portico/generations/v1/generations_service_pb.js";
import type { GatewayContext } from "../context.js";
import { callOptionsFor } from "../rpc.js";
import { contractRoute, errorResponses, listOf, pageOfResponse, pageRequest } from "../schemas.js";

const nullable = (type: string, description: string) => ({ type: [type, "null"], description });
const generationSchema = {
  type: "object",
  required: ["id", "requested_model", "streamed", "latency_ms", "status", "attempts", "created_at"],
  properties: {
    id: { type: "string" },
    key_hash: { type: "string", description: "SHA-256 hex of the API key that made the request." },
    workspace_id: { type: "string", description: "The API key's workspace when it made the request." },
    requested_model: { type: "string", description: "The model the request named (for a call made with an intern run credential: the id the agent sent, which the intern's model replaced)." },
    model: nullable("string", "The model that served it."),
    provider: nullable("string", "The provider that served it."),
    credential_id: nullable("string", "The BYOK credential used."),
    preset_slug: nullable("string", "The preset the request named."),
    preset_version: nullable("integer", "The preset version applied."),
    streamed: { type: "boolean" },
    prompt_tokens: nullable("integer", "As the provider reported."),
    completion_tokens: nullable("integer", "As the provider reported."),
    total_tokens: nullable("integer", "As the provider reported."),
    latency_ms: { type: "integer" },
    time_to_first_token_ms: nullable("integer", "Streams: to the first chunk."),
    status: { type: "string", enum: ["success", "error", "cancelled"] },
    finish_reason: nullable("string", "Of the last choice."),
    error_code: nullable("integer", "HTTP status of the error."),
    attempts: { type: "integer" },
    created_at: { type: "string", format: "date-time" },
    native_tokens_cached: nullable("integer", "Of the prompt tokens: read from the provider's prompt cache, as the provider reported."),
    native_tokens_cache_write: nullable("integer", "Of the prompt tokens: written to the provider's prompt cache, as the provider reported."),
    native_tokens_reasoning: nullable("integer", "Of the completion tokens: reasoning tokens, as the provider reported."),
    total_cost: nullable("number", "USD the generation cost the account (the answer's `usage.cost`): the provider's price at the catalog's prices, 0 when BYOK paid it; null when the catalog did not price it."),
    upstream_inference_cost: nullable("number", "USD the provider charges for it, BYOK or not (`usage.cost_details.upstream_inference_cost`); null when unpriced."),
    is_byok: { type: "boolean", description: "Whether the caller's own provider key (BYOK) served it." },
    catalog_model: nullable("string", "The catalog model (canonical slug) whose endpoint served it; null when nothing served it or it was uncatalogued."),
    uncatalogued: { type: "boolean", description: "A provider served it under a <provider>/<model> id the model catalog does not know (relayed as named, unpriced)." },
    user: nullable("string", "The request's `user` (the caller's end-user id), as sent."),
    session_id: nullable("string", "The request's `session_id`, else its `x-session-id` header."),
    dialect: nullable("string", "The API dialect the request came in: `chat`, `messages`, `responses` or `gemini` (docs/dialects.md); null for generations recorded before it was."),
    intern_id: nullable("string", "Made with an intern run's credential (docs/interns.md, \"Model calls through Portico\"): the intern."),
    run_id: nullable("string", "Made with an intern run's credential: the run."),
    intern_session_id: nullable("string", "Made with an intern run's credential: the run's session_id."),
    trace_id: nullable("string", "The request's `trace.trace_id`."),
    trace: { type: ["object", "null"], additionalProperties: true, description: "The request's `trace` object (known keys and custom ones), as sent." },
    metadata: { type: ["object", "null"], additionalProperties: { type: "string" }, description: "The request's `metadata`, as sent." },
    plugins: {
      type: "array",
      description: "What the request's plugins did, in the order they ran (docs/plugins.md): `id` and the plugin's report (counts and flags, never content). Empty when none ran.",
      items: { type: "object", required: ["id"], properties: { id: { type: "string" } }, additionalProperties: true },
    },
    cache_hit: { type: "boolean", description: "The response cache answered it: no provider was called and it cost 0; the token counts are the cached answer's (docs/operations.md, \"Response cache\")." },
    server_tools: {
      type: ["object", "null"],
      description: "The server tools that ran (docs/plugins.md, \"Server tools\"): model calls of the loop, calls per tool type, the calls in order (at most 64) and the bound that stopped the loop; null when the request offered none.",
      properties: {
        turns: { type: "integer", description: "Model calls the server-tool loop made." },
        counts: { type: "object", additionalProperties: { type: "integer" }, description: "Calls per server tool type." },
        calls: {
          type: "array",
          items: { type: "object", properties: { type: { type: "string" }, name: { type: "string" }, ok: { type: "boolean" }, ms: { type: "integer" } } },
        },
        stopped_by: { type: ["string", "null"], description: "max_turns or a stop_server_tools_when condition type, when one stopped the loop." },
      },
    },
    attempts_log: {
      type: "array",
      description:
        "Each upstream attempt in order and why it ended (docs/operations.md, \"Retries and fallback\"): served, cooling (skipped), rate_limited, timeout, outage, auth_failed, context_length, content_filter, model_unavailable, slow_stream, client_error. Empty when no attempt was made (a cache hit).",
      items: {
        type: "object",
        properties: {
          provider: { type: "string" },
          model: { type: "string" },
          credential_source: { type: "string", enum: ["byok", "shared"] },
          status: { type: ["integer", "null"], description: "The provider's HTTP status; null when it sent none (a timeout, a broken connection) or the attempt was skipped." },
          reason: { type: "string" },
          duration_ms: { type: "integer" },
          retry_after_ms: { type: "integer", description: "The wait the provider asked for (Retry-After), or the cool-down left of a skipped credential." },
          backoff_ms: { type: "integer", description: "The jittered backoff slept before this retry of the same candidate." },
        },
      },
    },
  },
} as const;

/** The recorded attempts (JSON text) as the API shows them; a row written before the column: none. */
function attemptsLogOf(text: string | undefined): unknown[] {
  if (!text) return [];
  try {
    const v = JSON.parse(text) as unknown;
    return Array.isArray(v) ? v : [];
  } catch {
    return [];
  }
}

/** The recorded server tools (JSON text) as the API shows them. */
function serverToolsOf(text: string | undefined): unknown {
  if (!text) return null;
  try {
    const r = JSON.parse(text) as { turns?: number; counts?: Record<string, number>; calls?: unknown[]; stoppedBy?: string };
    return { turns: r.turns ?? 0, counts: r.counts ?? {}, calls: r.calls ?? [], stopped_by: r.stoppedBy ?? null };
  } catch {
    return null;
  }
}

/** The query filters of `GET /generations` and the RPC fields they fill (`from`/`to` become timestamps). */
const TEXT_FILTERS = {
  key: "key",
  workspace_id: "workspaceId",
  model: "model",
  provider: "provider",
  status: "status",
  session_id: "sessionId",
  user: "user",
  trace_id: "traceId",
  trace_name: "traceName",
  span_name: "spanName",
  generation_name: "generationName",
  parent_span_id: "parentSpanId",
  plugin: "plugin",
  intern_id: "internId",
  run_id: "runId",
} as const;
type ListQuery = { limit?: number; offset?: number; starting_after?: string; from?: string; to?: string; cache_hit?: boolean; metadata?: string } & {
  [K in keyof typeof TEXT_FILTERS]?: string;
};

/** Femto-dollars (1e-15 USD) → USD, as the cost stage puts it on `usage.cost`. */
const usd = (femtos: bigint | undefined): number | null => (femtos === undefined ? null : Number(femtos) / 1e15);

export async function registerGenerationRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(GenerationsService, ctx.transport);
  const getGenerationContract = contractRoute("getGeneration");
  api.get<{ Querystring: { id: string } }>(
    "/generation",
    {
      validatorCompiler: getGenerationContract.validatorCompiler,
      schema: {
        operationId: "getGeneration",
        summary: "The record of one chat-completions request",
        description: "Who asked, what served it, tokens, timings and outcome; never message content or a provider key. Keys of the same organization only.",
        tags: ["chat"],
        ...getGenerationContract.schema,
        response: { 200: { type: "object", required: ["data"], properties: { data: generationSchema } }, ...errorResponses(400, 401, 404, 500) },
      },
    },
    async (req) => ({ data: presentGeneration((await client.getGeneration({ id: req.query.id }, callOptionsFor(req))).generation!) }),
  );

  const getContentContract = contractRoute("getGenerationContent");
  api.get<{ Querystring: { id: string } }>(
    "/generation/content",
    {
      validatorCompiler: getContentContract.validatorCompiler,
      schema: {
        operationId: "getGenerationContent",
        summary: "The logged request and response bodies of one generation",
        description:
          "Content logging (docs/operations.md, \"Content logging\"): the request body as received (after validation) and the answer (the response, or the assembled stream), decrypted, " +
          "when the generation's workspace logs content. Provider keys and authorization fields are never stored. Management keys only (403 for any other key); 404 when nothing is kept " +
          "(logging off, retention passed, workspace deleted, or another organization's generation).",
        tags: ["chat"],
        ...getContentContract.schema,
        response: {
          200: {
            type: "object",
            required: ["data"],
            properties: {
              data: {
                type: "object",
                required: ["id", "request", "response", "created_at", "expires_at"],
                properties: {
                  id: { type: "string" },
                  request: { type: "object", additionalProperties: true, description: "The request body, as validated." },
                  response: { type: ["object", "null"], additionalProperties: true, description: "The answer, the assembled stream, or `{error}`; null when it never completed." },
                  created_at: { type: "string", format: "date-time" },
                  expires_at: { type: "string", format: "date-time", description: "When the retention sweep deletes it." },
                },
              },
            },
          },
          ...errorResponses(400, 401, 403, 404, 500),
        },
      },
    },
    async (req) => {
      const res = await client.getGenerationContent({ id: req.query.id }, callOptionsFor(req));
      return {
        data: {
          id: res.id,
          request: res.request ?? {},
          response: res.response ?? null,
          created_at: res.createdAt ? timestampDate(res.createdAt).toISOString() : null,
          expires_at: res.expiresAt ? timestampDate(res.expiresAt).toISOString() : null,
        },
      };
    },
  );

  const listGenerationsContract = contractRoute("listGenerations");
  api.get<{ Querystring: ListQuery }>(
    "/generations",
    {
      validatorCompiler: listGenerationsContract.validatorCompiler,
      schema: {
        operationId: "listGenerations",
        summary: "The request log: generations, newest first",
        description:
          "The organization's chat-completions requests, newest first, one cursor page at a time, filtered by key, workspace, model, provider, status, time, session, user, trace keys or metadata pairs. " +
          "A management key lists the whole organization's; any other key lists only its own generations (403 when it names another key). Never message content or a provider key.",
        tags: ["chat"],
        ...listGenerationsContract.schema,
        response: { 200: listOf(generationSchema, { totalCount: false }), ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req) => {
      const q = req.query;
      const filters: Record<string, unknown> = {};
      for (const [param, field] of Object.entries(TEXT_FILTERS)) {
        const value = q[param as keyof typeof TEXT_FILTERS];
        if (value !== undefined) filters[field] = value;
      }
      if (q.from !== undefined) filters.from = timestampFromDate(new Date(q.from));
      if (q.to !== undefined) filters.to = timestampFromDate(new Date(q.to));
      if (q.cache_hit !== undefined) filters.cacheHit = q.cache_hit;
      // The contract checked it: a JSON object of string pairs.
      if (q.metadata !== undefined) filters.metadata = JSON.parse(q.metadata) as Record<string, string>;
      const res = await client.listGenerations({ ...pageRequest(q), ...filters }, callOptionsFor(req));
      return { data: res.generations.map(presentGeneration), ...pageOfResponse(res) };
    },
  );
}

/** A generation in the public JSON form (GET /generation, GET /generations). */
function presentGeneration(g: Generation) {
  return {
    id: g.id,
    key_hash: g.keyHash,
    workspace_id: g.workspaceId,
    requested_model: g.requestedModel,
    model: g.model ?? null,
    provider: g.provider ?? null,
    credential_id: g.credentialId ?? null,
    preset_slug: g.presetSlug ?? null,
    preset_version: g.presetVersion ?? null,
    streamed: g.streamed,
    prompt_tokens: g.promptTokens ?? null,
    completion_tokens: g.completionTokens ?? null,
    total_tokens: g.totalTokens ?? null,
    latency_ms: g.latencyMs,
    time_to_first_token_ms: g.timeToFirstTokenMs ?? null,
    status: g.status,
    finish_reason: g.finishReason ?? null,
    error_code: g.errorCode ?? null,
    attempts: g.attempts,
    created_at: g.createdAt ? timestampDate(g.createdAt).toISOString() : null,
    native_tokens_cached: g.cachedTokens ?? null,
    native_tokens_cache_write: g.cacheWriteTokens ?? null,
    native_tokens_reasoning: g.reasoningTokens ?? null,
    total_cost: usd(g.costFemtoUsd),
    upstream_inference_cost: usd(g.upstreamInferenceCostFemtoUsd),
    is_byok: g.isByok,
    catalog_model: g.catalogModel ?? null,
    uncatalogued: g.uncatalogued,
    cache_hit: g.cacheHit,
    user: g.user ?? null,
    session_id: g.sessionId ?? null,
    trace_id: g.traceId ?? null,
    trace: g.trace ?? null,
    metadata: Object.keys(g.metadata).length > 0 ? g.metadata : null,
    plugins: g.plugins,
    server_tools: serverToolsOf(g.serverTools),
    attempts_log: attemptsLogOf(g.attemptsLog),
    dialect: g.dialect ?? null,
    intern_id: g.internId ?? null,
    run_id: g.runId ?? null,
    intern_session_id: g.internSessionId ?? null,
  };
}
