/**
 * ChatService: chat completions routed to upstream providers (issue 11), as a pipeline of stages
 * (src/core/chat/pipeline; the chain and the stage contract are in docs/architecture.md). The order is the list in
 * `createChatStages` below, which every dialect runs; chat completions fill none of its slots (pipeline/chain.ts).
 *
 * The OpenAI chat-completions dialect decodes the body into the canonical model (model.ts) and encodes the
 * answer out of it (dialects/openai-chat.ts). Responses name the provider that served them (`provider`); their
 * `id` is the generation id, under which the request is recorded (generations.ts; `GET /api/v1/generation?id=`).
 * Provider keys never leave the pipeline except in the upstream request's own authentication header.
 */
import { ConnectError, type ServiceImpl, type HandlerContext } from "@connectrpc/connect";
import type { Logger } from "pino";
import { create, type JsonObject } from "@bufbuild/protobuf";
import { CreateChatCompletionResponseSchema, StreamChatCompletionResponseSchema, type ChatService } from "../../gen/portico/chat/v1/chat_service_pb.js";
import type { GenerationRecorder } from "./seams.js";
import { callerOf } from "../auth.js";
import { UPSTREAM_MS_METADATA } from "../../contract/overhead.js";
import type { PresetsRepository } from "../presets/presets-repository.js";
import type { CredentialStore } from "./credentials/load.js";
import type { SharedCredentialStore } from "../byok/provider-keys.js";
import type { ProviderRegistry } from "./providers/index.js";
import type { ChatLimitsConfig, PluginsConfig, ServerToolsConfig } from "../../config.js";
import { createGuardedFetcher, type LookupFn } from "./server-tools/guarded-fetch.js";
import type { ConcurrencyLimiter } from "../../lib/concurrency-limiter.js";
import { decodeRequest, encodeEvent, encodeResponse } from "./dialects/openai-chat.js";
import { createRawSlot, takeRawJson } from "./raw-events.js";
import { packChunks } from "./pack.js";
import { newCall, type ChatStage } from "./pipeline/stage.js";
import { chatChain, slot, type ChainEntry } from "./pipeline/chain.js";
import { thenEvents, untilOutcome } from "./pipeline/keepalive.js";
import { sessionHeaderOf } from "./pipeline/context.js";
import { createRecordStage } from "./pipeline/record.js";
import { createTraceStage } from "./pipeline/trace.js";
import { createLimitsStage } from "./pipeline/limits.js";
import { createCostStage } from "./pipeline/cost.js";
import type { Catalog } from "../catalog/catalog.js";
import { withCatalog } from "../catalog/models-list.js";
import { createValidateStage } from "./pipeline/validate.js";
import { createPresetStage } from "./pipeline/preset.js";
import { createPlanStage } from "./pipeline/plan.js";
import { createExecuteStage, type ChatTimeouts } from "./pipeline/execute.js";
import { createSpendStage } from "./pipeline/spend.js";
import { createPluginRoutingStage, createPluginsStage } from "./pipeline/plugins/index.js";
import { createFusionRunner, type FusionRunner } from "./pipeline/plugins/fusion.js";
import type { RouterDeps } from "./pipeline/plugins/routers.js";
import { createServerToolsStage } from "./pipeline/server-tools.js";
import { createRateStage } from "./pipeline/rate.js";
import { createCacheStage } from "./pipeline/cache.js";
import { createContentStage } from "./pipeline/content.js";
import type { ContentLog } from "./content-log.js";
import type { ResponseCacheStore } from "./response-cache.js";
import type { SpendStore } from "../spend/spend-store.js";
import type { ChatRateLimiter } from "../../lib/chat-rate-limiter.js";
import type { HealthMemory } from "./routing/health.js";
import type { SessionAffinity } from "../../lib/session-affinity.js";
import { createEndpointStats, type EndpointStats } from "./routing/endpoint-stats.js";
import type { RoutingFilter } from "./routing/route.js";
import { invalidArgument } from "../errors.js";
import { checkOffsetPage } from "../paging.js";
import { bodyOf } from "./request-body.js";
import { createMessagesMethods } from "./messages-handler.js";
import { createResponsesMethods } from "./responses-handler.js";
import { createGeminiMethods } from "./gemini-handler.js";

