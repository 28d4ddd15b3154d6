/**
 * Intern sessions under /api/v1/interns/{internId}/sessions/{sessionId}: read a session with the
 * question its paused run waits for, and cancel the run holding it (streaming or paused). Any key that
 * may prompt the intern (and so answer its questions) may use them; the core decides everything.
 */
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { InternsService } from "../../gen/portico/interns/v1/interns_service_pb.js";
import type { GatewayContext } from "../context.js";
import { presentSession, sessionSchema } from "../presenters/intern-sessions.js";
import { callOptionsFor } from "../rpc.js";
import { contractRoute, errorResponses } from "../schemas.js";
import { EmptyRequest } from "../../contract/requests/management.js";

type Params = { internId: string; sessionId: string };

export async function registerInternSessionRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(InternsService, ctx.transport);
  const tags = ["interns"];

  const getInternSessionContract = contractRoute("getInternSession");
  api.get<{ Params: Params }>(
    "/interns/:internId/sessions/:sessionId",
    {
      validatorCompiler: getInternSessionContract.validatorCompiler,
      config: { errorMetadata: true },
      schema: {
        operationId: "getInternSession",
        summary: "Get an intern session and the question it waits for",
        description:
          "state is streaming, paused or idle. While paused, pending_question is the provide_input tool call the stream carried " +
          "(tool_call_id, name, the exact arguments object, deadline_at), so a caller that lost the stream can answer it or cancel the run.",
        tags,
        ...getInternSessionContract.schema,
        response: { 200: sessionSchema, ...errorResponses(400, 401, 403, 404, 500) },
      },
    },
    async (req) => {
      const { internId, sessionId } = req.params;
      const res = await client.getSession({ internId, sessionId }, callOptionsFor(req));
      return presentSession(res.session!);
    },
  );

  const cancelInternSessionRunContract = contractRoute("cancelInternSessionRun", EmptyRequest);
  api.post<{ Params: Params }>(
    "/interns/:internId/sessions/:sessionId/cancel",
    {
      validatorCompiler: cancelInternSessionRunContract.validatorCompiler,
      config: { errorMetadata: true },
      schema: {
        operationId: "cancelInternSessionRun",
        summary: "Cancel the run holding an intern session",
        description:
          "Cancels the session's run whether it is streaming or paused, and answers with the session (state idle): a new prompt may " +
          "follow at once. A stream still open on the run ends with a run_ended error chunk, the final chunk and [DONE]. " +
          "409 conflict when no run holds the session. The body must be empty.",
        tags,
        ...cancelInternSessionRunContract.schema,
        response: { 200: sessionSchema, ...errorResponses(400, 401, 403, 404, 409, 500) },
      },
    },
    async (req) => {
      const { internId, sessionId } = req.params;
      const res = await client.cancelSessionRun({ internId, sessionId }, callOptionsFor(req));
      return presentSession(res.session!);
    },
  );
}
