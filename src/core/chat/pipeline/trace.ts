/**
 * Stage "trace" (installed only when tracing is on; docs/operations.md, "Tracing"): one span per chat request,
 * a child of the core RPC's span, and through `attemptSpan` one CLIENT span per upstream attempt, a child of
 * the request's. Attributes follow the OpenTelemetry GenAI semantic conventions (`gen_ai.*`, copied here rather
 * than imported from the conventions' incubating entry point, whose names may change in a minor release) plus a
 * few of Portico's own (`portico.*`). Never on a span: the messages (prompts or answers), keys of any kind, the
 * caller's metadata.
 *
 * The served attempt's span stays open until the request ends, so that it carries the tokens, the response model
 * and the cost (a stream's usage comes with its last event). The parent comes from the call's trace context
 * (src/lib/tracing.ts `requestContext`, filed by the core's tracing interceptor), not from a context manager. A
 * request whose trace is not sampled makes no attempt span and builds no attribute.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Span } from "@opentelemetry/api";
import { ConnectError } from "@connectrpc/connect";
import { errorDetailOf } from "../../../lib/service-error.js";
import { requestContext, tracer } from "../../../lib/tracing.js";
import { usd } from "../../catalog/cost.js";
import { UpstreamError } from "../providers/index.js";
import { tapEvents } from "./tap.js";
import type { Attempt, ChatCall, ChatStage, Tracking } from "./stage.js";

/** GenAI semantic-convention attribute names (semantic-conventions 1.45, incubating). */
export const GEN_AI = {
  OPERATION_NAME: "gen_ai.operation.name",
  PROVIDER_NAME: "gen_ai.provider.name",
  /** The older name of the provider attribute, still read by many back ends. */
  SYSTEM: "gen_ai.system",
  REQUEST_MODEL: "gen_ai.request.model",
  RESPONSE_MODEL: "gen_ai.response.model",
  RESPONSE_ID: "gen_ai.response.id",
  RESPONSE_FINISH_REASONS: "gen_ai.response.finish_reasons",
  INPUT_TOKENS: "gen_ai.usage.input_tokens",
  OUTPUT_TOKENS: "gen_ai.usage.output_tokens",
} as const;

interface RequestSpans {
  span: Span;
  /** The attempt that answered, open until the request ends. */
  served?: Span;
  /** The model the provider said answered (the completion's, or a stream's first event's). */
  responseModel?: string;
}

const open = new WeakMap<ChatCall, RequestSpans>();

function usageAttributes(track: Tracking): Attributes {
  const out: Attributes = {};
  const u = track.usage;
  if (typeof u?.prompt_tokens === "number") out[GEN_AI.INPUT_TOKENS] = u.prompt_tokens;
  if (typeof u?.completion_tokens === "number") out[GEN_AI.OUTPUT_TOKENS] = u.completion_tokens;
  if (track.cost) {
    out["portico.cost.usd"] = usd(track.cost.femtoUsd);
    out["portico.cost.paid_by"] = track.cost.paidBy;
  }
  if (track.catalogModel) out["portico.catalog_model"] = track.catalogModel;
  if (track.finishReason) out[GEN_AI.RESPONSE_FINISH_REASONS] = [track.finishReason];
  return out;
}

/** The public reason of an error (`rate_limited`, `upstream_failed`, …), or its kind. */
function errorType(err: unknown): string {
  if (err instanceof ConnectError) return errorDetailOf(err)?.reason ?? "error";
  return err instanceof Error ? err.name : "error";
}

