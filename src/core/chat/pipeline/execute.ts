/**
 * Stage "execute": the attempt loop. Calls the planned attempts in order until one answers; an upstream error
 * before the first byte (401/403/408/429/5xx, connect error, no response within the first-byte limit) moves on
 * to the next attempt, a non-retryable one ends the loop. The request's budget bounds the whole loop (504
 * `timeout`); a credential cooling in the health memory (routing/health.ts: after a 429, for the provider's
 * `Retry-After` or a growing step) is skipped, and when every
 * candidate was rate limited the caller gets 429 with the wait; otherwise the error (502 upstream_failed) lists
 * what was tried (provider, model, the provider's status, whose credential; never a key) and how many planned
 * attempts the bound (PORTICO_CHAT_MAX_ATTEMPTS) left out. Streams: the outcome begins with the first event of the attempt that answered; an error after
 * it ends the stream with a `finish_reason: "error"` chunk carrying the error. Answers carry the generation id
 * as `id` and the provider that served them.
 */
import type { Logger } from "pino";
import { Reason, serviceError } from "../../errors.js";
import { ruleOf } from "../../../contract/reasons.js";
import { createMemoryHealthMemory } from "../../../lib/health-memory.js";
import { createKeyGuard } from "../key-guard.js";
import { credentialKey, noteFailure, noteSuccess, type HealthMemory } from "../routing/health.js";
import type { StreamEvent } from "../model.js";
import { UpstreamError, type ChatChunk } from "../providers/index.js";
import type { Attempt, ChatCall, ChatOutcome, ChatStage, Tracking } from "./stage.js";
import { attemptSpan } from "./trace.js";
import type { CanonicalRequest } from "../model.js";
import { runServerToolLoop } from "../server-tools/loop.js";

/** The time limits of a chat request (operator settings, src/config.ts; docs/operations.md). */
export interface ChatTimeouts {
  /** Streamed attempts: the provider's response (status and headers) must begin within this many ms. */
  firstByteMs: number;
  /** Non-streamed attempts: the provider's answer, which arrives whole, must begin within this many ms. */
  answerMs: number;
  /** The request: its answer (a stream's first chunk, a whole non-streamed answer) must begin within this many ms, over every attempt. */
  budgetMs: number;
}

/** The defaults of src/config.ts (PORTICO_UPSTREAM_FIRST_BYTE_TIMEOUT_MS, PORTICO_UPSTREAM_ANSWER_TIMEOUT_MS, PORTICO_CHAT_BUDGET_MS). */
export const DEFAULT_CHAT_TIMEOUTS: ChatTimeouts = { firstByteMs: 60_000, answerMs: 300_000, budgetMs: 600_000 };

export interface ExecuteDeps {
  logger: Logger;
  /** Default {@link DEFAULT_CHAT_TIMEOUTS}. */
  timeouts?: ChatTimeouts;
  /** The health memory (cool-downs of credentials and endpoints). Default: one of this stage's own, in memory. */
  health?: HealthMemory;
}

/** A candidate skipped because its credential is cooling (rate limited). */
interface Cooling {
  cooling: true;
  untilMs: number;
}

