/**
 * The chat pipeline's one stage contract (docs/architecture.md, "The chat pipeline").
 *
 * A stage is `run(call, next)`: it may read and change the call (the request, the planned attempts, what will
 * be recorded), call `next()` once to run the rest of the chain and get its outcome, and change or wrap that
 * outcome on the way back; or answer without calling `next()` (a cache hit), or throw a ConnectError (a
 * refusal). Streaming and non-streaming requests go through the same chain: the outcome is either a complete
 * answer or a stream of events that begins only once an attempt produced its first event, so every error
 * before the first byte is thrown (and becomes the HTTP/gRPC error), and a stage that must act after a stream
 * ends wraps `events`.
 *
 * Adding a stage: one module exporting a `ChatStage` factory, and one line at its place in the chain's list
 * (`createChatStages` in chat-handler.ts; every dialect runs that list, pipeline/chain.ts).
 */
import { generationId } from "../generation-id.js";
import type { Caller } from "../../auth.js";
import type { CanonicalRequest, CanonicalResponse, PluginReport, StreamEvent, Usage } from "../model.js";
import type { ProviderAdapter, UpstreamCall } from "../providers/index.js";
import type { Endpoint } from "../../catalog/types.js";
import type { ServerToolSession, ServerToolsRecord } from "../server-tools/session.js";
import type { FailedAttempt } from "../seams.js";
import type { RawSlot } from "../raw-events.js";
import type { RequestSpans } from "./trace.js";

/** One (provider, model, credential) the execute stage may call, in order. */
export interface Attempt {
  provider: string;
  /** The model as the caller named it (`<provider>/<model>`). */
  requestedModel: string;
  credentialId: string;
  credentialSource: "byok" | "shared";
  adapter: ProviderAdapter;
  call: UpstreamCall;
  /** The catalog model this attempt's endpoint belongs to; null when uncatalogued (the plan stage, docs/routing.md). */
  catalogModel?: string | null;
  /** The catalog endpoint, when catalogued (its prices, limits and terms). */
  endpoint?: Endpoint;
  /** The endpoint's key in the health memory (routing/health.ts `endpointKey`). */
  healthKey?: string;
}

/** The inbound dialects (docs/dialects.md). */
export type Dialect = "chat" | "messages" | "responses" | "gemini";

/** What the record stage writes of the request (generations.ts); stages fill it as they learn it. */
export interface Tracking {
  id: string;
  start: number;
  startedAt: number;
  streamed: boolean;
  /**
   * The API dialect the request came in (`chat`, `messages`, `responses`, `gemini`; docs/dialects.md): each
   * dialect's handler sets it after newCall.
   */
  dialect: Dialect;
  requestedModel: string;
  model: string | null;
  provider: string | null;
  credentialId: string | null;
  credentialSource: "byok" | "shared" | null;
  presetSlug: string | null;
  presetVersion: number | null;
  attempts: number;
  usage: Usage | null;
  finishReason: string | null;
  timeToFirstTokenMs: number | null;
  /** Time spent waiting on providers (the execute stage adds each attempt's wait; the overhead header subtracts it). */
  upstreamMs: number;
  status: "pending" | "success" | "error" | "cancelled";
  errorCode: number | null;
  /** The catalog model that priced the answer (the cost stage); null while none did (uncatalogued). */
  catalogModel: string | null;
  /** The generation's cost at the served endpoint's prices (the cost stage, docs/catalog.md); null when unpriced. */
  cost: GenerationCost | null;
  /** What the caller said about the request (the validate and preset stages, context.ts); recorded as sent. */
  context: RequestContext;
  /** What the request's plugins did, in the order they ran (the plugins stage, docs/plugins.md); empty when none ran. */
  plugins: PluginReport[];
  /** The response cache (the cache stage, docs/operations.md): "hit" answered from it, "miss" asked but not found, null not asked. */
  cache: "hit" | "miss" | null;
  /** The server tools that ran (the server-tools stage and the execute stage's loop, docs/plugins.md); null when none were offered. */
  serverTools: ServerToolsRecord | null;
  /**
   * Of the usage's `server_tool_use.web_search_requests`, the searches Portico's own `web_search` server tool ran
   * through its search engine (the loop): the operator's cost, not priced at the provider's `web_search` price.
   */
  porticoSearches: number;
  /** Each upstream attempt and why it ended, in order (the execute stage; docs/operations.md, "Retries and fallback"). */
  attemptsLog: AttemptLogEntry[];
  /** The attempts that failed and why (the execute stage), for the metrics; null until one failed. */
  failedAttempts: FailedAttempt[] | null;
  /**
   * Model calls made on behalf of this request besides its own answer (the fusion plugin's panel, docs/plugins.md):
   * their usage and cost are added to the answer's (the cost stage) and the generation's (the record stage).
   */
  nested: NestedCall[];
  /**
   * The model the request named when a run credential replaced it with the intern's (the validate stage,
   * docs/interns.md): recorded as the generation's `requested_model`; null otherwise.
   */
  agentModel: string | null;
}

/**
 * One upstream attempt as the generation records it (`attempts_log`, snake_case as on the wire): which
 * provider, model and kind of credential (never its id or key), the provider's status (null when it sent none
 * or the attempt was skipped), why it ended, how long it took, the wait the provider asked for, and the
 * backoff slept before it when it retried the same candidate.
 */
export interface AttemptLogEntry {
  provider: string;
  model: string;
  credential_source: "byok" | "shared";
  status: number | null;
  /** `served`, `cooling` (skipped: its credential was cooling) or a failure reason (providers/types.ts FailureReason). */
  reason: string;
  duration_ms: number;
  retry_after_ms?: number;
  backoff_ms?: number;
}

