/**
 * BYOK provider credentials under /api/v1/byok: create (200, per the description), list, get,
 * update and delete. All five need a management key (the core checks it). Bodies are checked with the
 * contract's definitions (src/contract/requests/byok.ts), which the core applies too (so gRPC callers
 * meet the same rules) and from which the OpenAPI body schemas are derived. The raw key passes
 * through to the core and nowhere else: it is not logged and never appears in a response.
 */
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { ByokService } from "../../gen/portico/byok/v1/byok_service_pb.js";
import { BYOK_SETTINGS, CreateByokKeyRequest, UpdateByokKeyRequest } from "../../contract/requests/byok.js";
import type { GatewayContext } from "../context.js";
import { byokCredentialSchema, presentByokCredential } from "../presenters/byok.js";
import { callOptionsFor } from "../rpc.js";
import { contractRoute, errorResponses, listOf, pageOfResponse, pageRequest } from "../schemas.js";

/** Body fields an update may name, in update-mask order. */
const UPDATABLE = BYOK_SETTINGS;

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
    ...(typeof b.weight === "number" ? { weight: b.weight } : {}),
  };
}

type ListQuery = { limit?: number; offset?: number; starting_after?: string; provider?: string; workspace_id?: string };

export async function registerByokRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(ByokService, ctx.transport);
  const tags = ["byok"];

  const createByokKeyContract = contractRoute("createByokKey", CreateByokKeyRequest);
  api.post(
    "/byok",
    {
      validatorCompiler: createByokKeyContract.validatorCompiler,
      config: { authorizeFirst: { management: true } },
      schema: {
        operationId: "createByokKey",
        summary: "Create a BYOK provider credential",
        description: "Stores an upstream provider key, encrypted at rest. Answers 200 with the credential and its masked label.",
        tags,
        ...createByokKeyContract.schema,
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

  const listByokKeysContract = contractRoute("listByokKeys");
  api.get(
    "/byok",
    {
      validatorCompiler: listByokKeysContract.validatorCompiler,
      config: { authorizeFirst: { management: true } },
      schema: {
        operationId: "listByokKeys",
        summary: "List BYOK provider credentials",
        tags,
        ...listByokKeysContract.schema,
        response: {
          200: listOf(byokCredentialSchema),
          ...errorResponses(400, 401, 403, 500),
        },
      },
    },
    async (req) => {
      const q = req.query as ListQuery;
      const res = await client.listByokCredentials(
        {
          ...pageRequest(q),
          ...(q.provider !== undefined ? { provider: q.provider } : {}),
          ...(q.workspace_id !== undefined ? { workspaceId: q.workspace_id } : {}),
        },
        callOptionsFor(req),
      );
      return { data: res.credentials.map(presentByokCredential), total_count: res.totalCount, ...pageOfResponse(res) };
    },
  );

  const getByokKeyContract = contractRoute("getByokKey");
  api.get(
    "/byok/:id",
    {
      validatorCompiler: getByokKeyContract.validatorCompiler,
      config: { authorizeFirst: { management: true } },
      schema: {
        operationId: "getByokKey",
        summary: "Get a BYOK provider credential",
        tags,
        ...getByokKeyContract.schema,
        response: { 200: single, ...errorResponses(401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      const res = await client.getByokCredential({ id }, callOptionsFor(req));
      return { data: presentByokCredential(res.credential!) };
    },
  );

  const updateByokKeyContract = contractRoute("updateByokKey", UpdateByokKeyRequest);
  api.patch(
    "/byok/:id",
    {
      validatorCompiler: updateByokKeyContract.validatorCompiler,
      config: { authorizeFirst: { management: true } },
      schema: {
        operationId: "updateByokKey",
        summary: "Update a BYOK provider credential",
        description: "Omitted fields stay unchanged; null clears a nullable field. A new key rotates the key material.",
        tags,
        ...updateByokKeyContract.schema,
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

  const deleteByokKeyContract = contractRoute("deleteByokKey");
  api.delete(
    "/byok/:id",
    {
      validatorCompiler: deleteByokKeyContract.validatorCompiler,
      config: { authorizeFirst: { management: true } },
      schema: {
        operationId: "deleteByokKey",
        summary: "Delete a BYOK provider credential",
        description: "Wipes the key material and marks the credential deleted.",
        tags,
        ...deleteByokKeyContract.schema,
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