export interface ChatHandlerDeps {
  presets: PresetsRepository;
  generations: GenerationRecorder;
  credentials: CredentialStore;
  /** The operator's shared provider keys (`portico admin provider-key`); none when absent. */
  shared?: SharedCredentialStore;
  providers: ProviderRegistry;
  /** The model catalog (docs/catalog.md): prices the answers. */
  catalog: Catalog;
  brand: string;
  /** Bounds on one request and one key (PORTICO_CHAT_MAX_ATTEMPTS, PORTICO_CHAT_MAX_CONCURRENT_PER_KEY). */
  limits: ChatLimitsConfig;
  /** Where the per-key concurrency slots are counted (this process, the serve primary, or Redis). */
  slots: ConcurrencyLimiter;
  /** Spend counters and reservations (docs/limits.md). */
  spend: SpendStore;
  /** Requests and tokens per minute per key and workspace (docs/limits.md). */
  rates: ChatRateLimiter;
  logger: Logger;
  /** First-byte limits and the request budget (operator settings). */
  timeouts: ChatTimeouts;
  /** The health memory: cool-downs of rate-limited credentials and failing endpoints (routing/health.ts). */
  health: HealthMemory;
  /** A streaming call waiting for its first chunk gets an empty message (a keepalive) this often. */
  keepaliveMs: number;
  /** Live throughput / latency per endpoint, fed by the generations recorded here; default: this handler's own. */
  endpointStats?: EndpointStats;
  /** Tracing is on (docs/operations.md, "Tracing"): the trace stage opens the chain. */
  tracing?: boolean;
  /** The load balancing draw (tests inject it); default Math.random. */
  random?: () => number;
  /** How credentials of one tier are ordered (PORTICO_CREDENTIAL_ORDER); default balanced. */
  credentialOrder?: "balanced" | "ordered";
  /** Sticky sessions' memory (docs/routing.md); none: no stickiness. */
  affinity?: SessionAffinity;
  /** The account's routing settings of a caller, as filters (docs/routing.md); none: no account settings. */
  accountRouting?: (caller: { organizationId: string; workspaceId: string }) => Promise<readonly RoutingFilter[]>;
  /** The chat plugins' settings (docs/plugins.md); default: none configured. */
  plugins?: PluginsConfig;
  /** The response cache's store (docs/operations.md, "Response cache"); none: requests asking for the cache are relayed uncached. */
  responseCache?: ResponseCacheStore;
  /** The server tools' settings (docs/plugins.md); default: no search engine, no private address allowed. */
  serverTools?: ServerToolsConfig;
  /** Content logging (docs/operations.md, "Content logging"); none: no workspace's content is kept. */
  contentLog?: ContentLog;
  /** web_fetch's resolver (tests inject one); default the system's. */
  webFetchLookup?: LookupFn;
}

const DEFAULT_SERVER_TOOLS: ServerToolsConfig = {
  maxTurns: 8,
  webFetch: { allowAddresses: [], maxBytes: 2_097_152, timeoutMs: 10_000 },
  search: { engine: undefined, searxngUrl: undefined, braveUrl: "https://api.search.brave.com", braveApiKey: undefined, timeoutMs: 10_000 },
};

/** A streamed chat message with every field at its default; each `json_text` message is a copy of it with its fields set. */
const STREAM_MESSAGE = create(StreamChatCompletionResponseSchema);
/** Likewise the `json_text` answer of a non-streamed request: no `create` (its reflection over every field) per answer. */
const COMPLETION_MESSAGE = create(CreateChatCompletionResponseSchema);

/** The header (HTTP and gRPC metadata) by which a caller lowers its request's time budget, in ms. */
export const REQUEST_TIMEOUT_HEADER = "x-request-timeout-ms";

/** A chat error carries the milliseconds spent waiting on providers before it (the gateway's overhead header). */
export function withUpstreamTime(err: unknown, upstreamMs: number): unknown {
  if (err instanceof ConnectError) err.metadata.set(UPSTREAM_MS_METADATA, upstreamMs.toFixed(3));
  return err;
}

/** The chat pipeline's stages, built once per handler (pipeline/chain.ts; docs/architecture.md, "The chat pipeline"). */
export interface ChatStages {
  /** The chain every dialect runs, in order, with the slots a dialect fills. */
  chain: readonly ChainEntry[];
  /** What counting a request's input tokens runs (pipeline/count-tokens.ts): up to planning, nothing called upstream. */
  count: readonly ChatStage[];
}

