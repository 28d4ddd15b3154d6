/**
 * The model catalog (docs/catalog.md): `GET /models/{author}/{slug}/endpoints` for any API key, and the
 * management routes under /catalog/models that change the catalog while it serves (management keys only;
 * audited; every process sees a change within a second). Bodies use the catalog file's format and are
 * checked by the core with the file's definition (gRPC callers meet the same rules).
 */
import { createClient } from "@connectrpc/connect";
import type { JsonObject } from "@bufbuild/protobuf";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { CatalogService } from "../../gen/portico/catalog/v1/catalog_service_pb.js";
import { Reason } from "../../contract/reasons.js";
import { requestSchemas } from "../../contract/requests/index.js";
import { serviceError } from "../../lib/service-error.js";
import type { GatewayContext } from "../context.js";
import { catalogEntrySchema, modelEndpointsSchema, presentCatalogEntry, presentModelEndpoints } from "../presenters/catalog.js";
import { callOptionsFor } from "../rpc.js";
import { errorResponses, passThroughValidator } from "../schemas.js";
import { dataOf, deletedSchema, MANAGEMENT } from "./management-schemas.js";

/** A whole-number query parameter between min and max (absent: undefined), else 400 naming it. */
export function queryInt(query: unknown, name: string, min: number, max: number): number | undefined {
  const raw = ((query ?? {}) as Record<string, unknown>)[name];
  if (raw === undefined || raw === "") return undefined;
  if (typeof raw !== "string" || !/^\d{1,10}$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw serviceError(Reason.BAD_REQUEST, `${name} must be an integer between ${min} and ${max}`, { field: name });
  }
  return Number(raw);
}

const pageQuery = {
  type: "object",
  properties: {
    offset: { type: "string", description: "Models to skip (default 0)." },
    limit: { type: "string", description: "At most this many (1 to 100, default 50)." },
  },
} as const;

const modelParams = {
  type: "object",
  required: ["author", "slug"],
  properties: {
    author: { type: "string", description: "The canonical slug's author (`meta-llama`)." },
    slug: { type: "string", description: "The canonical slug's model part (`llama-3.3-70b-instruct`)." },
  },
} as const;

const endpointParams = {
  type: "object",
  required: ["author", "slug", "provider"],
  properties: { ...modelParams.properties, provider: { type: "string", description: "The endpoint's provider slug." } },
} as const;

type ModelParams = { author: string; slug: string };

const slugOf = (req: FastifyRequest) => {
  const p = req.params as ModelParams;
  return `${p.author}/${p.slug}`;
};

/** A body that is a JSON object (the model or the endpoint's changes), else 400. */
function objectBody(body: unknown): JsonObject {
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw serviceError(Reason.BAD_REQUEST, "body must be a JSON object", { field: "body" });
  return body as JsonObject;
}

/** Query parameters an operation does not know are refused, naming the first (never silently ignored). */
export function refuseUnknownQuery(query: unknown, allowed: readonly string[]): void {
  const unknown = Object.keys((query ?? {}) as object).find((k) => !allowed.includes(k));
  if (unknown !== undefined) throw serviceError(Reason.BAD_REQUEST, `${unknown} is not a query parameter of this operation (${allowed.join(", ") || "none"})`, { field: unknown });
}

