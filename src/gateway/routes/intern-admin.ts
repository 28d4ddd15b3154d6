/**
 * Intern management under /api/v1/interns: list, create (host token shown once), get, update,
 * delete, suspend, provision (resume), host token issue/rotate and revoke. Intern resources are
 * returned bare. Outside the interns programme every path is 404; inside it a management key is
 * required; an intern of another workspace is 404 like a missing one. The core decides all of it.
 */
import { Reason } from "../../contract/reasons.js";
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { InternAdminService } from "../../gen/portico/internadmin/v1/internadmin_service_pb.js";
import type { GatewayContext } from "../context.js";
import { internSchema, presentIntern } from "../presenters/management.js";
import { callOptionsFor } from "../rpc.js";
import { errorResponses } from "../schemas.js";
import { queryString, refuseUnknownFields } from "./management-schemas.js";
import { Code } from "@connectrpc/connect";
import { serviceError } from "../../lib/service-error.js";

const idParams = {
  type: "object",
  required: ["internId"],
  properties: { internId: { type: "string", description: "The intern (UUID)." } },
} as const;

const settings = {
  name: { type: "string", description: "2 to 17 characters: lowercase letters and digits in dash-separated groups, starting with a letter." },
  description: { type: ["string", "null"], description: "At most 2000 characters." },
  instructions: { type: ["string", "null"], description: "Handed to the agent at the start of every session; at most 100000 characters." },
  model: { type: ["string", "null"], description: "author/slug (optionally :variant), 1 to 200 characters; null = the agent's default." },
} as const;

const CONFIG = { errorMetadata: true } as const;
const flag = (name: string) => ({ type: "object", required: [name], properties: { [name]: { type: "boolean", const: true } } }) as const;

type Body = Record<string, unknown>;
const body = (req: FastifyRequest): Body => ((req.body ?? {}) as Body);
const optional = (b: Body, name: string) => (typeof b[name] === "string" ? { [name]: b[name] as string } : {});

/** Operations that take no body: any field is refused. */
function noFields(req: FastifyRequest): void {
  refuseUnknownFields(req.body ?? {}, []);
}

