/**
 * BYOK provider credentials under /api/v1/byok: create (200, per the description), list, get,
 * update and delete. All five need a management key (the core checks it). Bodies are checked with the
 * contract's definitions (src/contract/requests/byok.ts), which the core applies too (so gRPC callers
 * meet the same rules) and from which the OpenAPI body schemas are derived. The raw key passes
 * through to the core and nowhere else: it is not logged and never appears in a response.
 */
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { ByokService } from "../../gen/portico/byok/v1/byok_service_pb.js";
import { BYOK_SETTINGS, CreateByokKeyRequest, UpdateByokKeyRequest } from "../../contract/requests/byok.js";
import { requestSchemas } from "../../contract/requests/index.js";
import type { GatewayContext } from "../context.js";
import { parsePage } from "../pagination.js";
import { byokCredentialSchema, presentByokCredential } from "../presenters/byok.js";
import { callOptionsFor } from "../rpc.js";
import { contractBodyValidator, errorResponses, paginationQuerySchema } from "../schemas.js";

/** Body fields an update may name, in update-mask order. */
const UPDATABLE = BYOK_SETTINGS;

const idParams = {
  type: "object",
  required: ["id"],
  properties: { id: { type: "string", description: "Credential id (UUID)." } },
} as const;

const single = { type: "object", required: ["data"], properties: { data: byokCredentialSchema } } as const;

type Body = Record<string, unknown>;

const listInit = (v: unknown) => (Array.isArray(v) ? { values: v as string[] } : undefined);

/** The credential settings create and update share (the schema has already checked their types). */
function settingsInit(b: Body) {
  return {
    ...(typeof b.name === "string" ? { name: b.name } : {}),
    allowedApiKeyHashes: listInit(b.allowed_api_key_hashes),
    allowedModels: listInit(b.allowed_models),
    allowedUserIds: listInit(b.allowed_user_ids),
    disabled: b.disabled === true,
    isRequired: b.is_required === true,
    isFallback: b.is_fallback === true,
    isByokOnly: b.is_byok_only === true,
    ...(typeof b.declared_zdr === "boolean" ? { declaredZdr: b.declared_zdr } : {}),
  };
}

function query(req: FastifyRequest): Record<string, unknown> {
  return (req.query ?? {}) as Record<string, unknown>;
}

export async function registerByokRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(ByokService, ctx.transport);
  const tags = ["byok"];

  api.post(
    "/byok",
    {
      config: { authorizeFirst: { management: true } },
      validatorCompiler: contractBodyValidator(CreateByokKeyRequest),
      schema: {
        operationId: "createByokKey",
        summary: "Create a BYOK provider credential",
        description: "Stores an upstream provider key, encrypted at rest. Answers 200 with the credential and its masked label.",
        tags,
        body: requestSchemas(ctx.brand).createByokKey,
        response: { 200: single, ...errorResponses(400, 401, 403, 500) },
      },
    },
    async (req) => {
      const b = req.body as Body;
      const res = await client.createByokCredential(
        {
          key: b.key as string,
          provider: b.provider as string,
          ...(typeof b.workspace_id === "string" ? { workspaceId: b.workspace_id } : {}),
          ...settingsInit(b),
        },
        callOptionsFor(req),
      );
      return { data: presentByokCredential(res.credential!) };
    },
  );

  api.get(
    "/byok",
    {
      config: { authorizeFirst: { management: true } },
      schema: {
        operationId: "listByokKeys",
        summary: "List BYOK provider credentials",
        tags,
        querystring: {
          type: "object",
          properties: {
            ...paginationQuerySchema.properties,
            provider: { type: "string", description: "Only credentials of this provider slug." },
            workspace_id: { type: "string", description: "Workspace (UUID); omitted = the default workspace." },
          },
        },
        response: {
          200: {
            type: "object",
            required: ["data", "total_count"],
            properties: { data: { type: "array", items: byokCredentialSchema }, total_count: { type: "integer" } },
          },
          ...errorResponses(400, 401, 403, 500),
        },
      },
    },
    async (req) => {
      const page = parsePage(req.query);
      const q = query(req);
      const res = await client.listByokCredentials(
        {
          offset: page.offset,
          limit: page.limit,
          ...(typeof q.provider === "string" ? { provider: q.provider } : {}),
          ...(typeof q.workspace_id === "string" ? { workspaceId: q.workspace_id } : {}),
        },
        callOptionsFor(req),
      );
      return { data: res.credentials.map(presentByokCredential), total_count: res.totalCount };
    },
  );

  api.get(
    "/byok/:id",
    {
      config: { authorizeFirst: { management: true } },
      schema: {
        operationId: "getByokKey",
        summary: "Get a BYOK provider credential",
        tags,
        params: idParams,
        response: { 200: single, ...errorResponses(401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      const res = await client.getByokCredential({ id }, callOptionsFor(req));
      return { data: presentByokCredential(res.credential!) };
    },
  );

  api.patch(
    "/byok/:id",
    {
      config: { authorizeFirst: { management: true } },
      validatorCompiler: contractBodyValidator(UpdateByokKeyRequest),
      schema: {
        operationId: "updateByokKey",
        summary: "Update a BYOK provider credential",
        description: "Omitted fields stay unchanged; null clears a nullable field. A new key rotates the key material.",
        tags,
        params: idParams,
        body: requestSchemas(ctx.brand).updateByokKey,
        response: { 200: single, ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      const b = (req.body ?? {}) as Body;
      const paths = UPDATABLE.filter((f) => Object.hasOwn(b, f));
      const res = await client.updateByokCredential(
        {
          id,
          ...(typeof b.key === "string" ? { key: b.key } : {}),
          ...settingsInit(b),
          updateMask: { paths },
        },
        callOptionsFor(req),
      );
      return { data: presentByokCredential(res.credential!) };
    },
  );

  api.delete(
    "/byok/:id",
    {
      config: { authorizeFirst: { management: true } },
      schema: {
        operationId: "deleteByokKey",
        summary: "Delete a BYOK provider credential",
        description: "Wipes the key material and marks the credential deleted.",
        tags,
        params: idParams,
        response: {
          200: { type: "object", required: ["deleted"], properties: { deleted: { type: "boolean", const: true } } },
          ...errorResponses(401, 403, 404, 500),
        },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      await client.deleteByokCredential({ id }, callOptionsFor(req));
      return { deleted: true as const };
    },
  );
}
