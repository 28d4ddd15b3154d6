/**
 * The seams between the chat-completions router (src/core/chat) and what it consumes: the credentials
 * a request may use for one (provider, model), and the recorder of generations. The router depends on
 * these interfaces only; src/core/chat/credentials and src/core/chat/generations implement them.
 */
import type { Caller } from "../auth.js";

/** One credential the router may try, key already decrypted (held in memory only, never logged). */
export interface CredentialCandidate {
  /** The BYOK credential id, or the operator credential id for a shared one. */
  id: string;
  source: "byok" | "shared";
  provider: string;
  apiKey: string;
}

export interface CredentialQuery {
  caller: Caller;
  /** Provider slug (a provider of the registry, src/core/chat/providers/index.ts). */
  provider: string;
  /** The model as routed, `<provider>/<model>` form stripped of nothing: e.g. `anthropic/claude-sonnet-4`. */
  model: string;
}

export interface CredentialResolver {
  /**
   * The credentials to try, in order, for one (provider, model): the caller's organization's enabled BYOK
   * credentials that allow this request (non-fallback by sort_order), then the shared operator credentials
   * unless a flag removes them, then the `is_fallback` credentials. Empty when none may serve.
   */
  candidates(query: CredentialQuery): Promise<CredentialCandidate[]>;
}

export type GenerationStatus = "success" | "error" | "cancelled";

/** What is recorded of one chat-completions request. Never message content, never a provider key. */
export interface GenerationRecord {
  id: string;
  organizationId: string;
  workspaceId: string;
  keyHash: string;
  /** The model the caller asked for (after preset resolution). */
  requestedModel: string;
  /** The model and provider that served it; null when no attempt succeeded. */
  model: string | null;
  provider: string | null;
  credentialId: string | null;
  credentialSource: "byok" | "shared" | null;
  presetSlug: string | null;
  presetVersion: number | null;
  streamed: boolean;
  promptTokens: number | null;
  completionTokens: number | null;
  totalTokens: number | null;
  /** Milliseconds from request arrival to the end of the response. */
  latencyMs: number;
  /** Milliseconds from request arrival to the first content chunk (streams), null otherwise. */
  timeToFirstTokenMs: number | null;
  status: GenerationStatus;
  finishReason: string | null;
  /** The public error code (HTTP status) when status is "error". */
  errorCode: number | null;
  attempts: number;
  createdAt: Date;
  /** Of promptTokens: cache reads, cache writes; of completionTokens: reasoning (as the provider reported them). */
  cachedTokens: number | null;
  cacheWriteTokens: number | null;
  reasoningTokens: number | null;
  /**
   * What it cost the account in femto-dollars (1e-15 USD; 0 when BYOK paid the provider) and the provider's
   * price; both null when the catalog did not price it (the cost stage, docs/catalog.md).
   */
  costFemtoUsd: bigint | null;
  upstreamCostFemtoUsd: bigint | null;
  /**
   * The catalog model (canonical slug) whose endpoint served it; null when nothing served it, or when what
   * served it is **uncatalogued** (a `<provider>/<model>` the catalog does not know, relayed as before).
   */
  catalogModel?: string | null;
  /**
   * What the caller said about the request (docs/operations.md, "Request log"): its `user`, its session
   * (`session_id`, else the `x-session-id` header), `trace.trace_id`, and the whole `trace` and `metadata`
   * objects as JSON text. Absent (undefined) is recorded as null.
   */
  user?: string | null;
  sessionId?: string | null;
  traceId?: string | null;
  trace?: string | null;
  metadata?: string | null;
  /** The filter terms of `metadata` and the known `trace` keys (pipeline/context.ts `contextTerm`). */
  contextTerms?: string | null;
  /** What the request's plugins did, as JSON text (an array of reports, docs/plugins.md); null when none ran. */
  plugins?: string | null;
  /** Whether the response cache answered it (no provider call, cost 0; docs/operations.md). Absent: false. */
  cacheHit?: boolean;
  /** The server tools that ran, as JSON text (docs/plugins.md, "Server tools"); null or absent when none were offered. */
  serverTools?: string | null;
  /** Each upstream attempt and why it ended, as JSON text (an array, docs/operations.md "Retries and fallback"); null when none was made. */
  attemptsLog?: string | null;
  /**
   * The attempts that failed, with why (not stored: the `portico_generation_attempt_failures_total` series,
   * src/core/chat/generation-metrics.ts); absent or empty when none failed.
   */
  failedAttempts?: readonly FailedAttempt[];
  /** The API dialect the request came in (`chat`, `messages`, `responses`, `gemini`); absent: null. */
  dialect?: string | null;
  /**
   * Made with an intern run's credential (docs/interns.md, "Model calls through Portico"): the intern, the run and
   * the run's caller-visible session_id; absent/null for calls made with an API key.
   */
  internId?: string | null;
  internRunId?: string | null;
  internSessionId?: string | null;
}

/** An upstream attempt that failed: its provider, its endpoint's catalog model (null: uncatalogued) and the reason. */
export interface FailedAttempt {
  provider: string;
  catalogModel: string | null;
  /** A failure reason of the attempt loop (providers/types.ts FailureReason). */
  reason: string;
}

export interface GenerationRecorder {
  /** Queues the record; never blocks the response, never throws. */
  record(rec: GenerationRecord): void;
}
