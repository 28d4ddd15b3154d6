/**
 * Workspaces under /api/v1/workspaces and their members: list, create (201), get, update, delete,
 * members list/add/remove. Management keys only (the core checks it); a workspace of another
 * organization, or a deleted one, is 404 like a missing one.
 */
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { WorkspacesService } from "../../gen/portico/workspaces/v1/workspaces_service_pb.js";
import type { GatewayContext } from "../context.js";
import { workspaceLimitsOf } from "./limit-fields.js";
import {
  AddWorkspaceMembersRequest,
  CreateWorkspaceRequest,
  RemoveWorkspaceMembersRequest,
  UpdateWorkspaceRequest,
} from "../../contract/requests/management.js";
import { presentWorkspace, presentWorkspaceMember, workspaceMemberSchema, workspaceSchema } from "../presenters/management.js";
import { callOptionsFor } from "../rpc.js";
import { contractRoute, errorResponses, listOf, pageOfResponse, pageRequest } from "../schemas.js";
import { dataOf, deletedSchema, MANAGEMENT } from "./management-schemas.js";

type PageQuery = { limit?: number; offset?: number; starting_after?: string };

export async function registerWorkspaceRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(WorkspacesService, ctx.transport);
  const tags = ["workspaces"];

  const listWorkspacesContract = contractRoute("listWorkspaces");
  api.get(
    "/workspaces",
    {
      config: MANAGEMENT,
      validatorCompiler: listWorkspacesContract.validatorCompiler,
      schema: {
        operationId: "listWorkspaces",
        summary: "List the organization's workspaces",
        tags,
        ...listWorkspacesContract.schema,
        response: { 200: listOf(workspaceSchema), ...errorResponses(400, 401, 403, 500) },
      },
    },
    async (req) => {
      const res = await client.listWorkspaces(pageRequest(req.query as PageQuery), callOptionsFor(req));
      return { data: res.workspaces.map(presentWorkspace), total_count: res.totalCount, ...pageOfResponse(res) };
    },
  );

  const createWorkspaceContract = contractRoute("createWorkspace", CreateWorkspaceRequest);
  api.post(
    "/workspaces",
    {
      config: MANAGEMENT,
      validatorCompiler: createWorkspaceContract.validatorCompiler,
      schema: {
        operationId: "createWorkspace",
        summary: "Create a workspace",
        description: "Answers 201. The calling key's user becomes a member. A slug already used in the organization is 409.",
        tags,
        ...createWorkspaceContract.schema,
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

  const getWorkspaceContract = contractRoute("getWorkspace");
  api.get(
    "/workspaces/:id",
    {
      config: MANAGEMENT,
      validatorCompiler: getWorkspaceContract.validatorCompiler,
      schema: {
        operationId: "getWorkspace",
        summary: "Get a workspace",
        tags,
        ...getWorkspaceContract.schema,
        response: { 200: dataOf(workspaceSchema), ...errorResponses(401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      return { data: presentWorkspace((await client.getWorkspace({ id }, callOptionsFor(req))).workspace!) };
    },
  );

  const updateWorkspaceContract = contractRoute("updateWorkspace", UpdateWorkspaceRequest);
  api.patch(
    "/workspaces/:id",
    {
      config: MANAGEMENT,
      validatorCompiler: updateWorkspaceContract.validatorCompiler,
      schema: {
        operationId: "updateWorkspace",
        summary: "Update a workspace",
        description: "Omitted fields stay unchanged; description null clears it.",
        tags,
        ...updateWorkspaceContract.schema,
        response: { 200: dataOf(workspaceSchema), ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      const b = (req.body ?? {}) as { name?: string; slug?: string; description?: string | null };
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

  const deleteWorkspaceContract = contractRoute("deleteWorkspace");
  api.delete(
    "/workspaces/:id",
    {
      config: MANAGEMENT,
      validatorCompiler: deleteWorkspaceContract.validatorCompiler,
      schema: {
        operationId: "deleteWorkspace",
        summary: "Delete a workspace",
        description: "Refused with 409 while the workspace holds active API keys.",
        tags,
        ...deleteWorkspaceContract.schema,
        response: { 200: deletedSchema, ...errorResponses(401, 403, 404, 409, 500) },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      await client.deleteWorkspace({ id }, callOptionsFor(req));
      return { deleted: true as const };
    },
  );

  const listWorkspaceMembersContract = contractRoute("listWorkspaceMembers");
  api.get(
    "/workspaces/:id/members",
    {
      config: MANAGEMENT,
      validatorCompiler: listWorkspaceMembersContract.validatorCompiler,
      schema: {
        operationId: "listWorkspaceMembers",
        summary: "List a workspace's members",
        tags,
        ...listWorkspaceMembersContract.schema,
        response: { 200: listOf(workspaceMemberSchema), ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      const res = await client.listWorkspaceMembers({ workspaceId: id, ...pageRequest(req.query as PageQuery) }, callOptionsFor(req));
      return { data: res.members.map(presentWorkspaceMember), total_count: res.totalCount, ...pageOfResponse(res) };
    },
  );

  const addWorkspaceMembersContract = contractRoute("addWorkspaceMembers", AddWorkspaceMembersRequest);
  api.post(
    "/workspaces/:id/members/add",
    {
      config: MANAGEMENT,
      validatorCompiler: addWorkspaceMembersContract.validatorCompiler,
      schema: {
        operationId: "addWorkspaceMembers",
        summary: "Add members to a workspace",
        description:
          "user_ids name users of the organization; emails may name new users, who join the organization. 1 to 100 in all. Answers with the named users as members.",
        tags,
        ...addWorkspaceMembersContract.schema,
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

  const removeWorkspaceMembersContract = contractRoute("removeWorkspaceMembers", RemoveWorkspaceMembersRequest);
  api.post(
    "/workspaces/:id/members/remove",
    {
      config: MANAGEMENT,
      validatorCompiler: removeWorkspaceMembersContract.validatorCompiler,
      schema: {
        operationId: "removeWorkspaceMembers",
        summary: "Remove members from a workspace",
        description: "Users who are not members are skipped; removed_count says how many were removed.",
        tags,
        ...removeWorkspaceMembersContract.schema,
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
