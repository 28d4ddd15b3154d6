/**
 * Stage "execute": the attempt loop. Calls the planned attempts in order until one answers; an upstream error
 * before the first byte (401/403/408/429/5xx, connect error, no response or first event within the first-byte
 * limit, a stream below the probe's floor) or a fallback reason (context length, content filter, model
 * unavailable: `UpstreamError.reason`) moves on to the next attempt at once, any other (a plain 400) ends the
 * loop; outages are retried on the same candidate after a full-jitter backoff when `retries` allows
 * (docs/operations.md, "Retries and fallback"). Each attempt and why it ended goes to `track.attemptsLog`. The request's budget bounds the whole loop (504
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
import { copyOf } from "../../../lib/copy.js";
import { LightAbortController } from "../../../lib/light-abort.js";
import { createKeyGuard } from "../key-guard.js";
import { dropRaw } from "../raw-events.js";
import { credentialKey, noteFailure, noteSuccess, type HealthMemory } from "../routing/health.js";
import type { StreamEvent } from "../model.js";
import { UpstreamError, type ChatChunk } from "../providers/index.js";
import type { Attempt, AttemptLogEntry, ChatCall, ChatOutcome, ChatStage, Tracking } from "./stage.js";
import { attemptSpan } from "./trace.js";
import { relayedEvents } from "./tap.js";
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
  /**
   * Rounds of retrying the same candidates after an outage or timeout (PORTICO_CHAT_RETRIES, default 0): once
   * every candidate was tried, those that failed so are tried again after a backoff with full jitter.
   */
  retries?: number;
  /** The backoff before retry round n (0-based) is random in [0, min(retryMaxMs, retryBaseMs · 2ⁿ)) ms. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /**
   * Streams: the floor in bytes of generated text per second over the probe (PORTICO_STREAM_MIN_BYTES_PER_SECOND,
   * default 0 = no probe). With a floor, the first events are held back until the stream has delivered
   * floor × probeMs / 1000 bytes (or ended); a stream that has not within `probeMs` of its first event is
   * abandoned for the next candidate before the caller saw any of it.
   */
  streamFloorBytesPerSecond?: number;
  /** The probe's length in ms (PORTICO_STREAM_PROBE_MS, default 2000). */
  streamProbeMs?: number;
}

/** The defaults of src/config.ts (PORTICO_UPSTREAM_FIRST_BYTE_TIMEOUT_MS, PORTICO_UPSTREAM_ANSWER_TIMEOUT_MS, PORTICO_CHAT_BUDGET_MS). */
export const DEFAULT_CHAT_TIMEOUTS: ChatTimeouts = { firstByteMs: 60_000, answerMs: 300_000, budgetMs: 600_000 };

/** Defaults of the retry backoff (docs/operations.md, "Retries and fallback"). */
export const DEFAULT_RETRY_BASE_MS = 250;
export const DEFAULT_RETRY_MAX_MS = 4_000;
export const DEFAULT_STREAM_PROBE_MS = 2_000;

/** Full jitter: a wait drawn uniformly from [0, min(max, base · 2^round)). */
export function backoffMs(round: number, baseMs: number, maxMs: number, random: () => number): number {
  return Math.floor(random() * Math.min(maxMs, baseMs * 2 ** round));
}

/** Sleeps `ms`, ending early (rejecting with the reason) when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

export interface ExecuteDeps {
  logger: Logger;
  /** Default {@link DEFAULT_CHAT_TIMEOUTS}. */
  timeouts?: ChatTimeouts;
  /** The health memory (cool-downs of credentials and endpoints). Default: one of this stage's own, in memory. */
  health?: HealthMemory;
  /** The jitter's random source in [0, 1) (tests). Default Math.random. */
  random?: () => number;
  /** How the backoff waits (tests). Default a timer that the request's budget and the caller's leaving end. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

/** A candidate skipped because its credential is cooling (rate limited). */
interface Cooling {
  cooling: true;
  untilMs: number;
}