export function createExecuteStage(opts: ExecuteDeps): ChatStage {
  const log = opts.logger;
  const deps = { timeouts: opts.timeouts ?? DEFAULT_CHAT_TIMEOUTS, health: opts.health ?? createMemoryHealthMemory() };

  const failedAttempt = (a: Attempt, err: UpstreamError) =>
    log.info({ provider: a.provider, model: a.requestedModel, status: err.status, ...(err.timedOut ? { timedOut: true } : {}) }, "upstream attempt failed");

  /**
   * Calls the attempts in order through `one` until one answers. Each gets the request's budget signal and a
   * first-byte limit (never beyond the budget left); a cooling credential is skipped; failures and the success
   * are told to the health memory. Throws the request's error when none answered.
   */
  async function attemptLoop<T>(call: ChatCall, one: (a: Attempt) => Promise<T>): Promise<T> {
    const { track } = call;
    const budgetMs = Math.min(deps.timeouts.budgetMs, call.budgetMs ?? Number.POSITIVE_INFINITY);
    const deadline = track.start + budgetMs;
    const perAttempt = call.streamed ? deps.timeouts.firstByteMs : deps.timeouts.answerMs;
    // Aborts the upstream request when the caller leaves, or when the budget runs out before an answer began.
    const budget = new AbortController();
    if (call.signal.aborted) budget.abort(call.signal.reason);
    else call.signal.addEventListener("abort", () => budget.abort(call.signal.reason), { once: true });
    const timer = setTimeout(() => budget.abort(budgetExceeded(budgetMs, track.attempts)), Math.max(0, deadline - performance.now()));
    let last: UpstreamError | Cooling | undefined;
    const tried: TriedAttempt[] = [];
    let soonest: number | undefined;
    const wait = (untilMs: number) => (soonest = soonest === undefined ? untilMs : Math.min(soonest, untilMs));
    try {
      for (const a of call.attempts) {
        const left = deadline - performance.now();
        if (left <= 0 || budget.signal.aborted) break;
        const until = deps.health.coolingUntil(credentialKey(a.credentialId));
        if (until !== undefined) {
          last = { cooling: true, untilMs: until };
          wait(until);
          log.info({ provider: a.provider, model: a.requestedModel, waitMs: until - Date.now() }, "upstream attempt skipped: its credential is cooling after a rate limit");
          continue;
        }
        track.attempts++;
        a.call = { ...a.call, signal: budget.signal, firstByteTimeoutMs: Math.max(1, Math.min(perAttempt, Math.ceil(left))) };
        const sent = performance.now();
        const span = attemptSpan(call, a, track.attempts);
        try {
          const answer = await one(a);
          track.upstreamMs += performance.now() - sent;
          span?.served();
          noteSuccess(deps.health, a);
          return answer;
        } catch (err) {
          track.upstreamMs += performance.now() - sent;
          span?.failed(err);
          if (budget.signal.aborted && !call.signal.aborted) break;
          if (!(err instanceof UpstreamError)) throw err;
          last = err;
          tried.push(triedOf(a, err));
          failedAttempt(a, err);
          const limitedUntil = noteFailure(deps.health, a, err);
          if (limitedUntil !== undefined) wait(limitedUntil);
          if (!err.retryable) break;
        }
      }
      if (call.signal.aborted) throw call.signal.reason;
      if (budget.signal.aborted || deadline - performance.now() <= 0) throw budgetExceeded(budgetMs, track.attempts);
      throw exhausted(last, soonest, tried, call.attemptsNotTried);
    } finally {
      clearTimeout(timer);
    }
  }

  function complete(call: ChatCall): Promise<ChatOutcome> {
    const { track } = call;
    return attemptLoop(call, async (a) => {
      const completion = await a.adapter.complete(a.call);
      served(track, a);
      track.usage = completion.usage ?? null;
      track.finishReason = completion.choices[0]?.finish_reason ?? null;
      track.status = "success";
      return { kind: "completion", completion: { ...completion, id: track.id, provider: a.provider } };
    });
  }

  function stream(call: ChatCall): Promise<ChatOutcome> {
    const { track } = call;
    return attemptLoop(call, async (a) => {
      const iterator = a.adapter.stream(a.call)[Symbol.asyncIterator]();
      const first = await iterator.next();
      served(track, a);
      track.timeToFirstTokenMs = performance.now() - track.start;
      return { kind: "stream", events: relay(call, a, iterator, first) };
    });
  }

  /** The served attempt's events, stamped with the generation id and provider (one shallow copy each). */
  async function* relay(call: ChatCall, a: Attempt, iterator: AsyncIterator<ChatChunk>, first: IteratorResult<ChatChunk>): AsyncGenerator<StreamEvent> {
    const { track } = call;
    const meta = { id: track.id, created: Math.floor(Date.now() / 1000), model: a.requestedModel };
    try {
      if (isEcho(call.request)) {
        yield { ...meta, object: "chat.completion.chunk", provider: a.provider, choices: [], debug: { echo_upstream_body: a.adapter.upstreamBody(a.call) } };
      }
      if (first.done) return;
      // A key spelled out over several chunks (each event was already scrubbed of the whole key).
      const guard = createKeyGuard(a.call.apiKey);
      guard?.apply(first.value);
      observe(track, first.value);
      yield { ...first.value, id: track.id, provider: a.provider };
      for (;;) {
        let next: IteratorResult<ChatChunk>;
        try {
          next = await iterator.next();
        } catch (err) {
          if (call.signal.aborted) throw err;
          // The provider's own status when it gave one, else the reason's (502).
          const status = err instanceof UpstreamError && err.status > 0 ? err.status : ruleOf(Reason.UPSTREAM_FAILED).status;
          const message = err instanceof UpstreamError ? err.message : "The provider's stream broke";
          log.info({ provider: a.provider, model: a.requestedModel, status }, "upstream stream failed after its first chunk");
          track.status = "error";
          track.errorCode = status;
          track.finishReason = "error";
          yield {
            ...meta,
            object: "chat.completion.chunk",
            provider: a.provider,
            choices: [{ index: 0, delta: {}, finish_reason: "error", native_finish_reason: null }],
            error: { reason: Reason.UPSTREAM_FAILED, code: status, message },
          };
          return;
        }
        if (next.done) return;
        guard?.apply(next.value);
        observe(track, next.value);
        yield { ...next.value, id: track.id, provider: a.provider };
      }
    } finally {
      await iterator.return?.();
    }
  }

  /** Server-tool loop turns (../server-tools/loop.ts): one model call through the attempt loop with the turn's body. */
  const turns = (call: ChatCall) => ({
    complete: (body: CanonicalRequest) =>
      attemptLoop(call, async (a) => {
        const completion = await a.adapter.complete({ ...a.call, body });
        served(call.track, a);
        return { ...completion, id: call.track.id, provider: a.provider };
      }),
    stream: (body: CanonicalRequest) =>
      attemptLoop(call, async (a) => {
        const turn = { ...a, call: { ...a.call, body } };
        const iterator = turn.adapter.stream(turn.call)[Symbol.asyncIterator]();
        const first = await iterator.next();
        served(call.track, a);
        call.track.timeToFirstTokenMs ??= performance.now() - call.track.start;
        return relay(call, turn, iterator, first);
      }),
  });

  return {
    name: "execute",
    run: (call) => (call.serverTools ? runServerToolLoop(call, call.serverTools, turns(call), log) : call.streamed ? stream(call) : complete(call)),
  };
}

