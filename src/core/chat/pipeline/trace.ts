/**
 * Stage "trace" (installed only when tracing is on; docs/operations.md, "Tracing"): the chat request's span is the
 * core RPC's (made by src/core/tracing-interceptor.ts, found under the call's signal: src/lib/tracing.ts
 * `requestSpan`); this stage names it `chat <requested model>` and adds the request's GenAI attributes to it, and
 * through `attemptSpan` makes one CLIENT span per upstream attempt, children of it. One span fewer per request than
 * a chat span of its own under the RPC's (both said the same thing one hop apart in process). Attributes follow the
 * OpenTelemetry GenAI semantic conventions (`gen_ai.*`, copied here rather than imported from the conventions'
 * incubating entry point, whose names may change in a minor release) plus a few of Portico's own (`portico.*`).
 * Never on a span: the messages (prompts or answers), keys of any kind, the caller's metadata.
 *
 * The served attempt's span stays open until the request ends, so that it carries the tokens, the response model
 * and the cost (a stream's usage comes with its last event). A request whose trace is not sampled has no span
 * filed: no attribute is built and no attempt span made. The attributes are set one by one once the request ends
 * (no attribute object is built on the way).
 */
import { SpanKind, SpanStatusCode, type Context, type Span, type Tracer } from "@opentelemetry/api";
import { ConnectError } from "@connectrpc/connect";
import { errorDetailOf } from "../../../lib/service-error.js";
import { parentContext, requestSpan, tracer } from "../../../lib/tracing.js";
import { usd } from "../../catalog/cost.js";
import { UpstreamError } from "../providers/index.js";
import { tapEvents, type EventTap, type TapEnd } from "./tap.js";
import type { StreamEvent } from "../model.js";
import type { Attempt, ChatCall, ChatOutcome, ChatStage, Tracking } from "./stage.js";

/** GenAI semantic-convention attribute names (semantic-conventions 1.45, incubating). */
export const GEN_AI = {
  OPERATION_NAME: "gen_ai.operation.name",
  PROVIDER_NAME: "gen_ai.provider.name",
  REQUEST_MODEL: "gen_ai.request.model",
  RESPONSE_MODEL: "gen_ai.response.model",
  RESPONSE_ID: "gen_ai.response.id",
  RESPONSE_FINISH_REASONS: "gen_ai.response.finish_reasons",
  INPUT_TOKENS: "gen_ai.usage.input_tokens",
  OUTPUT_TOKENS: "gen_ai.usage.output_tokens",
} as const;

/** `chat <model>`, made once per model (a few hundred kept at most: the requested model is the caller's text). */
const chatNames = new Map<string, string>();

function chatSpanName(model: string): string {
  let name = chatNames.get(model);
  if (name === undefined) {
    if (chatNames.size >= 512) chatNames.clear();
    name = `chat ${model}`;
    chatNames.set(model, name);
  }
  return name;
}

/**
 * Tokens, cost, finish reason and response model: on the served attempt's span (the provider call, where the GenAI
 * conventions put them), or on the request's when no attempt served it (a response cache hit). Never on both: a back
 * end that sums `gen_ai.usage.*` over a trace's spans counts each call once, and nothing is exported twice (the
 * serialisation of attributes is most of what tracing costs, bench/README.md).
 */
function setOutcome(span: Span, track: Tracking, responseModel: string | undefined): void {
  const u = track.usage;
  if (typeof u?.prompt_tokens === "number") span.setAttribute(GEN_AI.INPUT_TOKENS, u.prompt_tokens);
  if (typeof u?.completion_tokens === "number") span.setAttribute(GEN_AI.OUTPUT_TOKENS, u.completion_tokens);
  if (track.cost) {
    span.setAttribute("portico.cost.usd", usd(track.cost.femtoUsd));
    span.setAttribute("portico.cost.paid_by", track.cost.paidBy);
  }
  if (track.finishReason) span.setAttribute(GEN_AI.RESPONSE_FINISH_REASONS, [track.finishReason]);
  if (responseModel) span.setAttribute(GEN_AI.RESPONSE_MODEL, responseModel);
}

/** The public reason of an error (`rate_limited`, `upstream_failed`, …), or its kind. */
function errorType(err: unknown): string {
  if (err instanceof ConnectError) return errorDetailOf(err)?.reason ?? "error";
  return err instanceof Error ? err.name : "error";
}

function streamBroke(span: Span): void {
  span.setAttribute("error.type", "stream_error");
  span.setStatus({ code: SpanStatusCode.ERROR, message: "the provider's stream broke" });
}