export function createExecuteStage(opts: ExecuteDeps): ChatStage {
  const log = opts.logger;
  const deps = { timeouts: opts.timeouts ?? DEFAULT_CHAT_TIMEOUTS, health: opts.health ?? createMemoryHealthMemory() };
  const random = opts.random ?? Math.random;
  const wait = opts.sleep ?? sleep;
  const retries = Math.max(0, deps.timeouts.retries ?? 0);
  const retryBaseMs = deps.timeouts.retryBaseMs ?? DEFAULT_RETRY_BASE_MS;
  const retryMaxMs = deps.timeouts.retryMaxMs ?? DEFAULT_RETRY_MAX_MS;
  const floor = deps.timeouts.streamFloorBytesPerSecond ?? 0;
  const probeMs = deps.timeouts.streamProbeMs ?? DEFAULT_STREAM_PROBE_MS;

  const failedAttempt = (a: Attempt, err: UpstreamError) =>
    log.info({ provider: a.provider, model: a.requestedModel, status: err.status, ...(err.timedOut ? { timedOut: true } : {}) }, "upstream attempt failed");

  /**
   * Calls the attempts in order through `one` until one answers. Each gets the request's budget signal (through
   * its own controller, which a stall or a slow probe aborts) and a first-byte limit (never beyond the budget
   * left); a cooling credential is skipped; failures and the success are told to the health memory and written
   * to the generation's attempts log. A failure the next candidate may get past (retryable, or a fallback
   * reason: context length, content filter, model unavailable) moves on at once; any other ends the loop. Once
   * every candidate was tried, those that failed with an outage or a timeout are tried again, up to `retries`
   * rounds, each after a backoff with full jitter that must end inside the budget. Throws the request's error
   * when none answered.
   */
  async function attemptLoop<T>(call: ChatCall, one: (a: Attempt, started: number, signal: AbortController) => Promise<T>): Promise<T> {
    const { track } = call;
    const budgetMs = Math.min(deps.timeouts.budgetMs, call.budgetMs ?? Number.POSITIVE_INFINITY);
    const deadline = track.start + budgetMs;
    const perAttempt = call.streamed ? deps.timeouts.firstByteMs : deps.timeouts.answerMs;
    // One AbortController per attempt (and per backoff pause), the current one: aborted when the caller leaves
    // (one listener per request, which stays for a served stream's life) or when the budget runs out before an
    // answer began. No controller of the request's own: an AbortSignal and its listener cost more than the rest
    // of the loop (bench/README.md, "profile of the pipeline alone").
    let current: AbortController | undefined;
    let budgetOut = false;
    const onCallerAbort = () => current?.abort(call.signal.reason);
    if (!call.signal.aborted) call.signal.addEventListener("abort", onCallerAbort, { once: true });
    const timer = setTimeout(() => {
      budgetOut = true;
      current?.abort(budgetExceeded(budgetMs, track.attempts));
    }, Math.max(0, deadline - performance.now()));
    /** A controller made current: already aborted when the caller left or the budget ran out. */
    const controller = () => {
      const ac = new LightAbortController();
      if (call.signal.aborted) ac.abort(call.signal.reason);
      else if (budgetOut) ac.abort(budgetExceeded(budgetMs, track.attempts));
      current = ac;
      return ac;
    };
    let last: UpstreamError | Cooling | undefined;
    // Arrays made when first needed and no closures for the small helpers: a served first attempt allocates
    // neither (bench/README.md, "the plan's fast path"). The plan is not changed once execution began, so the
    // attempts are read in place.
    let tried: TriedAttempt[] | undefined;
    let soonest: number | undefined;
    let candidates: readonly Attempt[] = call.attempts;
    let backoff: number | undefined;
    try {
      rounds: for (let round = 0; ; round++) {
        let again: Attempt[] | undefined;
        for (const a of candidates) {
          const left = deadline - performance.now();
          if (left <= 0 || budgetOut || call.signal.aborted) break rounds;
          const until = deps.health.coolingUntil(credentialKey(a.credentialId));
          if (until !== undefined) {
            last = { cooling: true, untilMs: until };
            soonest = soonest === undefined ? until : Math.min(soonest, until);
            log.info({ provider: a.provider, model: a.requestedModel, waitMs: until - Date.now() }, "upstream attempt skipped: its credential is cooling after a rate limit");
            const cooling = entryOf(a, null, "cooling", 0);
            cooling.retry_after_ms = Math.max(0, Math.round(until - Date.now()));
            track.attemptsLog.push(cooling);
            continue;
          }
          track.attempts++;
          const own = controller();
          const upstream = copyOf(a.call);
          upstream.signal = own.signal;
          upstream.firstByteTimeoutMs = Math.max(1, Math.min(perAttempt, Math.ceil(left)));
          a.call = upstream;
          const sent = performance.now();
          const span = attemptSpan(call, a, track.attempts);
          const slept = backoff;
          backoff = undefined;
          try {
            const answer = await one(a, sent, own);
            track.upstreamMs += performance.now() - sent;
            span?.served();
            noteSuccess(deps.health, a);
            const entry = entryOf(a, 200, "served", Math.round(performance.now() - sent));
            if (slept !== undefined) entry.backoff_ms = slept;
            track.attemptsLog.push(entry);
            return answer;
          } catch (err) {
            track.upstreamMs += performance.now() - sent;
            span?.failed(err);
            if (budgetOut && !call.signal.aborted) {
              track.attemptsLog.push(entryOf(a, null, "timeout", Math.round(performance.now() - sent)));
              failedOf(track, a, "timeout");
              break rounds;
            }
            if (!(err instanceof UpstreamError)) throw err;
            last = err;
            (tried ??= []).push(triedOf(a, err));
            failedAttempt(a, err);
            const entry = entryOf(a, err.status > 0 ? err.status : null, err.reason, Math.round(performance.now() - sent));
            if (err.retryAfterMs !== undefined) entry.retry_after_ms = err.retryAfterMs;
            if (slept !== undefined) entry.backoff_ms = slept;
            track.attemptsLog.push(entry);
            failedOf(track, a, err.reason);
            const limitedUntil = noteFailure(deps.health, a, err);
            if (limitedUntil !== undefined) soonest = soonest === undefined ? limitedUntil : Math.min(soonest, limitedUntil);
            if (!err.fallback) break rounds;
            if (err.reason === "outage" || err.reason === "timeout") (again ??= []).push(a);
          }
        }
        if (round >= retries || again === undefined) break;
        // The same candidates again, after a backoff with full jitter that must end inside the budget.
        const pause = backoffMs(round, retryBaseMs, retryMaxMs, random);
        if (performance.now() + pause >= deadline) break;
        try {
          await wait(pause, controller().signal);
        } catch {
          break;
        }
        backoff = pause;
        candidates = again;
      }
      if (call.signal.aborted) throw call.signal.reason;
      if (budgetOut || deadline - performance.now() <= 0) throw budgetExceeded(budgetMs, track.attempts);
      throw exhausted(last, soonest, tried ?? [], call.attemptsNotTried);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * The first event of a streamed attempt, which must arrive within the attempt's first-byte limit (counted from
   * when it was sent: a provider that sent its headers and then stalls is abandoned too), and, with a floor,
   * the events of the probe: held back until the stream has delivered floor × probe bytes of generated text or
   * ended, else abandoned (`slow_stream`). Nothing was sent to the caller yet.
   */
  async function head(a: Attempt, iterator: AsyncIterator<ChatChunk>, started: number, own: AbortController): Promise<{ events: ChatChunk[]; done: boolean }> {
    const limit = a.call.firstByteTimeoutMs ?? deps.timeouts.firstByteMs;
    const first = await within(iterator, Math.max(1, limit - (performance.now() - started)), own, () => new UpstreamError(0, `upstream sent no event within ${duration(limit)}`, true, undefined, { timedOut: true }));
    if (first.done) return { events: [], done: true };
    const events = [first.value];
    if (floor <= 0) return { events, done: false };
    const need = (floor * probeMs) / 1000;
    const probeStart = performance.now();
    let bytes = textBytes(first.value);
    while (bytes < need) {
      const left = probeMs - (performance.now() - probeStart);
      const slow = () => new UpstreamError(0, `upstream streamed ${bytes} bytes in ${duration(probeMs)}, below the floor of ${floor} bytes per second`, true, undefined, { reason: "slow_stream" });
      if (left <= 0) {
        const e = slow();
        own.abort(e);
        throw e;
      }
      const next = await within(iterator, left, own, slow);
      if (next.done) return { events, done: true };
      events.push(next.value);
      bytes += textBytes(next.value);
    }
    return { events, done: false };
  }

  function complete(call: ChatCall): Promise<ChatOutcome> {
    const { track } = call;
    return attemptLoop(call, async (a) => {
      const completion = await a.adapter.complete(a.call);
      served(track, a);
      track.usage = completion.usage ?? null;
      track.finishReason = completion.choices[0]?.finish_reason ?? null;
      track.status = "success";
      return { kind: "completion", completion: stamp(completion, track.id, a.provider) };
    });
  }

  function stream(call: ChatCall): Promise<ChatOutcome> {
    const { track } = call;
    return attemptLoop(call, async (a, started, own) => {
      const iterator = a.adapter.stream(call.rawEvents ? { ...a.call, rawEvents: call.rawEvents } : a.call)[Symbol.asyncIterator]();
      const first = await headOrClose(a, iterator, started, own);
      served(track, a);
      track.timeToFirstTokenMs = performance.now() - track.start;
      return { kind: "stream", events: relay(call, a, iterator, first) };
    });
  }

  /** {@link head}, closing the attempt's stream when it fails. */
  async function headOrClose(a: Attempt, iterator: AsyncIterator<ChatChunk>, started: number, own: AbortController) {
    try {
      return await head(a, iterator, started, own);
    } catch (err) {
      void Promise.resolve(iterator.return?.()).catch(() => undefined);
      throw err;
    }
  }

  /**
   * The served attempt's events, stamped with the generation id and provider (in place, see {@link stamp}): a
   * tapped stream whose relay (tap.ts {@link EventRelay}) checks and observes each event as it is read, so the
   * outer stages' taps run in the same step (no generator layer of its own; bench/README.md). A stream that breaks
   * after its first event ends with an in-band error chunk; the attempt's stream is closed once the stream ends
   * or its reader stops.
   */
  function relay(call: ChatCall, a: Attempt, iterator: AsyncIterator<ChatChunk>, first: { events: ChatChunk[]; done: boolean }): AsyncIterable<StreamEvent> {
    const { track } = call;
    const raw = call.rawEvents;
    let guard: ReturnType<typeof createKeyGuard> | undefined;
    let closed: Promise<unknown> | undefined;
    const passed = (event: ChatChunk): StreamEvent => {
      if (guard?.apply(event) && raw) dropRaw(raw, event);
      observe(track, event);
      return stamp(event, track.id, a.provider);
    };
    const created = Math.floor(Date.now() / 1000);
    const meta = () => ({ id: track.id, created, model: a.requestedModel });
    return relayedEvents<ChatChunk>(iterator, {
      first() {
        const events: StreamEvent[] = [];
        if (isEcho(call.request)) {
          events.push({ ...meta(), object: "chat.completion.chunk", provider: a.provider, choices: [], debug: { echo_upstream_body: a.adapter.upstreamBody(a.call) } });
        }
        // A key spelled out over several chunks (each event was already scrubbed of the whole key).
        guard = createKeyGuard(a.call.apiKey);
        for (const event of first.events) events.push(passed(event));
        return { events, done: first.done };
      },
      event: passed,
      failed(err) {
        if (call.signal.aborted) return undefined;
        // The provider's own status when it gave one, else the reason's (502).
        const status = err instanceof UpstreamError && err.status > 0 ? err.status : ruleOf(Reason.UPSTREAM_FAILED).status;
        const message = err instanceof UpstreamError ? err.message : "The provider's stream broke";
        log.info({ provider: a.provider, model: a.requestedModel, status }, "upstream stream failed after its first chunk");
        track.status = "error";
        track.errorCode = status;
        track.finishReason = "error";
        return {
          ...meta(),
          object: "chat.completion.chunk",
          provider: a.provider,
          choices: [{ index: 0, delta: {}, finish_reason: "error", native_finish_reason: null }],
          error: { reason: Reason.UPSTREAM_FAILED, code: status, message },
        };
      },
      close() {
        if (closed === undefined) {
          try {
            closed = Promise.resolve(iterator.return?.());
          } catch (err) {
            closed = Promise.reject(err);
          }
        }
        return closed;
      },
    });
  }

  /** Server-tool loop turns (../server-tools/loop.ts): one model call through the attempt loop with the turn's body. */
  const turns = (call: ChatCall) => ({
    complete: (body: CanonicalRequest) =>
      attemptLoop(call, async (a) => {
        const completion = await a.adapter.complete({ ...a.call, body });
        served(call.track, a);
        return stamp(completion, call.track.id, a.provider);
      }),
    stream: (body: CanonicalRequest) =>
      attemptLoop(call, async (a, started, own) => {
        const turn = { ...a, call: { ...a.call, body } };
        const iterator = turn.adapter.stream(turn.call)[Symbol.asyncIterator]();
        const first = await headOrClose(turn, iterator, started, own);
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

/** The attempt as its log entry names it (never a credential id or key). */
/** Notes a failed attempt for the per-reason failure series (src/core/chat/generation-metrics.ts). */
function failedOf(track: Tracking, a: Attempt, reason: string): void {
  (track.failedAttempts ??= []).push({ provider: a.provider, catalogModel: a.catalogModel ?? null, reason });
}

function entryOf(a: Attempt, status: number | null, reason: string, durationMs: number): AttemptLogEntry {
  // One literal, the optional keys assigned after it: `{ ...entryOf(a), status, … }` (a spread then new keys) cost
  // ≈ 2 µs a request on Node 20 and gave every entry a hidden class of its own (src/lib/copy.ts).
  return { provider: a.provider, model: a.requestedModel, credential_source: a.credentialSource, status, reason, duration_ms: durationMs };
}

/**
 * The iterator's next event, or — when none arrives within `ms` — the attempt aborted with `error()` (which
 * ends the adapter's pending read and closes its connection) and that error thrown.
 */
async function within(iterator: AsyncIterator<ChatChunk>, ms: number, own: AbortController, error: () => UpstreamError): Promise<IteratorResult<ChatChunk>> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const e = error();
      own.abort(e);
      reject(e);
    }, ms);
  });
  try {
    return await Promise.race([iterator.next(), expired]);
  } finally {
    clearTimeout(timer);
    expired.catch(() => undefined);
  }
}

/** Bytes of generated text in a chunk: content, reasoning and tool-call arguments (the probe's measure). */
function textBytes(chunk: ChatChunk): number {
  let n = 0;
  for (const c of chunk.choices) {
    const d = c.delta;
    if (typeof d.content === "string") n += Buffer.byteLength(d.content);
    if (typeof d.reasoning === "string") n += Buffer.byteLength(d.reasoning);
    for (const t of d.tool_calls ?? []) n += Buffer.byteLength(t.function?.arguments ?? "") + Buffer.byteLength(t.function?.name ?? "");
  }
  return n;
}

function duration(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

/**
 * An adapter's answer or event (a fresh object of this attempt's, as the key guard already changes in place) with
 * the generation id and the provider set on it: the same JSON as a `{...value, id, provider}` copy (an existing key
 * keeps its place), without the copy, which cost ≈ 1 µs per chunk with the chunk's `JSON.stringify` (bench/README.md).
 */
function stamp<T extends { id?: unknown }>(value: T, id: string, provider: string): T & { id: string; provider: string } {
  const out = value as T & { id: string; provider: string };
  out.id = id;
  out.provider = provider;
  return out;
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
