/**
 * GET /api/v1/audit: the organization's audit log (who changed what, when; never a secret),
 * newest first. Management keys only.
 */
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { AuditService } from "../../gen/portico/audit/v1/audit_service_pb.js";
import type { GatewayContext } from "../context.js";
import { parsePage } from "../pagination.js";
import { auditEventSchema, presentAuditEvent } from "../presenters/management.js";
import { callOptionsFor } from "../rpc.js";
import { errorResponses, paginationQuerySchema } from "../schemas.js";
import { MANAGEMENT, pageOf, queryString } from "./management-schemas.js";

const FILTERS = { action: "action", action_prefix: "actionPrefix", target_type: "targetType", target_id: "targetId" } as const;

export async function registerAuditRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(AuditService, ctx.transport);
  api.get(
    "/audit",
    {
      config: MANAGEMENT,
      schema: {
        operationId: "listAuditEvents",
        summary: "Read the audit log",
        description: "Every change made through the management API or `portico admin`, newest first.",
        tags: ["audit"],
        querystring: {
          type: "object",
          properties: {
            ...paginationQuerySchema.properties,
            action: { type: "string", description: "Only this action, for example key.create." },
            action_prefix: {
              type: "string",
              description: "Only actions starting with this text, for example `key.` (every key change) or `preset`; case-sensitive, at most 100 characters.",
            },
            target_type: { type: "string", description: "Only this kind of resource, for example api_key." },
            target_id: { type: "string", description: "Only this resource." },
          },
        },
        response: { 200: pageOf(auditEventSchema), ...errorResponses(400, 401, 403, 500) },
      },
    },
    async (req) => {
      const filters: Record<string, string> = {};
      for (const [param, field] of Object.entries(FILTERS)) {
        const value = queryString(req.query, param);
        if (value !== undefined) filters[field] = value;
      }
      const res = await client.listAuditEvents({ ...parsePage(req.query), ...filters }, callOptionsFor(req));
      return { data: res.events.map(presentAuditEvent), total_count: res.totalCount };
    },
  );
}
