/**
 * Workspaces under /api/v1/workspaces and their members: list, create (201), get, update, delete,
 * members list/add/remove. Management keys only (the core checks it); a workspace of another
 * organization, or a deleted one, is 404 like a missing one.
 */
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { WorkspacesService } from "../../gen/portico/workspaces/v1/workspaces_service_pb.js";
import type { GatewayContext } from "../context.js";
import { WORKSPACE_LIMIT_FIELDS, workspaceLimitProperties, workspaceLimitsOf } from "./limit-fields.js";
import { parsePage } from "../pagination.js";
import { presentWorkspace, presentWorkspaceMember, workspaceMemberSchema, workspaceSchema } from "../presenters/management.js";
import { callOptionsFor } from "../rpc.js";
import { errorResponses, paginationQuerySchema } from "../schemas.js";
import { dataOf, deletedSchema, MANAGEMENT, pageOf, refuseUnknownFields } from "./management-schemas.js";

const idParams = {
  type: "object",
  required: ["id"],
  properties: { id: { type: "string", description: "Workspace id (UUID)." } },
} as const;

const fields = {
  name: { type: "string", description: "Display name, 1 to 255 characters." },
  slug: { type: "string", description: "1 to 64 lowercase letters, digits and single dashes, unique in the organization." },
} as const;

const userIds = { type: "array", items: { type: "string" }, description: "Ids of users of the organization." } as const;

export async function registerWorkspaceRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(WorkspacesService, ctx.transport);
  const tags = ["workspaces"];

  api.get(
    "/workspaces",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "listWorkspaces",
        summary: "List the organization's workspaces",
        tags,
        querystring: paginationQuerySchema,
        response: { 200: pageOf(workspaceSchema), ...errorResponses(400, 401, 403, 500) },
      },
    },
    async (req) => {
      const res = await client.listWorkspaces(parsePage(req.query), callOptionsFor(req));
      return { data: res.workspaces.map(presentWorkspace), total_count: res.totalCount };
    },
  );

  api.post(
    "/workspaces",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "createWorkspace",
        summary: "Create a workspace",
        description: "Answers 201. The calling key's user becomes a member. A slug already used in the organization is 409.",
        tags,
        body: {
          type: "object",
          required: ["name"],
          properties: { ...fields, description: { type: "string", description: "At most 2000 characters." }, ...workspaceLimitProperties },
        },
        response: { 201: dataOf(workspaceSchema), ...errorResponses(400, 401, 403, 409, 500) },
      },
    },
    async (req, reply) => {
      const b = req.body as { name: string; slug?: string; description?: string };
      const res = await client.createWorkspace(
        {
          name: b.name,
          ...(b.slug !== undefined ? { slug: b.slug } : {}),
          ...(b.description !== undefined ? { description: b.description } : {}),
          ...workspaceLimitsOf(b as Record<string, unknown>).fields,
        },
        callOptionsFor(req),
      );
      reply.code(201);
      return { data: presentWorkspace(res.workspace!) };
    },
  );

  api.get(
    "/workspaces/:id",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "getWorkspace",
        summary: "Get a workspace",
        tags,
        params: idParams,
        response: { 200: dataOf(workspaceSchema), ...errorResponses(401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      return { data: presentWorkspace((await client.getWorkspace({ id }, callOptionsFor(req))).workspace!) };
    },
  );

  api.patch(
    "/workspaces/:id",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "updateWorkspace",
        summary: "Update a workspace",
        description: "Omitted fields stay unchanged; description null clears it.",
        tags,
        params: idParams,
        body: {
          type: "object",
          properties: { ...fields, description: { type: ["string", "null"], description: "At most 2000 characters; null clears." }, ...workspaceLimitProperties },
        },
        response: { 200: dataOf(workspaceSchema), ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      const b = (req.body ?? {}) as { name?: string; slug?: string; description?: string | null };
      refuseUnknownFields(b, ["name", "slug", "description", ...WORKSPACE_LIMIT_FIELDS]);
      const limits = workspaceLimitsOf(b as Record<string, unknown>);
      const paths = [...(["name", "slug", "description"] as const).filter((f) => Object.hasOwn(b, f)), ...limits.paths];
      const res = await client.updateWorkspace(
        {
          id,
          ...limits.fields,
          ...(b.name !== undefined ? { name: b.name } : {}),
          ...(b.slug !== undefined ? { slug: b.slug } : {}),
          ...(typeof b.description === "string" ? { description: b.description } : {}),
          updateMask: { paths },
        },
        callOptionsFor(req),
      );
      return { data: presentWorkspace(res.workspace!) };
    },
  );

  api.delete(
    "/workspaces/:id",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "deleteWorkspace",
        summary: "Delete a workspace",
        description: "Refused with 409 while the workspace holds active API keys.",
        tags,
        params: idParams,
        response: { 200: deletedSchema, ...errorResponses(401, 403, 404, 409, 500) },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      await client.deleteWorkspace({ id }, callOptionsFor(req));
      return { deleted: true as const };
    },
  );

  api.get(
    "/workspaces/:id/members",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "listWorkspaceMembers",
        summary: "List a workspace's members",
        tags,
        params: idParams,
        querystring: paginationQuerySchema,
        response: { 200: pageOf(workspaceMemberSchema), ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      const res = await client.listWorkspaceMembers({ workspaceId: id, ...parsePage(req.query) }, callOptionsFor(req));
      return { data: res.members.map(presentWorkspaceMember), total_count: res.totalCount };
    },
  );

  api.post(
    "/workspaces/:id/members/add",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "addWorkspaceMembers",
        summary: "Add members to a workspace",
        description:
          "user_ids name users of the organization; emails may name new users, who join the organization. 1 to 100 in all. Answers with the named users as members.",
        tags,
        params: idParams,
        body: {
          type: "object",
          properties: { user_ids: userIds, emails: { type: "array", items: { type: "string" }, description: "Email addresses." } },
        },
        response: {
          200: { type: "object", required: ["data"], properties: { data: { type: "array", items: workspaceMemberSchema } } },
          ...errorResponses(400, 401, 403, 404, 500),
        },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      const b = (req.body ?? {}) as { user_ids?: string[]; emails?: string[] };
      const res = await client.addWorkspaceMembers({ workspaceId: id, userIds: b.user_ids ?? [], emails: b.emails ?? [] }, callOptionsFor(req));
      return { data: res.members.map(presentWorkspaceMember) };
    },
  );

  api.post(
    "/workspaces/:id/members/remove",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "removeWorkspaceMembers",
        summary: "Remove members from a workspace",
        description: "Users who are not members are skipped; removed_count says how many were removed.",
        tags,
        params: idParams,
        body: { type: "object", required: ["user_ids"], properties: { user_ids: userIds } },
        response: {
          200: { type: "object", required: ["removed_count"], properties: { removed_count: { type: "integer" } } },
          ...errorResponses(400, 401, 403, 404, 500),
        },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      const b = req.body as { user_ids: string[] };
      const res = await client.removeWorkspaceMembers({ workspaceId: id, userIds: b.user_ids }, callOptionsFor(req));
      return { removed_count: res.removedCount };
    },
  );
}
