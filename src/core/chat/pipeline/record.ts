/**
 * Stage "record": the outermost stage. Writes one generation record per request (generations.ts, through the
 * GenerationRecorder seam) once the answer is complete: after a non-streamed answer or error, after the last
 * event of a stream, or when the consumer stops reading (`cancelled`). Never blocks the response.
 */
import { ConnectError } from "@connectrpc/connect";
import { ALL_REASONS, ruleOf } from "../../../contract/reasons.js";
import { errorDetailOf } from "../../../lib/service-error.js";
import type { Caller } from "../../auth.js";
import type { GenerationRecord, GenerationRecorder } from "../seams.js";
import type { StreamEvent } from "../model.js";
import type { AttemptLogEntry, ChatCall, ChatStage, Tracking } from "./stage.js";
import { tapEvents } from "./tap.js";
import { accountCostOf, withNestedUsage } from "./cost.js";

export function createRecordStage(deps: { generations: GenerationRecorder }): ChatStage {
  const record = (track: Tracking, caller: Caller) => deps.generations.record(recordOf(track, caller));

  /** The stream's events, recording once it ends, fails or its reader stops (`cancelled`): a tap, no iterator layer of its own. */
  function recordAfter(call: ChatCall, events: AsyncIterable<StreamEvent>): AsyncIterable<StreamEvent> {
    const { track } = call;
    return tapEvents(events, {
      end(e) {
        if (e.how === "failed") failed(track, e.error, call.signal);
        else if (track.status === "pending") track.status = e.how === "done" && !call.signal.aborted ? "success" : "cancelled";
        record(track, call.caller);
      },
    });
  }

  return {
    name: "record",
    async run(call, next) {
      let outcome;
      try {
        outcome = await next();
      } catch (err) {
        failed(call.track, err, call.signal);
        record(call.track, call.caller);
        throw err;
      }
      if (outcome.kind === "stream") return { kind: "stream", events: recordAfter(call, outcome.events) };
      record(call.track, call.caller);
      return outcome;
    },
  };
}

function failed(track: Tracking, err: unknown, signal: AbortSignal): void {
  if (signal.aborted) {
    track.status = "cancelled";
    return;
  }
  track.status = "error";
  const detail = err instanceof ConnectError ? errorDetailOf(err) : undefined;
  const reason = detail ? ALL_REASONS.find((r) => ruleOf(r).wire === detail.reason) : undefined;
  track.errorCode = reason !== undefined ? ruleOf(reason).status : 500;
}

/** A token count as stored (an integer column): absent or not a count → null. */
const tokenCount = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? Math.floor(v) : null);

/**
 * The generation record of a request. One object literal with every key always present (absent values as null or
 * undefined, which the store writes as NULL), in the store's column order: every record has one shape, so the
 * store's column reads (generations.ts putValues) and the metrics' stay monomorphic; spreads of the context and of
 * optional keys made records of several shapes, each built by copying.
 */
