/**
 * EmbeddingsService (docs/dialects.md, "Embeddings"): an OpenAI embeddings body routed through the chat
 * pipeline's own stages, so catalog routing, credentials, the key's limits, cost and generations are the chat
 * completions' (src/core/chat/pipeline):
 *
 *   record → limits → rate → cost → decode (EmbeddingsRequest) → plan → embed → spend → execute
 *
 * - decode: the body against EmbeddingsRequest (400 naming the field, unknown fields included); a preset is
 *   refused (presets configure chat requests); a catalog model that is not an embedding model (its
 *   `output_modalities` lack `embeddings`) is refused naming `model`, and `dimensions` for a catalog model whose
 *   `supported_parameters` lack it, naming `dimensions`.
 * - plan: the chat plan stage, unchanged (`model` through the catalog, the BYOK flags, the operator's keys).
 * - embed: each planned attempt's provider adapter is replaced by its provider's embeddings client
 *   (providers/embeddings.ts) presented to the execute stage as an adapter whose answer carries the vectors and
 *   the usage (prompt tokens only): the attempt loop, timeouts, health memory (cool-downs) and errors are the chat ones. A
 *   provider without an embeddings API (Anthropic) is refused naming `model`.
 * - spend: the chat reservation: the body's bytes bound its prompt tokens at the endpoint's prompt price (an
 *   embedding endpoint's completion price is 0), settled at the generation's cost.
 * - cost and record: the usage priced at the endpoint's catalog price (`usage.cost`, `is_byok`, `cost_details`)
 *   and one generation record (no completion tokens, no finish reason).
 */
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { JsonObject } from "@bufbuild/protobuf";
import type { EmbeddingsService } from "../../gen/portico/embeddings/v1/embeddings_service_pb.js";
import { EmbeddingsRequest } from "../../contract/requests/embeddings-request.js";
import { callerOf } from "../auth.js";
import { checkRules, invalidArgument } from "../errors.js";
import type { Catalog } from "../catalog/catalog.js";
import { requestBudgetOf, withUpstreamTime, type ChatHandlerDeps } from "./chat-handler.js";
import type { CanonicalRequest } from "./model.js";
import { createCostStage, type PricedUsage } from "./pipeline/cost.js";
import { createExecuteStage } from "./pipeline/execute.js";
import { createLimitsStage } from "./pipeline/limits.js";
import { createPlanStage } from "./pipeline/plan.js";
import { createRateStage } from "./pipeline/rate.js";
import { createRecordStage } from "./pipeline/record.js";
import { createSpendStage } from "./pipeline/spend.js";
import { compose, newCall, type Attempt, type ChatStage } from "./pipeline/stage.js";
import { embedderFor, encodeBase64Floats, type Embedder } from "./providers/embeddings.js";
import type { ChatCompletion, ProviderAdapter } from "./providers/types.js";
import { nowSeconds } from "./providers/http.js";

export type EmbeddingsHandlerDeps = Pick<
  ChatHandlerDeps,
  "generations" | "credentials" | "shared" | "providers" | "catalog" | "limits" | "slots" | "spend" | "rates" | "logger" | "timeouts" | "health" | "endpointStats" | "random" | "accountRouting"
>;

/** The answer of an embeddings attempt, as the execute stage carries it (a completion without choices). */
interface EmbeddingAnswer extends ChatCompletion {
  vectors: number[][];
}

const isEmbeddingModel = (modalities: readonly string[]) => modalities.includes("embeddings");

/** The body against EmbeddingsRequest; presets and catalogued models that are not embedding models refused. */
function decodeStage(catalog: Catalog): ChatStage {
  return {
    name: "decode",
    run(call, next) {
      const body = checkRules(() => EmbeddingsRequest.parse(call.request));
      const model = body.model;
      if (model.startsWith("@preset/")) {
        throw invalidArgument("model", "model: presets configure chat requests and cannot serve embeddings; name an embedding model such as openai/text-embedding-3-small");
      }
      const slash = model.indexOf("/");
      const catalogued = catalog.model(model) ?? (slash > 0 ? catalog.endpointFor(model.slice(0, slash).toLowerCase(), model.slice(slash + 1))?.model : undefined);
      if (catalogued && !isEmbeddingModel(catalogued.architecture.output_modalities)) {
        throw invalidArgument("model", `model ${shortened(model)} is not an embedding model (the model catalog lists its outputs as ${catalogued.architecture.output_modalities.join(", ") || "none"})`);
      }
      if (catalogued && body.dimensions !== undefined && !catalogued.supported_parameters.includes("dimensions")) {
        throw invalidArgument("dimensions", `dimensions: ${catalogued.slug} answers vectors of one size only (the model catalog does not list dimensions among its parameters)`);
      }
      call.request = body as unknown as CanonicalRequest;
      return next();
    },
  };
}

