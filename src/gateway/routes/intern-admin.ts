/**
 * Intern management under /api/v1/interns: list, create (host token shown once), get, update,
 * delete, suspend, provision (resume), host token issue/rotate and revoke. Intern resources are
 * returned bare. Outside the interns programme every path is 404; inside it a management key is
 * required; an intern of another workspace is 404 like a missing one. The core decides all of it.
 */
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { InternAdminService } from "../../gen/portico/internadmin/v1/internadmin_service_pb.js";
import type { GatewayContext } from "../context.js";
import { internSchema, presentIntern } from "../presenters/management.js";
import { callOptionsFor } from "../rpc.js";
import { contractRoute, errorResponses, listOf, pageOfResponse, pageRequest } from "../schemas.js";
import {
  CreateInternRequest,
  DeleteInternRequest,
  EmptyRequest,
  UpdateInternRequest,
} from "../../contract/requests/management.js";

type ListQuery = { limit?: number; offset?: number; starting_after?: string; status?: string; workspace_id?: string };

const CONFIG = { errorMetadata: true } as const;
const flag = (name: string) => ({ type: "object", required: [name], properties: { [name]: { type: "boolean", const: true } } }) as const;

type Body = Record<string, unknown>;
const body = (req: FastifyRequest): Body => ((req.body ?? {}) as Body);
const optional = (b: Body, name: string) => (typeof b[name] === "string" ? { [name]: b[name] as string } : {});

