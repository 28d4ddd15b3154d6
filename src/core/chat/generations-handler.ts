/** GenerationsService: a generation by id, for keys of the organization that made it. */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Db } from "../../db/client.js";
import type { GenerationsService } from "../../gen/portico/generations/v1/generations_service_pb.js";
import { callerOf } from "../auth.js";
import { invalidArgument, notFound } from "../errors.js";
import type { GenerationStore } from "./generations.js";

const opt = <T>(v: T | null): T | undefined => (v === null ? undefined : v);

export function createGenerationsHandler(deps: { db: Db; store: GenerationStore }): ServiceImpl<typeof GenerationsService> {
  return {
    async getGeneration(req, ctx) {
      const caller = callerOf(ctx);
      if (!/^gen-[0-9a-f-]{36}$/.test(req.id)) throw invalidArgument("id", "id must be a generation id (gen-…)");
      // A generation answered a moment ago may still be queued: write the queue first.
      await deps.store.flush();
      const row = await deps.db.generation.findFirst({ where: { id: req.id, organizationId: caller.organizationId } });
      if (!row) throw notFound("No such generation");
      return {
        generation: {
          id: row.id,
          keyHash: row.keyHash,
          requestedModel: row.requestedModel,
          model: opt(row.model),
          provider: opt(row.provider),
          credentialId: opt(row.credentialId),
          presetSlug: opt(row.presetSlug),
          presetVersion: opt(row.presetVersion),
          streamed: row.streamed,
          promptTokens: opt(row.promptTokens),
          completionTokens: opt(row.completionTokens),
          totalTokens: opt(row.totalTokens),
          latencyMs: row.latencyMs,
          timeToFirstTokenMs: opt(row.timeToFirstTokenMs),
          status: row.status,
          finishReason: opt(row.finishReason),
          errorCode: opt(row.errorCode),
          attempts: row.attempts,
          createdAt: timestampFromDate(row.createdAt),
          cachedTokens: opt(row.cachedTokens),
          cacheWriteTokens: opt(row.cacheWriteTokens),
          reasoningTokens: opt(row.reasoningTokens),
          costFemtoUsd: opt(row.costFemtoUsd),
          upstreamInferenceCostFemtoUsd: opt(row.upstreamCostFemtoUsd),
          isByok: row.credentialSource === "byok",
          catalogModel: opt(row.catalogModel),
          uncatalogued: row.provider !== null && row.catalogModel === null,
        },
      };
    },
  };
}