/** The chain, composed: adding a stage to every dialect is its module and one entry in `chain`. */
export function createChatStages(deps: ChatHandlerDeps): ChatStages {
  const log = deps.logger.child({ component: "chat" });
  const stats = deps.endpointStats ?? createEndpointStats();
  // Every record also feeds the endpoints' live figures (docs/routing.md, "Throughput and latency").
  const generations = {
    record(rec: Parameters<GenerationRecorder["record"]>[0]) {
      stats.observe(rec);
      deps.generations.record(rec);
    },
  };
  // The router plugins (docs/plugins.md) choose among models of providers the caller has a usable credential for.
  const routing: RouterDeps = {
    catalog: deps.catalog,
    brand: deps.brand,
    async routableProviders({ caller }) {
      const [creds, shared] = await Promise.all([deps.credentials.listAll(caller.workspaceId), deps.shared ? deps.shared.providers() : []]);
      const out = new Set<string>();
      for (const c of creds) {
        if (c.disabled || !deps.providers.get(c.provider)) continue;
        if (c.allowedApiKeyHashes && !c.allowedApiKeyHashes.includes(caller.keyHash)) continue;
        if (c.allowedUserIds && !c.allowedUserIds.includes(caller.userId)) continue;
        out.add(c.provider);
      }
      for (const s of shared) if (deps.providers.get(s.provider)) out.add(s.provider);
      return out;
    },
  };
  // The server tools (docs/plugins.md): web_fetch's guarded HTTP client is one per handler.
  const serverTools = deps.serverTools ?? DEFAULT_SERVER_TOOLS;
  const fetcher = createGuardedFetcher({ ...serverTools.webFetch, ...(deps.webFetchLookup ? { lookup: deps.webFetchLookup } : {}) });
  // The fusion server tool runs the fusion plugin's runner, whose nested calls go through this same stage (late-bound).
  let fusionRunner: FusionRunner | undefined;
  const serverToolsStage = createServerToolsStage({ brand: deps.brand, catalog: deps.catalog, config: serverTools, fetcher, fusion: () => fusionRunner! });
  const plan = createPlanStage({
    credentials: deps.credentials,
    shared: deps.shared,
    providers: deps.providers,
    maxAttempts: deps.limits.maxAttempts,
    catalog: deps.catalog,
    stats,
    health: deps.health,
    ...(deps.random ? { random: deps.random } : {}),
    ...(deps.accountRouting ? { accountFilters: deps.accountRouting } : {}),
    ...(deps.credentialOrder ? { credentialOrder: deps.credentialOrder } : {}),
    ...(deps.affinity ? { affinity: deps.affinity } : {}),
  });
  const execute = createExecuteStage({ logger: log, timeouts: deps.timeouts, health: deps.health });
  // The fusion plugin's panel members run through these same stages, as nested calls (pipeline/plugins/fusion.ts).
  const fusion = {
    brand: deps.brand,
    catalog: deps.catalog,
    searchConfigured: serverTools.search.engine !== undefined,
    stages: { serverTools: serverToolsStage, plan, execute },
  };
  fusionRunner = createFusionRunner(fusion);
  // Named: token counting runs them too (`count`).
  const validate = createValidateStage({ brand: deps.brand });
  const preset = createPresetStage({ presets: deps.presets });
  const route = createPluginRoutingStage({ config: deps.plugins, routing, fusion });

  // The one order (docs/architecture.md): a stage per line; `slot` marks where a dialect puts its own stage.
  const chain: ChainEntry[] = [
    ...(deps.tracing ? [createTraceStage()] : []),
    createRecordStage({ generations }),
    createLimitsStage({ limiter: deps.slots, maxConcurrentPerKey: deps.limits.maxConcurrentPerKey }),
    createRateStage({ limiter: deps.rates }),
    createCostStage({ catalog: deps.catalog }),
    slot("decode"),
    validate,
    createContentStage({ log: deps.contentLog }),
    preset,
    route,
    slot("serverTools", serverToolsStage),
    createCacheStage({ store: deps.responseCache, catalog: deps.catalog, logger: log }),
    plan,
    createPluginsStage({ config: deps.plugins, routing, search: serverTools.search, fusion }),
    createSpendStage({ catalog: deps.catalog, store: deps.spend, reservationTtlMs: deps.limits.spendReservationTtlMs, logger: log }),
    slot("beforeExecute"),
    execute,
  ];
  return { chain, count: [validate, preset, route, plan] };
}