/** The request's budget ran out before an answer began: 504 `timeout`. */
function budgetExceeded(budgetMs: number, attempts: number) {
  return serviceError(
    Reason.TIMEOUT,
    `No provider answered within the request's time budget of ${duration(budgetMs)} (${attempts} attempt${attempts === 1 ? "" : "s"} made)`,
    { retryable: true },
  );
}

/**
 * The error when no attempt answered, from the last failure: every candidate rate limited (the last refused
 * with 429, or skipped inside its wait) → 429 `rate_limited` with `Retry-After` (the soonest wait that ends);
 * the last timed out → 504 `timeout`; otherwise 502 `upstream_failed`, retryable as the last failure was.
 */
interface TriedAttempt {
  provider: string;
  model: string;
  status: number;
  credentialSource: string;
}

const triedOf = (a: Attempt, err: UpstreamError): TriedAttempt => ({
  provider: a.provider,
  model: a.requestedModel,
  status: err.status,
  credentialSource: a.credentialSource,
});

function exhausted(last: UpstreamError | Cooling | undefined, soonestWaitEnd: number | undefined, tried: TriedAttempt[], notTried: number) {
  const retryAfterSeconds = soonestWaitEnd === undefined ? undefined : Math.max(1, Math.ceil((soonestWaitEnd - Date.now()) / 1000));
  if (last !== undefined && ("cooling" in last || last.status === 429)) {
    return serviceError(
      Reason.RATE_LIMITED,
      `The provider rate-limited every credential that may serve this request${retryAfterSeconds ? `; retry after ${retryAfterSeconds} s` : ""}`,
      { retryable: true, ...(retryAfterSeconds ? { retryAfterSeconds } : {}) },
    );
  }
  if (last?.timedOut) return serviceError(Reason.TIMEOUT, `No provider answered in time; the last: ${last.message}`, { retryable: true });
  const cut = notTried > 0 ? ` (${notTried} more planned attempt${notTried === 1 ? " was" : "s were"} not tried: the bound is PORTICO_CHAT_MAX_ATTEMPTS)` : "";
  return serviceError(Reason.UPSTREAM_FAILED, `Every provider attempt failed${cut}; the last: ${last ? last.message : "provider unreachable"}`, {
    retryable: last ? last.retryable : true,
    attempts: tried,
    attemptsNotTried: notTried,
  });
}

function duration(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

function served(track: Tracking, a: Attempt): void {
  track.provider = a.provider;
  track.model = a.requestedModel;
  track.credentialId = a.credentialId;
  track.credentialSource = a.credentialSource;
}

function observe(track: Tracking, chunk: ChatChunk): void {
  if (chunk.usage) track.usage = chunk.usage;
  const finish = chunk.choices[0]?.finish_reason;
  if (finish) track.finishReason = finish;
}

function isEcho(body: Readonly<Record<string, unknown>>): boolean {
  const debug = body.debug;
  return typeof debug === "object" && debug !== null && (debug as Record<string, unknown>).echo_upstream_body === true;
}
