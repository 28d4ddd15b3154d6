/**
 * API keys under /api/v1/keys: list, create (plaintext returned once, 201), get, update (rename,
 * disable/enable) and delete (revoke at once). Management keys only (the core checks it); a key of
 * another organization is 404 like a missing one.
 */
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { KeysService } from "../../gen/portico/keys/v1/keys_service_pb.js";
import type { GatewayContext } from "../context.js";
import { KEY_LIMIT_FIELDS, keyLimitProperties, keyLimitsOf } from "./limit-fields.js";
import { parsePage } from "../pagination.js";
import { apiKeySchema, presentApiKey } from "../presenters/management.js";
import { callOptionsFor } from "../rpc.js";
import { errorResponses, paginationQuerySchema } from "../schemas.js";
import { dataOf, deletedSchema, MANAGEMENT, pageOf, refuseUnknownFields, queryBool, queryString } from "./management-schemas.js";

const hashParams = {
  type: "object",
  required: ["hash"],
  properties: { hash: { type: "string", description: "The key's hash (64 lowercase hex characters)." } },
} as const;

const nameField = { type: "string", description: "Display name, 1 to 255 characters." } as const;

export async function registerKeyRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(KeysService, ctx.transport);
  const tags = ["keys"];

  api.get(
    "/keys",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "listApiKeys",
        summary: "List the organization's API keys",
        description: "Oldest first. Deleted keys are never listed; disabled keys only with include_disabled=true.",
        tags,
        querystring: {
          type: "object",
          properties: {
            ...paginationQuerySchema.properties,
            include_disabled: { type: ["string", "boolean"], description: "true to list disabled keys too (default false)." },
            workspace_id: { type: "string", description: "Only keys of this workspace." },
          },
        },
        response: { 200: pageOf(apiKeySchema), ...errorResponses(400, 401, 403, 500) },
      },
    },
    async (req) => {
      const page = parsePage(req.query);
      const workspaceId = queryString(req.query, "workspace_id");
      const res = await client.listKeys(
        { ...page, includeDisabled: queryBool(req.query, "include_disabled", false), ...(workspaceId !== undefined ? { workspaceId } : {}) },
        callOptionsFor(req),
      );
      return { data: res.keys.map(presentApiKey), total_count: res.totalCount };
    },
  );

  api.post(
    "/keys",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "createApiKey",
        summary: "Create an API key",
        description: "Answers 201 with the key's record and, this once, the plaintext key in `key`.",
        tags,
        body: {
          type: "object",
          required: ["name"],
          properties: {
            name: nameField,
            workspace_id: { type: "string", description: "Workspace (UUID) of the organization; omitted = the default workspace." },
            is_management_key: { type: "boolean", description: "Create a management key (default false)." },
            ...keyLimitProperties,
          },
        },
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

  api.get(
    "/keys/:hash",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "getApiKey",
        summary: "Get an API key",
        tags,
        params: hashParams,
        response: { 200: dataOf(apiKeySchema), ...errorResponses(401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { hash } = req.params as { hash: string };
      return { data: presentApiKey((await client.getKey({ hash }, callOptionsFor(req))).key!) };
    },
  );

  api.patch(
    "/keys/:hash",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "updateApiKey",
        summary: "Rename, disable or enable an API key, or set its limits",
        description: "Omitted fields stay unchanged. Disabling takes effect from the next request. Any other field is refused with 400 naming it.",
        tags,
        params: hashParams,
        body: {
          type: "object",
          properties: { name: nameField, disabled: { type: "boolean", description: "true disables the key, false enables it." }, ...keyLimitProperties },
        },
        response: { 200: dataOf(apiKeySchema), ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { hash } = req.params as { hash: string };
      const b = (req.body ?? {}) as { name?: string; disabled?: boolean };
      refuseUnknownFields(b, ["name", "disabled", ...KEY_LIMIT_FIELDS]);
      const limits = keyLimitsOf(b as Record<string, unknown>);
      const paths = [...(["name", "disabled"] as const).filter((f) => Object.hasOwn(b, f)), ...limits.paths];
      const res = await client.updateKey(
        { hash, ...(b.name !== undefined ? { name: b.name } : {}), disabled: b.disabled === true, ...limits.fields, updateMask: { paths } },
        callOptionsFor(req),
      );
      return { data: presentApiKey(res.key!) };
    },
  );

  api.delete(
    "/keys/:hash",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "deleteApiKey",
        summary: "Delete (revoke) an API key",
        description: "The key is refused (401) from the next request on and is no longer listed.",
        tags,
        params: hashParams,
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