function recordOf(track: Tracking, caller: Caller): GenerationRecord {
  // The fusion panel's calls (track.nested) count in the generation's tokens and cost.
  const usage = track.usage && track.nested.length > 0 ? withNestedUsage(track, track.usage) : track.usage;
  const context = track.context;
  const run = caller.run;
  return {
    id: track.id,
    organizationId: caller.organizationId,
    workspaceId: caller.workspaceId,
    keyHash: caller.keyHash,
    requestedModel: track.agentModel ?? track.requestedModel,
    model: track.model,
    provider: track.provider,
    credentialId: track.credentialId,
    credentialSource: track.credentialSource,
    presetSlug: track.presetSlug,
    presetVersion: track.presetVersion,
    streamed: track.streamed,
    promptTokens: usage?.prompt_tokens ?? null,
    completionTokens: usage?.completion_tokens ?? null,
    totalTokens: usage?.total_tokens ?? null,
    latencyMs: performance.now() - track.start,
    timeToFirstTokenMs: track.timeToFirstTokenMs,
    status: track.status === "pending" ? ("error" as const) : track.status,
    finishReason: track.finishReason,
    errorCode: track.errorCode,
    attempts: track.attempts,
    createdAt: new Date(track.startedAt),
    cachedTokens: tokenCount(usage?.prompt_tokens_details?.cached_tokens),
    cacheWriteTokens: tokenCount(usage?.prompt_tokens_details?.cache_write_tokens),
    reasoningTokens: tokenCount(usage?.completion_tokens_details?.reasoning_tokens),
    costFemtoUsd: track.cost === null ? null : accountCostOf(track),
    upstreamCostFemtoUsd: track.cost?.femtoUsd ?? null,
    catalogModel: track.provider === null ? null : track.catalogModel,
    user: context.user,
    sessionId: context.sessionId,
    traceId: context.traceId,
    trace: context.trace,
    metadata: context.metadata,
    contextTerms: context.contextTerms,
    plugins: track.plugins.length > 0 ? JSON.stringify(track.plugins) : null,
    cacheHit: track.cache === "hit",
    serverTools: track.serverTools === null ? null : JSON.stringify(track.serverTools),
    attemptsLog: track.attemptsLog.length > 0 ? attemptsLogText(track.attemptsLog) : null,
    dialect: track.dialect,
    internId: run?.internId,
    internRunId: run?.runId,
    internSessionId: run?.sessionKey,
    failedAttempts: track.failedAttempts ?? undefined,
  };
}

/** JSON text of the strings the attempts logs hold (providers, models, reasons: a few of each), kept once made. */
const quotedStrings = new Map<string, string>();

function quoted(s: string): string {
  let text = quotedStrings.get(s);
  if (text === undefined) {
    if (quotedStrings.size >= 1024) quotedStrings.clear();
    text = JSON.stringify(s);
    quotedStrings.set(s, text);
  }
  return text;
}

/** A number as JSON.stringify writes it (non-finite: null); undefined when `v` is not a number. */
const numberText = (v: unknown): string | undefined => (typeof v === "number" ? (Number.isFinite(v) ? String(v) : "null") : undefined);

/**
 * `JSON.stringify(log)` for entries as the execute stage makes them (`entryOf`: provider, model, credential_source,
 * status, reason, duration_ms, then retry_after_ms and backoff_ms when set, in that order), written from the entries'
 * fields with each string's JSON text kept: JSON.stringify walked the entry objects on every request (≈ 0.5 µs;
 * bench/README.md, "serve's CPU per non-streamed request"). A field of another type falls back to JSON.stringify.
 */
export function attemptsLogText(log: readonly AttemptLogEntry[]): string {
  let out = "[";
  for (let i = 0; i < log.length; i++) {
    const e = log[i]!;
    const status = e.status === null ? "null" : numberText(e.status);
    const duration = numberText(e.duration_ms);
    if (typeof e.provider !== "string" || typeof e.model !== "string" || typeof e.credential_source !== "string" || typeof e.reason !== "string" || status === undefined || duration === undefined) {
      return JSON.stringify(log);
    }
    out += `${i === 0 ? "" : ","}{"provider":${quoted(e.provider)},"model":${quoted(e.model)},"credential_source":${quoted(e.credential_source)},"status":${status},"reason":${quoted(e.reason)},"duration_ms":${duration}`;
    if (e.retry_after_ms !== undefined) {
      const wait = numberText(e.retry_after_ms);
      if (wait === undefined) return JSON.stringify(log);
      out += `,"retry_after_ms":${wait}`;
    }
    if (e.backoff_ms !== undefined) {
      const backoff = numberText(e.backoff_ms);
      if (backoff === undefined) return JSON.stringify(log);
      out += `,"backoff_ms":${backoff}`;
    }
    out += "}";
  }
  return `${out}]`;
}
