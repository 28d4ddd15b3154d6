/**
 * API keys under /api/v1/keys: list, create (plaintext returned once, 201), get, update (rename,
 * disable/enable) and delete (revoke at once). Management keys only (the core checks it); a key of
 * another organization is 404 like a missing one.
 */
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { KeysService } from "../../gen/portico/keys/v1/keys_service_pb.js";
import type { GatewayContext } from "../context.js";
import { keyLimitsOf } from "./limit-fields.js";
import { CreateApiKeyRequest, UpdateApiKeyRequest } from "../../contract/requests/management.js";
import { apiKeySchema, presentApiKey } from "../presenters/management.js";
import { callOptionsFor } from "../rpc.js";
import { contractRoute, errorResponses, listOf, pageOfResponse, pageRequest } from "../schemas.js";
import { dataOf, deletedSchema, MANAGEMENT } from "./management-schemas.js";

type ListQuery = { limit?: number; offset?: number; starting_after?: string; include_disabled?: boolean; workspace_id?: string };

export async function registerKeyRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(KeysService, ctx.transport);
  const tags = ["keys"];

  const list = contractRoute("listApiKeys");
  api.get<{ Querystring: ListQuery }>(
    "/keys",
    {
      config: MANAGEMENT,
      validatorCompiler: list.validatorCompiler,
      schema: {
        operationId: "listApiKeys",
        summary: "List the organization's API keys",
        description: "Oldest first. Deleted keys are never listed; disabled keys only with include_disabled=true.",
        tags,
        ...list.schema,
        response: { 200: listOf(apiKeySchema), ...errorResponses(400, 401, 403, 500) },
      },
    },
    async (req) => {
      const q = req.query;
      const res = await client.listKeys(
        { ...pageRequest(q), includeDisabled: q.include_disabled === true, ...(q.workspace_id !== undefined ? { workspaceId: q.workspace_id } : {}) },
        callOptionsFor(req),
      );
      return { data: res.keys.map(presentApiKey), total_count: res.totalCount, ...pageOfResponse(res) };
    },
  );

  const create = contractRoute("createApiKey", CreateApiKeyRequest);
  api.post(
    "/keys",
    {
      config: MANAGEMENT,
      validatorCompiler: create.validatorCompiler,
      schema: {
        operationId: "createApiKey",
        summary: "Create an API key",
        description: "Answers 201 with the key's record and, this once, the plaintext key in `key`.",
        tags,
        ...create.schema,
        response: {
          201: {
            type: "object",
            required: ["data", "key"],
            properties: { data: apiKeySchema, key: { type: "string", description: "The plaintext key, shown only here." } },
          },
          ...errorResponses(400, 401, 403, 500),
        },
      },
    },
    async (req, reply) => {
      const b = req.body as { name: string; workspace_id?: string; is_management_key?: boolean };
      const res = await client.createKey(
        {
          name: b.name,
          isManagementKey: b.is_management_key === true,
          ...(b.workspace_id !== undefined ? { workspaceId: b.workspace_id } : {}),
          ...keyLimitsOf(b as Record<string, unknown>).fields,
        },
        callOptionsFor(req),
      );
      reply.code(201);
      return { data: presentApiKey(res.key!), key: res.secret };
    },
  );

  const get = contractRoute("getApiKey");
  api.get(
    "/keys/:hash",
    {
      config: MANAGEMENT,
      validatorCompiler: get.validatorCompiler,
      schema: {
        operationId: "getApiKey",
        summary: "Get an API key",
        tags,
        ...get.schema,
        response: { 200: dataOf(apiKeySchema), ...errorResponses(401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { hash } = req.params as { hash: string };
      return { data: presentApiKey((await client.getKey({ hash }, callOptionsFor(req))).key!) };
    },
  );

  const update = contractRoute("updateApiKey", UpdateApiKeyRequest);
  api.patch(
    "/keys/:hash",
    {
      config: MANAGEMENT,
      validatorCompiler: update.validatorCompiler,
      schema: {
        operationId: "updateApiKey",
        summary: "Rename, disable or enable an API key, or set its limits",
        description: "Omitted fields stay unchanged. Disabling takes effect from the next request. Any other field is refused with 400 naming it.",
        tags,
        ...update.schema,
        response: { 200: dataOf(apiKeySchema), ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { hash } = req.params as { hash: string };
      const b = (req.body ?? {}) as { name?: string; disabled?: boolean };
      const limits = keyLimitsOf(b as Record<string, unknown>);
      const paths = [...(["name", "disabled"] as const).filter((f) => Object.hasOwn(b, f)), ...limits.paths];
      const res = await client.updateKey(
        { hash, ...(b.name !== undefined ? { name: b.name } : {}), disabled: b.disabled === true, ...limits.fields, updateMask: { paths } },
        callOptionsFor(req),
      );
      return { data: presentApiKey(res.key!) };
    },
  );

  const remove = contractRoute("deleteApiKey");
  api.delete(
    "/keys/:hash",
    {
      config: MANAGEMENT,
      validatorCompiler: remove.validatorCompiler,
      schema: {
        operationId: "deleteApiKey",
        summary: "Delete (revoke) an API key",
        description: "The key is refused (401) from the next request on and is no longer listed.",
        tags,
        ...remove.schema,
        response: { 200: deletedSchema, ...errorResponses(401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { hash } = req.params as { hash: string };
      await client.deleteKey({ hash }, callOptionsFor(req));
      return { deleted: true as const };
    },
  );
}
