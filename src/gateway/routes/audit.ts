/**
 * GET /api/v1/audit: the organization's audit log (who changed what, when; never a secret),
 * newest first. Management keys only.
 */
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { AuditService } from "../../gen/portico/audit/v1/audit_service_pb.js";
import type { GatewayContext } from "../context.js";
import { auditEventSchema, presentAuditEvent } from "../presenters/management.js";
import { callOptionsFor } from "../rpc.js";
import { contractRoute, errorResponses, listOf, pageOfResponse, pageRequest } from "../schemas.js";
import { MANAGEMENT } from "./management-schemas.js";

const FILTERS = { action: "action", action_prefix: "actionPrefix", target_type: "targetType", target_id: "targetId" } as const;
type Query = { limit?: number; offset?: number; starting_after?: string } & { [K in keyof typeof FILTERS]?: string };

export async function registerAuditRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(AuditService, ctx.transport);
  const list = contractRoute("listAuditEvents");
  api.get<{ Querystring: Query }>(
    "/audit",
    {
      config: MANAGEMENT,
      validatorCompiler: list.validatorCompiler,
      schema: {
        operationId: "listAuditEvents",
        summary: "Read the audit log",
        description: "Every change made through the management API or `portico admin`, newest first.",
        tags: ["audit"],
        ...list.schema,
        response: { 200: listOf(auditEventSchema), ...errorResponses(400, 401, 403, 500) },
      },
    },
    async (req) => {
      const filters: Record<string, string> = {};
      for (const [param, field] of Object.entries(FILTERS)) {
        const value = req.query[param as keyof typeof FILTERS];
        if (value !== undefined) filters[field] = value;
      }
      const res = await client.listAuditEvents({ ...pageRequest(req.query), ...filters }, callOptionsFor(req));
      return { data: res.events.map(presentAuditEvent), total_count: res.totalCount, ...pageOfResponse(res) };
    },
  );
}