export function createChatHandler(deps: ChatHandlerDeps): ServiceImpl<typeof ChatService> {
  const log = deps.logger.child({ component: "chat" });
  const stages = createChatStages(deps);
  // Chat completions fill no slot: the server-tools stage runs, the body is decoded before the chain.
  const pipeline = chatChain(stages.chain);

  /** The caller's budget: the `x-request-timeout-ms` header and the gRPC deadline, when lower than the operator's. */
  const budgetOf = (ctx: HandlerContext): number | undefined => requestBudgetOf(ctx, deps.timeouts.budgetMs);

  // The Anthropic Messages dialect: the same stages, the dialect at the edges (messages-handler.ts).
  const messages = createMessagesMethods({ stages, brand: deps.brand, logger: log, keepaliveMs: deps.keepaliveMs, budgetOf, withUpstreamTime });
  // The OpenAI Responses dialect, likewise (responses-handler.ts).
  const responses = createResponsesMethods({ stages, brand: deps.brand, keepaliveMs: deps.keepaliveMs, budgetOf, withUpstreamTime });
  // The Gemini dialect, likewise (gemini-handler.ts).
  const gemini = createGeminiMethods({ stages, brand: deps.brand, catalog: deps.catalog, logger: log, keepaliveMs: deps.keepaliveMs, budgetOf, withUpstreamTime });

  return {
    ...messages,
    ...responses,
    ...gemini,

    async createChatCompletion(req, ctx: HandlerContext) {
      const call = newCall(callerOf(ctx), ctx.signal, false, decodeRequest(bodyOf(req)), budgetOf(ctx), sessionHeaderOf(ctx));
      const outcome = await pipeline(call).catch((err: unknown) => Promise.reject(withUpstreamTime(err, call.track.upstreamMs)));
      if (outcome.kind !== "completion") throw new Error("the chat pipeline answered a non-streaming request with a stream");
      const completion = encodeResponse(outcome.completion);
      // The timing fields written in place (no object of their own spread into the answer): the same keys in the same order.
      const { upstreamMs } = call.track;
      const provider = call.track.provider ?? "";
      const cache = call.track.cache ?? "";
      return req.jsonText
        ? { ...COMPLETION_MESSAGE, completionJson: JSON.stringify(completion), upstreamMs, provider, cache }
        : { completion, upstreamMs, provider, cache };
    },

    /** The models the caller can route to (not a pipeline request: nothing is called upstream). */
    async listModels(req, ctx: HandlerContext) {
      const caller = callerOf(ctx);
      const page = checkOffsetPage(req);
      const [creds, presets, shared] = await Promise.all([
        deps.credentials.listAll(caller.workspaceId),
        // Only active presets serve requests (docs/chat.md); disabled and archived ones are not offered.
        deps.presets.listPresets(caller.workspaceId, { offset: 0, limit: 100 }, { status: "active" }),
        deps.shared ? deps.shared.providers() : [],
      ]);
      const ids = new Map<string, { ownedBy: string; created: bigint }>();
      const secs = (d: Date) => BigInt(Math.floor(d.getTime() / 1000));
      for (const c of creds) {
        if (c.disabled || !deps.providers.get(c.provider)) continue;
        if (c.allowedApiKeyHashes && !c.allowedApiKeyHashes.includes(caller.keyHash)) continue;
        if (c.allowedUserIds && !c.allowedUserIds.includes(caller.userId)) continue;
        for (const m of c.allowedModels ?? [`${c.provider}/*`]) if (!ids.has(m)) ids.set(m, { ownedBy: c.provider, created: secs(c.createdAt) });
      }
      // The operator's shared keys serve every model of their provider, unless a credential the caller is
      // governed by removes them for the whole provider (is_required).
      for (const s of shared) {
        if (!deps.providers.get(s.provider) || ids.has(`${s.provider}/*`)) continue;
        const required = creds.some(
          (c) =>
            c.provider === s.provider && !c.disabled && c.isRequired &&
            (!c.allowedApiKeyHashes || c.allowedApiKeyHashes.includes(caller.keyHash)) &&
            (!c.allowedUserIds || c.allowedUserIds.includes(caller.userId)),
        );
        if (!required) ids.set(`${s.provider}/*`, { ownedBy: s.provider, created: secs(s.createdAt) });
      }
      const models = [
        ...presets.items.map((p) => ({ id: `@preset/${p.slug}`, ownedBy: "preset", created: secs(p.createdAt) })),
        ...withCatalog(ids, deps.catalog).sort((a, b) => (a.id < b.id ? -1 : 1)),
      ];
      return { models: models.slice(page.offset, page.limit !== undefined ? page.offset + page.limit : undefined), totalCount: models.length };
    },

    /**
     * Until the first chunk, an empty message (no `chunk`) every keepalive interval, the first after at most
     * a second: the call is open and alive while a slow provider thinks. Errors before the first chunk are
     * the call's status, as without keepalives.
     */
    streamChatCompletion(req, ctx: HandlerContext) {
      let raw: ReturnType<typeof createRawSlot> | undefined;
      // The first message carries the wait on providers until the first chunk and the provider (the overhead
      // header at stream open); the others carry only their chunk.
      let timing: { upstreamMs: number; provider: string; cache: string } | undefined;
      // Until the answer begins: keepalives (a generator, started by the first read as before).
      const head = (async function* () {
        const call = newCall(callerOf(ctx), ctx.signal, true, decodeRequest(bodyOf(req)), budgetOf(ctx), sessionHeaderOf(ctx));
        raw = req.jsonText ? (call.rawEvents = createRawSlot()) : undefined;
        const pending = pipeline(call).catch((err: unknown) => Promise.reject(withUpstreamTime(err, call.track.upstreamMs)));
        const outcome = yield* untilOutcome(pending, deps.keepaliveMs, {});
        if (outcome.kind !== "stream") throw new Error("the chat pipeline answered a streaming request with a completion");
        timing = { upstreamMs: call.track.upstreamMs, provider: call.track.provider ?? "", cache: call.track.cache ?? "" };
        return outcome.events;
      })();
      // Packed (the split gateway asks): the chunks at hand in one message, the first with the timing (pack.ts).
      if (req.packChunks && req.jsonText) {
        const chunks = thenEvents(head, (event) => takeRawJson(raw!, event) ?? JSON.stringify(encodeEvent(event)));
        return packChunks(chunks, (first, more) => {
          const message = { ...STREAM_MESSAGE, chunkJson: first, moreChunksJson: more, ...timing };
          timing = undefined;
          return message;
        });
      }
      // Then one message per event, mapped by a hand-written iterator (no generator layer per chunk).
      return thenEvents(head, (event) => {
        // An upstream event passed through untouched but for `id` and `provider` leaves as its own text (raw-events.ts).
        // A copy of a default message (no `create` per chunk in the in-process transport).
        const message = raw
          ? { ...STREAM_MESSAGE, chunkJson: takeRawJson(raw, event) ?? JSON.stringify(encodeEvent(event)), ...timing }
          : { chunk: encodeEvent(event), ...timing };
        timing = undefined;
        return message;
      });
    },
  };
}

/** The caller's budget: the `x-request-timeout-ms` header and the gRPC deadline, when lower than the operator's `budgetMs`. */
export function requestBudgetOf(ctx: HandlerContext, budgetMs: number): number | undefined {
  let budget: number | undefined;
  const raw = ctx.requestHeader.get(REQUEST_TIMEOUT_HEADER);
  if (raw !== null) {
    const ms = /^\d{1,10}$/.test(raw.trim()) ? Number(raw.trim()) : Number.NaN;
    if (!(ms >= 1)) {
      throw invalidArgument(REQUEST_TIMEOUT_HEADER, `${REQUEST_TIMEOUT_HEADER} must be a whole number of milliseconds, at least 1 (at most ${budgetMs} is used)`);
    }
    budget = ms;
  }
  const deadline = ctx.timeoutMs();
  if (deadline !== undefined) budget = Math.min(budget ?? deadline, deadline);
  return budget !== undefined && budget < budgetMs ? budget : undefined;
}