export async function registerInternAdminRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(InternAdminService, ctx.transport);
  const tags = ["interns"];

  api.get(
    "/interns",
    {
      config: CONFIG,
      schema: {
        operationId: "listInterns",
        summary: "List the workspace's interns",
        description: "Newest first. Page with starting_after = the previous page's next_cursor.",
        tags,
        querystring: {
          type: "object",
          properties: {
            limit: { type: ["integer", "string"], description: "1 to 500 (default 50)." },
            starting_after: { type: "string", description: "next_cursor of the previous page." },
            status: { type: "string", description: "Comma-separated statuses (running, awaiting_host, stopped), at most 8." },
            workspace_id: { type: "string", description: "Must be the API key's workspace." },
          },
        },
        response: {
          200: {
            type: "object",
            required: ["data", "has_more"],
            properties: { data: { type: "array", items: internSchema }, has_more: { type: "boolean" }, next_cursor: { type: "string" } },
          },
          ...errorResponses(400, 401, 403, 404, 500),
        },
      },
    },
    async (req) => {
      const rawLimit = queryString(req.query, "limit");
      if (rawLimit !== undefined && !/^\d+$/.test(rawLimit)) {
        throw serviceError(Reason.BAD_REQUEST, "limit must be an integer between 1 and 500", { field: "limit" });
      }
      const limit = rawLimit === undefined ? 50 : Math.min(Number(rawLimit), 1_000_000);
      const status = queryString(req.query, "status");
      const after = queryString(req.query, "starting_after");
      const ws = queryString(req.query, "workspace_id");
      const res = await client.listInterns(
        {
          limit: limit === 0 ? -1 : limit,
          statuses: status ? status.split(",").map((s) => s.trim()) : [],
          ...(after !== undefined ? { startingAfter: after } : {}),
          ...(ws !== undefined ? { workspaceId: ws } : {}),
        },
        callOptionsFor(req),
      );
      return {
        data: res.interns.map((i) => presentIntern(i)),
        has_more: res.hasMore,
        ...(res.nextCursor !== undefined ? { next_cursor: res.nextCursor } : {}),
      };
    },
  );

  api.post(
    "/interns",
    {
      config: CONFIG,
      schema: {
        operationId: "createIntern",
        summary: "Create an intern",
        description: "Answers 201 with the intern and, this once, its host token in host_token.",
        tags,
        body: {
          type: "object",
          properties: {
            ...settings,
            workspace_id: { type: "string", description: "Must be the API key's workspace." },
            provision: { type: "boolean", description: "Accepted for compatibility: an intern is ready as soon as its host attaches." },
          },
        },
        response: { 201: internSchema, ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
    },
    async (req, reply) => {
      const b = body(req);
      refuseUnknownFields(b, ["name", "description", "instructions", "model", "workspace_id", "provision"]);
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

  api.get(
    "/interns/:internId",
    {
      config: CONFIG,
      schema: {
        operationId: "getIntern",
        summary: "Get an intern with its host status and live sessions",
        tags,
        params: idParams,
        response: { 200: internSchema, ...errorResponses(401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { internId } = req.params as { internId: string };
      return presentIntern((await client.getIntern({ id: internId }, callOptionsFor(req))).intern!);
    },
  );

  api.patch(
    "/interns/:internId",
    {
      config: CONFIG,
      schema: {
        operationId: "updateIntern",
        summary: "Rename an intern or change its description, instructions or model",
        description: "Omitted fields stay unchanged; null clears. New instructions apply from the next session. Other fields are refused.",
        tags,
        params: idParams,
        body: { type: "object", properties: settings },
        response: { 200: internSchema, ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
    },
    async (req) => {
      const { internId } = req.params as { internId: string };
      const b = body(req);
      const fields = ["name", "description", "instructions", "model"] as const;
      refuseUnknownFields(b, fields);
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

  api.delete(
    "/interns/:internId",
    {
      config: CONFIG,
      schema: {
        operationId: "deleteIntern",
        summary: "Delete an intern",
        description:
          "Deletes the intern with its sessions (202). Refused with 409 while a run streams or waits for an answer. " +
          "An optional body {acknowledge_workspace_loss: boolean} is accepted for compatibility; any other field is refused.",
        tags,
        params: idParams,
        response: { 202: flag("deleting"), ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
    },
    async (req, reply) => {
      const { internId } = req.params as { internId: string };
      const b = body(req);
      refuseUnknownFields(b, ["acknowledge_workspace_loss"]);
      if (b.acknowledge_workspace_loss !== undefined && typeof b.acknowledge_workspace_loss !== "boolean") {
        throw serviceError(Reason.BAD_REQUEST, "acknowledge_workspace_loss must be a boolean", { field: "acknowledge_workspace_loss" });
      }
      await client.deleteIntern({ id: internId }, callOptionsFor(req));
      reply.code(202);
      return { deleting: true as const };
    },
  );

  api.post(
    "/interns/:internId/suspend",
    {
      config: CONFIG,
      schema: {
        operationId: "suspendIntern",
        summary: "Suspend an intern",
        description: "Closes its host link; hosts cannot attach and prompts answer 409 until it is provisioned again.",
        tags,
        params: idParams,
        response: { 200: flag("suspended"), ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { internId } = req.params as { internId: string };
      noFields(req);
      await client.suspendIntern({ id: internId }, callOptionsFor(req));
      return { suspended: true as const };
    },
  );

  api.post(
    "/interns/:internId/provision",
    {
      config: CONFIG,
      schema: {
        operationId: "provisionIntern",
        summary: "Resume a suspended intern",
        description: "Answers 202; its host may attach again.",
        tags,
        params: idParams,
        response: { 202: flag("provisioning"), ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req, reply) => {
      const { internId } = req.params as { internId: string };
      noFields(req);
      await client.provisionIntern({ id: internId }, callOptionsFor(req));
      reply.code(202);
      return { provisioning: true as const };
    },
  );

  api.post(
    "/interns/:internId/host-token",
    {
      config: CONFIG,
      schema: {
        operationId: "issueInternHostToken",
        summary: "Issue or rotate an intern's host token",
        description: "Returns a new host token once, replacing any previous one (a host attached with the old token is disconnected).",
        tags,
        params: idParams,
        response: {
          200: { type: "object", required: ["host_token", "intern"], properties: { host_token: { type: "string" }, intern: internSchema } },
          ...errorResponses(400, 401, 403, 404, 500),
        },
      },
    },
    async (req) => {
      const { internId } = req.params as { internId: string };
      noFields(req);
      const res = await client.issueHostToken({ id: internId }, callOptionsFor(req));
      return { host_token: res.hostToken, intern: presentIntern(res.intern!) };
    },
  );

  api.delete(
    "/interns/:internId/host-token",
    {
      config: CONFIG,
      schema: {
        operationId: "revokeInternHostToken",
        summary: "Revoke an intern's host token",
        description: "New attaches are refused and the intern's host link is closed.",
        tags,
        params: idParams,
        response: { 200: flag("revoked"), ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { internId } = req.params as { internId: string };
      noFields(req);
      await client.revokeHostToken({ id: internId }, callOptionsFor(req));
      return { revoked: true as const };
    },
  );
}