/** One call made on behalf of a request (a fusion panel member that answered): its usage and cost. */
export interface NestedCall {
  usage: Usage;
  /** Its cost at its endpoint's prices (femto-USD), split as the cost details are; null when uncatalogued. */
  cost: { prompt: bigint; completion: bigint; total: bigint } | null;
  paidBy: "byok" | "platform";
}

/** The request's `user`, session, `trace` and `metadata`, as the generation records them (JSON text for the objects). */
export interface RequestContext {
  user: string | null;
  /** The body's `session_id`, else the `x-session-id` header. */
  sessionId: string | null;
  traceId: string | null;
  trace: string | null;
  metadata: string | null;
  /** `metadata` pairs and known `trace` keys as filter terms (context.ts). */
  contextTerms: string | null;
}

/** A generation's cost. BYOK-served calls are priced too, but paid by the customer's own provider key. */
export interface GenerationCost {
  /** The provider's price of the generation, in femto-dollars (1e-15 USD). */
  femtoUsd: bigint;
  paidBy: "byok" | "platform";
  /** What the caller's account pays when it differs from the rule above (calls of mixed payers: fusion); absent: the rule. */
  accountFemtoUsd?: bigint;
}

/** The state of one request as it moves through the chain. */
export interface ChatCall {
  readonly caller: Caller;
  /** Aborts when the caller goes away; passed to every upstream request. */
  readonly signal: AbortSignal;
  readonly streamed: boolean;
  /** The request, decoded from its dialect (validated by the validate stage, changed by the preset stage). */
  request: CanonicalRequest;
  /** The attempts, in order (the plan stage fills them, at most the operator's bound; the execute stage runs them). */
  attempts: Attempt[];
  /** Planned attempts the plan stage left out because of the attempt bound (PORTICO_CHAT_MAX_ATTEMPTS). */
  attemptsNotTried: number;
  /** What will be recorded. */
  readonly track: Tracking;
  /** The caller's own time budget for the request, in ms, when it set a lower one than the operator's. */
  budgetMs?: number;
  /** The `x-session-id` header, when sent (the body's `session_id` wins; context.ts). */
  sessionHeader?: string;
  /**
   * A streamed request whose events leave as JSON text in the chat-completions dialect (the gateway's `json_text`):
   * the adapters leave each event's upstream text here for a same-dialect pass-through (../raw-events.ts).
   */
  rawEvents?: RawSlot;
  /** The request's server tools, when it has any (the server-tools stage; the execute stage runs the loop). */
  serverTools?: ServerToolSession;
  /**
   * Cost the spend stage reserves on top of the request's own largest cost (femto-USD): model calls a plugin makes
   * on the request's behalf before its own call (the fusion panel, and what the panel's answers add to the judge's
   * prompt). Platform-paid calls only.
   */
  reserveExtra?: bigint;
  /** The trace stage's state for this call when it is traced (src/core/chat/pipeline/trace.ts; tracing on, sampled). */
  traceSpans?: RequestSpans;
  /**
   * Work a plugin defers until the spend stage reserved (or found no limit): the fusion panel, so that a caller over
   * its limit is refused before any panel call. Run in order, right before the rest of the chain.
   */
  afterReserve?: Array<() => Promise<void>>;
}

export type ChatOutcome =
  | { kind: "completion"; completion: CanonicalResponse }
  | { kind: "stream"; events: AsyncIterable<StreamEvent> };

export type Next = () => Promise<ChatOutcome>;

export interface ChatStage {
  /** A short name for logs and docs: "validate", "preset", "plan", "execute", "record". */
  readonly name: string;
  run(call: ChatCall, next: Next): Promise<ChatOutcome>;
}

/**
 * Runs `stages` in order; the last one must answer without calling `next()`. A stage with nothing to do for a
 * request returns `next()` from a plain (not async) `run`: an async pass-through costs a promise and two turns
 * more. A stage's synchronous throw becomes the rejection of its `run`, as from an async one.
 */
export function compose(stages: readonly ChatStage[]): (call: ChatCall) => Promise<ChatOutcome> {
  const dispatch = (call: ChatCall, i: number): Promise<ChatOutcome> => {
    const stage = stages[i];
    if (!stage) return Promise.reject(new Error("the chat pipeline ended without an answer"));
    try {
      return stage.run(call, () => dispatch(call, i + 1));
    } catch (err) {
      return Promise.reject(err);
    }
  };
  return (call) => dispatch(call, 0);
}

/** A fresh call for `request` (the body as received, not yet validated). */
export function newCall(caller: Caller, signal: AbortSignal, streamed: boolean, request: CanonicalRequest, budgetMs?: number, sessionHeader?: string): ChatCall {
  const call: ChatCall = { caller, signal, streamed, request, attempts: [], attemptsNotTried: 0, track: tracking(streamed) };
  if (budgetMs !== undefined) call.budgetMs = budgetMs;
  if (sessionHeader !== undefined) call.sessionHeader = sessionHeader;
  return call;
}

function tracking(streamed: boolean): Tracking {
  return {
    id: generationId(),
    start: performance.now(),
    startedAt: Date.now(),
    streamed,
    dialect: "chat",
    requestedModel: "",
    model: null,
    provider: null,
    credentialId: null,
    credentialSource: null,
    presetSlug: null,
    presetVersion: null,
    attempts: 0,
    usage: null,
    finishReason: null,
    timeToFirstTokenMs: null,
    upstreamMs: 0,
    status: "pending",
    errorCode: null,
    catalogModel: null,
    cost: null,
    context: { user: null, sessionId: null, traceId: null, trace: null, metadata: null, contextTerms: null },
    plugins: [],
    cache: null,
    serverTools: null,
    porticoSearches: 0,
    attemptsLog: [],
    failedAttempts: null,
    nested: [],
    agentModel: null,
  };
}