function finish(call: ChatCall, spans: RequestSpans, err: unknown): void {
  open.delete(call);
  const { track } = call;
  const { span } = spans;
  const usage = usageAttributes(track);
  if (spans.served) {
    spans.served.setAttributes(usage);
    if (spans.responseModel) spans.served.setAttribute(GEN_AI.RESPONSE_MODEL, spans.responseModel);
    if (track.status === "error") {
      // The provider's stream broke after its first event.
      spans.served.setAttribute("error.type", "stream_error");
      spans.served.setStatus({ code: SpanStatusCode.ERROR, message: "the provider's stream broke" });
    }
    spans.served.end();
  }
  if (track.requestedModel) {
    span.updateName(`chat ${track.requestedModel}`);
    span.setAttribute(GEN_AI.REQUEST_MODEL, track.requestedModel);
  }
  span.setAttributes({
    ...usage,
    "portico.attempts": track.attempts,
    "portico.status": track.status === "pending" ? (err === undefined ? "success" : "error") : track.status,
  });
  if (track.provider) span.setAttributes({ [GEN_AI.PROVIDER_NAME]: track.provider, [GEN_AI.SYSTEM]: track.provider });
  if (spans.responseModel) span.setAttribute(GEN_AI.RESPONSE_MODEL, spans.responseModel);
  if (track.timeToFirstTokenMs !== null) span.setAttribute("portico.time_to_first_token_ms", track.timeToFirstTokenMs);
  if (track.presetSlug) span.setAttribute("portico.preset", track.presetSlug);
  if (track.cache) span.setAttribute("portico.cache", track.cache);
  if (err !== undefined && !call.signal.aborted) {
    const type = errorType(err);
    span.setAttribute("error.type", type);
    span.setStatus({ code: SpanStatusCode.ERROR, message: type });
  } else if (track.status === "error") {
    span.setAttribute("error.type", "stream_error");
    span.setStatus({ code: SpanStatusCode.ERROR, message: "the provider's stream broke" });
  }
  span.end();
}

export function createTraceStage(): ChatStage {
  const t = tracer();
  return {
    name: "trace",
    async run(call, next) {
      const parent = requestContext(call.signal);
      const span = t.startSpan(
        "chat",
        {
          kind: SpanKind.INTERNAL,
          attributes: {
            [GEN_AI.OPERATION_NAME]: "chat",
            "portico.generation_id": call.track.id,
            "portico.streamed": call.streamed,
          },
        },
        parent,
      );
      // Not sampled: no attempt span, no attributes.
      if (!span.isRecording()) return next();
      const spans: RequestSpans = { span };
      open.set(call, spans);
      let outcome;
      try {
        outcome = await next();
      } catch (err) {
        finish(call, spans, err);
        throw err;
      }
      if (outcome.kind === "completion") {
        spans.responseModel = outcome.completion.model;
        finish(call, spans, undefined);
        return outcome;
      }
      let first = true;
      return {
        kind: "stream",
        events: tapEvents(outcome.events, {
          map(event) {
            if (first) {
              first = false;
              if (typeof event.model === "string") spans.responseModel = event.model;
            }
            return event;
          },
          end(e) {
            finish(call, spans, e.how === "failed" ? e.error : undefined);
          },
        }),
      };
    },
  };
}

/** An attempt's span, when the request is traced: `served()` once it answered, `failed(err)` otherwise. */
export interface AttemptSpan {
  served(): void;
  failed(err: unknown): void;
}

/** Starts the span of attempt number `n` of `call` (undefined when the request is not traced: tracing off). */
export function attemptSpan(call: ChatCall, a: Attempt, n: number): AttemptSpan | undefined {
  const spans = open.get(call);
  if (!spans) return undefined;
  const span = tracer().startSpan(
    `chat ${a.call.model}`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        [GEN_AI.OPERATION_NAME]: "chat",
        [GEN_AI.PROVIDER_NAME]: a.provider,
        [GEN_AI.SYSTEM]: a.provider,
        [GEN_AI.REQUEST_MODEL]: a.call.model,
        "portico.requested_model": a.requestedModel,
        "portico.attempt": n,
        "portico.credential_source": a.credentialSource,
        "portico.credential_id": a.credentialId,
        ...(a.catalogModel ? { "portico.catalog_model": a.catalogModel } : {}),
      },
    },
    trace.setSpan(ROOT_CONTEXT, spans.span),
  );
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