export async function registerCatalogRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(CatalogService, ctx.transport);
  const tags = ["catalog"];

  api.get(
    "/models/:author/:slug/endpoints",
    {
      schema: {
        operationId: "listModelEndpoints",
        summary: "A model's endpoints",
        description:
          "The catalog model's endpoints that may serve requests (not `disabled`), cheapest first (prompt + completion price), in the " +
          "real-world service's shape, with Portico's `provider`, `provider_model_id`, `catalog_status`, `data_policy`, `zdr`, `distillable` " +
          "and `source`. Live figures (latency, throughput, uptime) are `null`: not recorded per endpoint yet. 404 for a slug the catalog lacks.",
        tags,
        params: modelParams,
        response: { 200: dataOf(modelEndpointsSchema), ...errorResponses(400, 401, 404, 500) },
      },
    },
    async (req) => {
      refuseUnknownQuery(req.query, []);
      return { data: presentModelEndpoints(await client.listModelEndpoints({ slug: slugOf(req) }, callOptionsFor(req))) };
    },
  );

  api.get(
    "/catalog/models",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "listCatalogModels",
        summary: "The catalog as served",
        description: "Every model, every endpoint status included, sorted by slug, in the catalog file's format, each with `overridden`.",
        tags,
        querystring: pageQuery,
        response: {
          200: { type: "object", required: ["data", "total_count"], properties: { data: { type: "array", items: catalogEntrySchema }, total_count: { type: "integer" } } },
          ...errorResponses(400, 401, 403, 500),
        },
      },
    },
    async (req) => {
      refuseUnknownQuery(req.query, ["offset", "limit"]);
      const res = await client.listCatalogModels({ offset: queryInt(req.query, "offset", 0, 2_147_483_647) ?? 0, limit: queryInt(req.query, "limit", 1, 100) ?? 0 }, callOptionsFor(req));
      return { data: res.models.map(presentCatalogEntry), total_count: res.totalCount };
    },
  );

  api.get(
    "/catalog/models/:author/:slug",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "getCatalogModel",
        summary: "One catalog model as served",
        tags,
        params: modelParams,
        response: { 200: dataOf(catalogEntrySchema), ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req) => ({ data: presentCatalogEntry((await client.getCatalogModel({ slug: slugOf(req) }, callOptionsFor(req))).model!) }),
  );

  api.put(
    "/catalog/models/:author/:slug",
    {
      config: MANAGEMENT,
      validatorCompiler: passThroughValidator,
      schema: {
        operationId: "putCatalogModel",
        summary: "Add a model, or replace it whole",
        description:
          "The body is a model in the catalog file's format: `name`, `endpoints` (each `provider`, `model_id`, `pricing` and a `context_length`), " +
          "optionally `context_length`, `architecture`, `supported_parameters`, `description`. It replaces whatever the built-in catalog and the " +
          "operator file say of the slug. Audited; every process serves it within a second.",
        tags,
        params: modelParams,
        body: requestSchemas(ctx.brand).putCatalogModel,
        response: { 200: dataOf(catalogEntrySchema), ...errorResponses(400, 401, 403, 409, 500) },
      },
    },
    async (req) => ({
      data: presentCatalogEntry((await client.putCatalogModel({ slug: slugOf(req), model: objectBody(req.body) }, callOptionsFor(req))).model!),
    }),
  );

  api.patch(
    "/catalog/models/:author/:slug/endpoints/:provider",
    {
      config: MANAGEMENT,
      validatorCompiler: passThroughValidator,
      schema: {
        operationId: "updateCatalogEndpoint",
        summary: "Change (or add) a model's endpoint",
        description:
          "The fields to change in the catalog file's endpoint format: `pricing` (replaces the whole price list), `status` (`active`, " +
          "`deprecated`, `disabled`), `context_length`, `max_completion_tokens`, `quantization`, `data_policy`, `zdr`, `distillable`, " +
          "`supported_parameters`, `model_id`, `aliases`, `source`. For a provider the model has no endpoint of, adds one (`model_id` and " +
          "`pricing` required). Audited; every process serves it within a second.",
        tags,
        params: endpointParams,
        body: requestSchemas(ctx.brand).updateCatalogEndpoint,
        response: { 200: dataOf(catalogEntrySchema), ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
    },
    async (req) => {
      const { provider } = req.params as { provider: string };
      const res = await client.updateCatalogEndpoint({ slug: slugOf(req), provider, changes: objectBody(req.body) }, callOptionsFor(req));
      return { data: presentCatalogEntry(res.model!) };
    },
  );

  api.delete(
    "/catalog/models/:author/:slug/endpoints/:provider",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "deleteCatalogEndpoint",
        summary: "Remove a model's endpoint",
        description: "A model's last endpoint cannot be removed (400): remove the model. Audited.",
        tags,
        params: endpointParams,
        response: { 200: dataOf(catalogEntrySchema), ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
    },
    async (req) => {
      const { provider } = req.params as { provider: string };
      return { data: presentCatalogEntry((await client.deleteCatalogEndpoint({ slug: slugOf(req), provider }, callOptionsFor(req))).model!) };
    },
  );

  api.delete(
    "/catalog/models/:author/:slug",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "deleteCatalogModel",
        summary: "Remove a model from the catalog",
        description: "Audited; every process stops offering it within a second.",
        tags,
        params: modelParams,
        response: { 200: deletedSchema, ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
    },
    async (req) => {
      await client.deleteCatalogModel({ slug: slugOf(req) }, callOptionsFor(req));
      return { deleted: true };
    },
  );
}
