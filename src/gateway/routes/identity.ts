import { createClient } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { IdentityService } from "../../gen/portico/identity/v1/identity_service_pb.js";
import type { GatewayContext } from "../context.js";
import { callOptionsFor } from "../rpc.js";
import { errorResponses } from "../schemas.js";

/** GET /api/v1/key: who the API key says the caller is (label and hash, never the key). */
export async function registerIdentityRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(IdentityService, ctx.transport);
  api.get(
    "/key",
    {
      schema: {
        operationId: "getCurrentKey",
        summary: "Describe the calling API key",
        tags: ["identity"],
        response: {
          200: {
            type: "object",
            required: ["data"],
            properties: {
              data: {
                type: "object",
                required: ["label", "hash", "is_management_key", "organization_id", "workspace_id", "user_id"],
                properties: {
                  label: { type: "string" },
                  hash: { type: "string" },
                  is_management_key: { type: "boolean" },
                  organization_id: { type: "string" },
                  workspace_id: { type: "string" },
                  user_id: { type: "string" },
                  interns_programme: { type: "boolean" },
                },
              },
            },
          },
          ...errorResponses(401, 403),
        },
      },
    },
    async (req) => {
      const c = await client.getCaller({}, callOptionsFor(req));
      return {
        data: {
          label: c.keyLabel,
          hash: c.keyHash,
          is_management_key: c.isManagementKey,
          organization_id: c.organizationId,
          workspace_id: c.workspaceId,
          user_id: c.userId,
          interns_programme: c.internsProgramme,
        },
      };
    },
  );
}