/** An embeddings client presented as the adapter the execute stage calls (non-streamed `complete` only). */
function asAdapter(format: ProviderAdapter["format"], embedder: Embedder): ProviderAdapter {
  return {
    format,
    upstreamBody: (c) => embedder.upstreamBody(c),
    async complete(c) {
      const r = await embedder.embed(c);
      const answer: EmbeddingAnswer = {
        id: "",
        object: "chat.completion",
        created: nowSeconds(),
        model: r.model ?? c.model,
        choices: [],
        usage: { prompt_tokens: r.promptTokens, completion_tokens: 0, total_tokens: r.promptTokens },
        vectors: r.vectors,
      };
      return answer;
    },
    stream() {
      throw new Error("embeddings are never streamed");
    },
  };
}

/** Each planned attempt served by its provider's embeddings client; a provider without one refused naming `model`. */
const embedStage: ChatStage = {
  name: "embed",
  run(call, next) {
    const kept: Attempt[] = [];
    const without = new Set<string>();
    for (const a of call.attempts) {
      const embedder = embedderFor(a.adapter);
      if (!embedder) {
        without.add(a.provider);
        continue;
      }
      // Token ids sent to a text-only endpoint are refused here, before any reservation or upstream call.
      embedder.upstreamBody(a.call);
      kept.push({ ...a, adapter: asAdapter(a.adapter.format, embedder) });
    }
    if (kept.length === 0) {
      throw invalidArgument("model", `model ${shortened(String(call.request.model))}: ${[...without].join(", ")} has no embeddings API served here (OpenAI-compatible and Gemini endpoints have)`);
    }
    call.attempts = kept;
    return next();
  },
};

export function createEmbeddingsHandler(deps: EmbeddingsHandlerDeps): ServiceImpl<typeof EmbeddingsService> {
  const log = deps.logger.child({ component: "embeddings" });
  const pipeline = compose([
    createRecordStage({ generations: deps.generations }),
    createLimitsStage({ limiter: deps.slots, maxConcurrentPerKey: deps.limits.maxConcurrentPerKey }),
    createRateStage({ limiter: deps.rates }),
    createCostStage({ catalog: deps.catalog }),
    decodeStage(deps.catalog),
    createPlanStage({
      credentials: deps.credentials,
      shared: deps.shared,
      providers: deps.providers,
      maxAttempts: deps.limits.maxAttempts,
      catalog: deps.catalog,
      ...(deps.endpointStats ? { stats: deps.endpointStats } : {}),
      health: deps.health,
      ...(deps.random ? { random: deps.random } : {}),
      ...(deps.accountRouting ? { accountFilters: deps.accountRouting } : {}),
    }),
    embedStage,
    createSpendStage({ catalog: deps.catalog, store: deps.spend, reservationTtlMs: deps.limits.spendReservationTtlMs, logger: log }),
    createExecuteStage({ logger: log, timeouts: deps.timeouts, health: deps.health }),
  ]);

  return {
    async createEmbeddings(req, ctx: HandlerContext) {
      const body = (req.body ?? {}) as JsonObject;
      const call = newCall(callerOf(ctx), ctx.signal, false, body as unknown as CanonicalRequest, requestBudgetOf(ctx, deps.timeouts.budgetMs));
      const outcome = await pipeline(call).catch((err: unknown) => Promise.reject(withUpstreamTime(err, call.track.upstreamMs)));
      if (outcome.kind !== "completion") throw new Error("the embeddings pipeline answered with a stream");
      const answer = outcome.completion as EmbeddingAnswer & { provider?: string };
      const base64 = body.encoding_format === "base64";
      const usage = answer.usage as PricedUsage;
      const response = {
        object: "list",
        data: answer.vectors.map((v, index) => ({ object: "embedding", index, embedding: base64 ? encodeBase64Floats(v) : v })),
        model: String(body.model),
        usage: {
          prompt_tokens: usage.prompt_tokens,
          total_tokens: usage.total_tokens,
          cost: usage.cost ?? null,
          ...(usage.is_byok !== undefined ? { is_byok: usage.is_byok } : {}),
          ...(usage.cost_details ? { cost_details: usage.cost_details } : {}),
        },
        id: call.track.id,
        provider: answer.provider ?? call.track.provider ?? "",
      };
      return { responseJson: JSON.stringify(response), upstreamMs: call.track.upstreamMs, provider: call.track.provider ?? "", id: call.track.id };
    },
  };
}

function shortened(model: string): string {
  return model.length > 128 ? `${model.slice(0, 128)}…` : model;
}
