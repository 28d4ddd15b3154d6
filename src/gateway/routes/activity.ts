/**
 * `GET /api/v1/activity`: daily totals of the organization's generations (cost, requests, tokens), in the
 * real-world service's shape (docs/api.md, "Activity"). Translates to `ActivityService.GetActivity`; the
 * core validates, authorizes and aggregates.
 */
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { ActivityService, type ActivityItem } from "../../gen/portico/activity/v1/activity_service_pb.js";
import type { GatewayContext } from "../context.js";
import { callOptionsFor } from "../rpc.js";
import { contractRoute, errorResponses } from "../schemas.js";

const nullable = (type: string, description: string) => ({ type: [type, "null"], description });
const activityItemSchema = {
  type: "object",
  required: ["date", "model", "model_permaslug", "endpoint_id", "provider_name", "usage", "byok_usage_inference", "requests", "prompt_tokens", "completion_tokens", "reasoning_tokens"],
  properties: {
    date: { type: "string", description: "The UTC day, YYYY-MM-DD." },
    model: nullable("string", "The model's canonical catalog slug (`openai/gpt-4o`), or `<provider>/<model id>` when the catalog lacks it; null with group_by provider or key."),
    model_permaslug: nullable("string", "The model as served, `<provider>/<provider's model id>`; null with group_by model, provider or key."),
    endpoint_id: nullable("string", "The endpoint, `<provider>/<provider's model id>`; null with group_by model, provider or key."),
    provider_name: nullable("string", "The provider that served the generations; null with group_by model or key."),
    usage: { type: "number", description: "USD the generations cost the account (BYOK-served ones count 0); the exact sum of their costs (an exact decimal), rendered as the nearest number once." },
    byok_usage_inference: { type: "number", description: "USD the BYOK-served generations cost at the provider (charged to the customer's own provider keys)." },
    requests: { type: "integer", description: "Generations served." },
    prompt_tokens: { type: "integer" },
    completion_tokens: { type: "integer", description: "Reasoning tokens included." },
    reasoning_tokens: { type: "integer" },
    cached_tokens: { type: "integer", description: "Of the prompt tokens, those read from the providers' prompt caches (Portico)." },
    workspace_id: { type: "string", description: "Only with group_by=workspace." },
    api_key_hash: { type: "string", description: "Only with group_by=key (Portico)." },
  },
} as const;

function present(i: ActivityItem) {
  return {
    date: i.date,
    model: i.model ?? null,
    model_permaslug: i.modelPermaslug ?? null,
    endpoint_id: i.endpointId ?? null,
    provider_name: i.providerName ?? null,
    usage: Number(i.usageUsd),
    byok_usage_inference: Number(i.byokUsageInferenceUsd),
    requests: Number(i.requests),
    prompt_tokens: Number(i.promptTokens),
    completion_tokens: Number(i.completionTokens),
    reasoning_tokens: Number(i.reasoningTokens),
    cached_tokens: Number(i.cachedTokens),
    ...(i.workspaceId !== undefined ? { workspace_id: i.workspaceId } : {}),
    ...(i.apiKeyHash !== undefined ? { api_key_hash: i.apiKeyHash } : {}),
  };
}

export async function registerActivityRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(ActivityService, ctx.transport);
  const contract = contractRoute("getActivity");
  api.get(
    "/activity",
    {
      config: { authorizeFirst: { management: false } },
      validatorCompiler: contract.validatorCompiler,
      schema: {
        operationId: "getActivity",
        summary: "Daily totals of the organization's generations",
        description:
          "Cost, requests and tokens per UTC day and model endpoint for the last 30 completed UTC days (or one day with `date`). " +
          "A management key reads the whole organization's activity; any other key only its own generations.",
        tags: ["chat"],
        ...contract.schema,
        response: {
          200: { type: "object", required: ["data"], properties: { data: { type: "array", items: activityItemSchema } } },
          ...errorResponses(400, 401, 403, 404, 500),
        },
      },
    },
    async (req) => {
      const query = (req.query ?? {}) as Record<string, unknown>;
      const text = (name: string) => (typeof query[name] === "string" ? (query[name] as string) : undefined);
      const res = await client.getActivity(
        {
          date: text("date"),
          apiKeyHash: text("api_key_hash"),
          userId: text("user_id"),
          workspaceId: text("workspace_id"),
          groupBy: text("group_by"),
          includeToday: query.include_today === true,
        },
        callOptionsFor(req),
      );
      return { data: res.data.map(present) };
    },
  );
}