/** The request's attributes on its span (the RPC's, which the tracing interceptor ends); the served attempt's span ends here. */
function finish(call: ChatCall, spans: RequestSpans, err: unknown): void {
  call.traceSpans = undefined;
  const { track } = call;
  const { span, served, responseModel } = spans;
  if (served) {
    setOutcome(served, track, responseModel);
    // The provider's stream broke after its first event.
    if (track.status === "error") streamBroke(served);
    served.end();
  }
  span.setAttribute(GEN_AI.OPERATION_NAME, "chat");
  if (track.requestedModel) {
    span.updateName(chatSpanName(track.requestedModel));
    span.setAttribute(GEN_AI.REQUEST_MODEL, track.requestedModel);
  }
  span.setAttribute("portico.generation_id", track.id);
  span.setAttribute("portico.streamed", call.streamed);
  // What served the request is on the served attempt's span (its catalog model, tokens, cost); on the request's only
  // when no attempt served it (a response cache hit).
  if (!served) {
    setOutcome(span, track, responseModel);
    if (track.catalogModel) span.setAttribute("portico.catalog_model", track.catalogModel);
  }
  span.setAttribute("portico.attempts", track.attempts);
  span.setAttribute("portico.status", track.status === "pending" ? (err === undefined ? "success" : "error") : track.status);
  if (track.provider) span.setAttribute(GEN_AI.PROVIDER_NAME, track.provider);
  if (track.timeToFirstTokenMs !== null) span.setAttribute("portico.time_to_first_token_ms", track.timeToFirstTokenMs);
  if (track.presetSlug) span.setAttribute("portico.preset", track.presetSlug);
  if (track.cache) span.setAttribute("portico.cache", track.cache);
  if (err !== undefined && !call.signal.aborted) {
    const type = errorType(err);
    span.setAttribute("error.type", type);
    span.setStatus({ code: SpanStatusCode.ERROR, message: type });
  } else if (track.status === "error") streamBroke(span);
}

/**
 * One traced chat request: its span, the attempts' parent, the served attempt; the tap on a streamed answer's events.
 * No async layer of its own: the stage ends it in callbacks on `next()`'s promise, or from the stream's shared tap.
 */
export class RequestSpans implements EventTap {
  /** `span` as the parent context of the attempts' spans (made once). */
  readonly parent: Context;
  /** The attempt that answered, open until the request ends. */
  served?: Span;
  /** The model the provider said answered (the completion's, or a stream's first event's). */
  responseModel?: string;
  private first = true;

  constructor(
    readonly call: ChatCall,
    readonly span: Span,
    /** Portico's tracer, looked up once per stage (`trace.getTracer` goes through the API's registry and builds the SDK's key string per call). */
    readonly tracer: Tracer,
  ) {
    this.parent = parentContext(span);
  }

  readonly answered = (outcome: ChatOutcome): ChatOutcome => {
    if (outcome.kind === "stream") return { kind: "stream", events: tapEvents(outcome.events, this) };
    this.responseModel = outcome.completion.model;
    finish(this.call, this, undefined);
    return outcome;
  };

  readonly threw = (err: unknown): never => {
    finish(this.call, this, err);
    throw err;
  };

  map(event: StreamEvent): StreamEvent {
    if (this.first) {
      this.first = false;
      if (typeof event.model === "string") this.responseModel = event.model;
    }
    return event;
  }

  end(e: TapEnd): void {
    finish(this.call, this, e.how === "failed" ? e.error : undefined);
  }
}

export function createTraceStage(): ChatStage {
  // As the core's tracing interceptor: the tracer once (before a provider is registered, the API's proxy tracer, which
  // finds the provider's on first use).
  const t = tracer();
  return {
    name: "trace",
    run(call, next) {
      const span = requestSpan(call.signal);
      // Not sampled (or not a traced RPC): no attributes, no attempt span.
      if (span === undefined) return next();
      const spans = new RequestSpans(call, span, t);
      call.traceSpans = spans;
      return next().then(spans.answered, spans.threw);
    },
  };
}

const CLIENT = { kind: SpanKind.CLIENT };

/** An attempt's span, when the request is traced: `served()` once it answered, `failed(err)` otherwise. */
export interface AttemptSpan {
  served(): void;
  failed(err: unknown): void;
}

/** Starts the span of attempt number `n` of `call` (undefined when the request is not traced: tracing off). */
export function attemptSpan(call: ChatCall, a: Attempt, n: number): AttemptSpan | undefined {
  const spans = call.traceSpans;
  if (!spans) return undefined;
  const span = spans.tracer.startSpan(chatSpanName(a.call.model), CLIENT, spans.parent);
  span.setAttribute(GEN_AI.OPERATION_NAME, "chat");
  span.setAttribute(GEN_AI.PROVIDER_NAME, a.provider);
  span.setAttribute(GEN_AI.REQUEST_MODEL, a.call.model);
  span.setAttribute("portico.attempt", n);
  span.setAttribute("portico.credential_source", a.credentialSource);
  span.setAttribute("portico.credential_id", a.credentialId);
  if (a.catalogModel) span.setAttribute("portico.catalog_model", a.catalogModel);
  return {
    served() {
      span.setAttribute("portico.attempt.outcome", "served");
      spans.served = span;
    },
    failed(err) {
      let outcome = "failed";
      if (err instanceof UpstreamError) {
        outcome = err.timedOut ? "timeout" : err.status === 429 ? "rate_limited" : "failed";
        if (err.status > 0) span.setAttribute("http.response.status_code", err.status);
        // Not the provider's message: it may quote what was sent.
        span.setAttribute("error.type", err.timedOut ? "timeout" : err.status > 0 ? String(err.status) : "connection_failed");
      } else if (call.signal.aborted) {
        outcome = "cancelled";
        span.setAttribute("error.type", "cancelled");
      } else span.setAttribute("error.type", errorType(err));
      span.setAttribute("portico.attempt.outcome", outcome);
      span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
      span.end();
    },
  };
}