export async function registerInternAdminRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(InternAdminService, ctx.transport);
  const tags = ["interns"];

  const listInternsContract = contractRoute("listInterns");
  api.get<{ Querystring: ListQuery }>(
    "/interns",
    {
      validatorCompiler: listInternsContract.validatorCompiler,
      config: CONFIG,
      schema: {
        operationId: "listInterns",
        summary: "List the workspace's interns",
        description: "Newest first. Page with starting_after = the previous page's next_cursor (the rule of every list).",
        tags,
        ...listInternsContract.schema,
        response: {
          200: listOf(internSchema, { totalCount: false }),
          ...errorResponses(400, 401, 403, 404, 500),
        },
      },
    },
    async (req) => {
      const { status, workspace_id: ws } = req.query;
      const res = await client.listInterns(
        {
          ...pageRequest(req.query),
          statuses: status ? status.split(",").map((s) => s.trim()) : [],
          ...(ws !== undefined ? { workspaceId: ws } : {}),
        },
        callOptionsFor(req),
      );
      return { data: res.interns.map((i) => presentIntern(i)), ...pageOfResponse(res) };
    },
  );

  const createInternContract = contractRoute("createIntern", CreateInternRequest);
  api.post(
    "/interns",
    {
      validatorCompiler: createInternContract.validatorCompiler,
      config: CONFIG,
      schema: {
        operationId: "createIntern",
        summary: "Create an intern",
        description: "Answers 201 with the intern and, this once, its host token in host_token.",
        tags,
        ...createInternContract.schema,
        response: { 201: internSchema, ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
    },
    async (req, reply) => {
      const b = body(req);
      const res = await client.createIntern(
        {
          name: typeof b.name === "string" ? b.name : "",
          ...optional(b, "description"),
          ...optional(b, "instructions"),
          ...optional(b, "model"),
          ...(typeof b.workspace_id === "string" ? { workspaceId: b.workspace_id } : {}),
        },
        callOptionsFor(req),
      );
      reply.code(201);
      return presentIntern(res.intern!, res.hostToken);
    },
  );

  const getInternContract = contractRoute("getIntern");
  api.get(
    "/interns/:internId",
    {
      validatorCompiler: getInternContract.validatorCompiler,
      config: CONFIG,
      schema: {
        operationId: "getIntern",
        summary: "Get an intern with its host status and live sessions",
        tags,
        ...getInternContract.schema,
        response: { 200: internSchema, ...errorResponses(401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { internId } = req.params as { internId: string };
      return presentIntern((await client.getIntern({ id: internId }, callOptionsFor(req))).intern!);
    },
  );

  const updateInternContract = contractRoute("updateIntern", UpdateInternRequest);
  api.patch(
    "/interns/:internId",
    {
      validatorCompiler: updateInternContract.validatorCompiler,
      config: CONFIG,
      schema: {
        operationId: "updateIntern",
        summary: "Rename an intern or change its description, instructions or model",
        description: "Omitted fields stay unchanged; null clears. New instructions apply from the next session. Other fields are refused.",
        tags,
        ...updateInternContract.schema,
        response: { 200: internSchema, ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
    },
    async (req) => {
      const { internId } = req.params as { internId: string };
      const b = body(req);
      const fields = ["name", "description", "instructions", "model"] as const;
      const res = await client.updateIntern(
        {
          id: internId,
          ...optional(b, "name"),
          ...optional(b, "description"),
          ...optional(b, "instructions"),
          ...optional(b, "model"),
          updateMask: { paths: fields.filter((f) => Object.hasOwn(b, f)) },
        },
        callOptionsFor(req),
      );
      return presentIntern(res.intern!);
    },
  );

  const deleteInternContract = contractRoute("deleteIntern", DeleteInternRequest);
  api.delete(
    "/interns/:internId",
    {
      validatorCompiler: deleteInternContract.validatorCompiler,
      config: CONFIG,
      schema: {
        operationId: "deleteIntern",
        summary: "Delete an intern",
        description:
          "Deletes the intern with its sessions (202). Refused with 409 while a run streams or waits for an answer. " +
          "An optional body {acknowledge_workspace_loss: boolean} is accepted for compatibility; any other field is refused.",
        tags,
        ...deleteInternContract.schema,
        response: { 202: flag("deleting"), ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
    },
    async (req, reply) => {
      const { internId } = req.params as { internId: string };
      const b = body(req);
      await client.deleteIntern({ id: internId }, callOptionsFor(req));
      reply.code(202);
      return { deleting: true as const };
    },
  );

  const suspendInternContract = contractRoute("suspendIntern", EmptyRequest);
  api.post(
    "/interns/:internId/suspend",
    {
      validatorCompiler: suspendInternContract.validatorCompiler,
      config: CONFIG,
      schema: {
        operationId: "suspendIntern",
        summary: "Suspend an intern",
        description: "Closes its host link; hosts cannot attach and prompts answer 409 until it is provisioned again.",
        tags,
        ...suspendInternContract.schema,
        response: { 200: flag("suspended"), ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { internId } = req.params as { internId: string };
      await client.suspendIntern({ id: internId }, callOptionsFor(req));
      return { suspended: true as const };
    },
  );

  const provisionInternContract = contractRoute("provisionIntern", EmptyRequest);
  api.post(
    "/interns/:internId/provision",
    {
      validatorCompiler: provisionInternContract.validatorCompiler,
      config: CONFIG,
      schema: {
        operationId: "provisionIntern",
        summary: "Resume a suspended intern",
        description: "Answers 202; its host may attach again.",
        tags,
        ...provisionInternContract.schema,
        response: { 202: flag("provisioning"), ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req, reply) => {
      const { internId } = req.params as { internId: string };
      await client.provisionIntern({ id: internId }, callOptionsFor(req));
      reply.code(202);
      return { provisioning: true as const };
    },
  );

  const issueInternHostTokenContract = contractRoute("issueInternHostToken", EmptyRequest);
  api.post(
    "/interns/:internId/host-token",
    {
      validatorCompiler: issueInternHostTokenContract.validatorCompiler,
      config: CONFIG,
      schema: {
        operationId: "issueInternHostToken",
        summary: "Issue or rotate an intern's host token",
        description: "Returns a new host token once, replacing any previous one (a host attached with the old token is disconnected).",
        tags,
        ...issueInternHostTokenContract.schema,
        response: {
          200: { type: "object", required: ["host_token", "intern"], properties: { host_token: { type: "string" }, intern: internSchema } },
          ...errorResponses(400, 401, 403, 404, 500),
        },
      },
    },
    async (req) => {
      const { internId } = req.params as { internId: string };
      const res = await client.issueHostToken({ id: internId }, callOptionsFor(req));
      return { host_token: res.hostToken, intern: presentIntern(res.intern!) };
    },
  );

  const revokeInternHostTokenContract = contractRoute("revokeInternHostToken", EmptyRequest);
  api.delete(
    "/interns/:internId/host-token",
    {
      validatorCompiler: revokeInternHostTokenContract.validatorCompiler,
      config: CONFIG,
      schema: {
        operationId: "revokeInternHostToken",
        summary: "Revoke an intern's host token",
        description: "New attaches are refused and the intern's host link is closed.",
        tags,
        ...revokeInternHostTokenContract.schema,
        response: { 200: flag("revoked"), ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { internId } = req.params as { internId: string };
      await client.revokeHostToken({ id: internId }, callOptionsFor(req));
      return { revoked: true as const };
    },
  );
}
