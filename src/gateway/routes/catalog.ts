/**
 * The model catalog (docs/catalog.md): `GET /models/{author}/{slug}/endpoints` for any API key, and the
 * management routes under /catalog/models that change the catalog while it serves (management keys only;
 * audited; every process sees a change within a second). Bodies use the catalog file's format and are
 * checked by the core with the file's definition (gRPC callers meet the same rules); query and path
 * parameters are defined in src/contract/requests/parameters.ts and checked by `contractRoute`.
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
import { contractRoute, errorResponses, listOf, pageOfResponse, pageRequest } from "../schemas.js";
import { dataOf, deletedSchema, MANAGEMENT } from "./management-schemas.js";

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

export async function registerCatalogRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(CatalogService, ctx.transport);
  const tags = ["catalog"];

  const endpointsContract = contractRoute("listModelEndpoints");
  api.get(
    "/models/:author/:slug/endpoints",
    {
      validatorCompiler: endpointsContract.validatorCompiler,
      schema: {
        operationId: "listModelEndpoints",
        summary: "A model's endpoints",
        description:
          "The catalog model's endpoints that may serve requests (not `disabled`), cheapest first (prompt + completion price), in the " +
          "real-world service's shape, with Portico's `provider`, `provider_model_id`, `catalog_status`, `data_policy`, `zdr`, `distillable` " +
          "and `source`. Live figures (latency, throughput, uptime) are `null`: not recorded per endpoint yet. 404 for a slug the catalog lacks.",
        tags,
        ...endpointsContract.schema,
        response: { 200: dataOf(modelEndpointsSchema), ...errorResponses(400, 401, 404, 500) },
      },
    },
    async (req) => {
      return { data: presentModelEndpoints(await client.listModelEndpoints({ slug: slugOf(req) }, callOptionsFor(req))) };
    },
  );

  const listContract = contractRoute("listCatalogModels");
  api.get<{ Querystring: { limit?: number; offset?: number; starting_after?: string } }>(
    "/catalog/models",
    {
      config: MANAGEMENT,
      validatorCompiler: listContract.validatorCompiler,
      schema: {
        operationId: "listCatalogModels",
        summary: "The catalog as served",
        description:
          "Every model, every endpoint status included, sorted by slug, in the catalog file's format, each with `overridden`. Pages by cursor " +
          "like every list (docs/api.md#pagination).",
        tags,
        ...listContract.schema,
        response: { 200: listOf(catalogEntrySchema), ...errorResponses(400, 401, 403, 500) },
      },
    },
    async (req) => {
      const res = await client.listCatalogModels(pageRequest(req.query), callOptionsFor(req));
      return { data: res.models.map(presentCatalogEntry), total_count: res.totalCount, ...pageOfResponse(res) };
    },
  );

  const getCatalogModelContract = contractRoute("getCatalogModel");
  api.get(
    "/catalog/models/:author/:slug",
    {
      config: MANAGEMENT,
      validatorCompiler: getCatalogModelContract.validatorCompiler,
      schema: {
        operationId: "getCatalogModel",
        summary: "One catalog model as served",
        tags,
        ...getCatalogModelContract.schema,
        response: { 200: dataOf(catalogEntrySchema), ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req) => ({ data: presentCatalogEntry((await client.getCatalogModel({ slug: slugOf(req) }, callOptionsFor(req))).model!) }),
  );

  const putCatalogModelContract = contractRoute("putCatalogModel", "core", requestSchemas(ctx.brand).putCatalogModel);
  api.put(
    "/catalog/models/:author/:slug",
    {
      config: MANAGEMENT,
      validatorCompiler: putCatalogModelContract.validatorCompiler,
      schema: {
        operationId: "putCatalogModel",
        summary: "Add a model, or replace it whole",
        description:
          "The body is a model in the catalog file's format: `name`, `endpoints` (each `provider`, `model_id`, `pricing` and a `context_length`), " +
          "optionally `context_length`, `architecture`, `supported_parameters`, `description`. It replaces whatever the built-in catalog and the " +
          "operator file say of the slug. Audited; every process serves it within a second.",
        tags,
        ...putCatalogModelContract.schema,
        response: { 200: dataOf(catalogEntrySchema), ...errorResponses(400, 401, 403, 409, 500) },
      },
    },
    async (req) => ({
      data: presentCatalogEntry((await client.putCatalogModel({ slug: slugOf(req), model: objectBody(req.body) }, callOptionsFor(req))).model!),
    }),
  );

  const updateCatalogEndpointContract = contractRoute("updateCatalogEndpoint", "core", requestSchemas(ctx.brand).updateCatalogEndpoint);
  api.patch(
    "/catalog/models/:author/:slug/endpoints/:provider",
    {
      config: MANAGEMENT,
      validatorCompiler: updateCatalogEndpointContract.validatorCompiler,
      schema: {
        operationId: "updateCatalogEndpoint",
        summary: "Change (or add) a model's endpoint",
        description:
          "The fields to change in the catalog file's endpoint format: `pricing` (replaces the whole price list), `status` (`active`, " +
          "`deprecated`, `disabled`), `context_length`, `max_completion_tokens`, `quantization`, `data_policy`, `zdr`, `distillable`, " +
          "`supported_parameters`, `model_id`, `aliases`, `source`. For a provider the model has no endpoint of, adds one (`model_id` and " +
          "`pricing` required). Audited; every process serves it within a second.",
        tags,
        ...updateCatalogEndpointContract.schema,
        response: { 200: dataOf(catalogEntrySchema), ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
    },
    async (req) => {
      const { provider } = req.params as { provider: string };
      const res = await client.updateCatalogEndpoint({ slug: slugOf(req), provider, changes: objectBody(req.body) }, callOptionsFor(req));
      return { data: presentCatalogEntry(res.model!) };
    },
  );

  const deleteCatalogEndpointContract = contractRoute("deleteCatalogEndpoint");
  api.delete(
    "/catalog/models/:author/:slug/endpoints/:provider",
    {
      config: MANAGEMENT,
      validatorCompiler: deleteCatalogEndpointContract.validatorCompiler,
      schema: {
        operationId: "deleteCatalogEndpoint",
        summary: "Remove a model's endpoint",
        description: "A model's last endpoint cannot be removed (400): remove the model. Audited.",
        tags,
        ...deleteCatalogEndpointContract.schema,
        response: { 200: dataOf(catalogEntrySchema), ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
    },
    async (req) => {
      const { provider } = req.params as { provider: string };
      return { data: presentCatalogEntry((await client.deleteCatalogEndpoint({ slug: slugOf(req), provider }, callOptionsFor(req))).model!) };
    },
  );

  const deleteCatalogModelContract = contractRoute("deleteCatalogModel");
  api.delete(
    "/catalog/models/:author/:slug",
    {
      config: MANAGEMENT,
      validatorCompiler: deleteCatalogModelContract.validatorCompiler,
      schema: {
        operationId: "deleteCatalogModel",
        summary: "Remove a model from the catalog",
        description: "Audited; every process stops offering it within a second.",
        tags,
        ...deleteCatalogModelContract.schema,
        response: { 200: deletedSchema, ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
    },
    async (req) => {
      await client.deleteCatalogModel({ slug: slugOf(req) }, callOptionsFor(req));
      return { deleted: true };
    },
  );
}
