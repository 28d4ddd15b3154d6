/**
 * Prometheus metrics of one process. Each process builds one registry in its composition root and
 * passes it to the parts that record; /metrics answers with `render()`: this registry, or in a worker of
 * `portico serve` the sum over every worker (src/cluster/ipc.ts), since the workers share one port and a
 * scrape reaches whichever of them the cluster picks.
 */
import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { fastInc, fastObserve } from "./metric-fast-path.js";

export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const rpcDuration = fastObserve(new Histogram({
    name: "portico_core_rpc_duration_seconds",
    help: "Duration of core RPCs (unary: to response; streaming: to first message).",
    labelNames: ["procedure", "code"] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [registry],
  }));
  const httpDuration = fastObserve(new Histogram({
    name: "portico_gateway_http_request_duration_seconds",
    help: "Duration of gateway HTTP requests until the response head (streams: until they end).",
    labelNames: ["method", "route", "status"] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30],
    registers: [registry],
  }));
  const overhead = fastObserve(new Histogram({
    name: "portico_overhead_seconds",
    help: "Portico's own time for a model request (chat completions, the dialects, embeddings): the response's x-portico-overhead-ms (time to the response head minus the time spent waiting on providers), by route and provider.",
    labelNames: ["route", "provider"] as const,
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [registry],
  }));
  // Per provider and model, from each request's generation record (src/core/chat/generation-metrics.ts). The
  // labels are bounded: `provider` is a configured provider's slug; `model` the catalog model's slug, or
  // "uncatalogued" (a model the catalog does not know: callers name those freely), or "none" (nothing served).
  const generations = fastInc(new Counter({
    name: "portico_generations_total",
    help: "Chat, messages, responses and embeddings requests by the provider and catalog model that served them, and how they ended (success, error, cancelled).",
    labelNames: ["provider", "model", "status"] as const,
    registers: [registry],
  }));
  const generationErrors = fastInc(new Counter({
    name: "portico_generation_errors_total",
    help: "Requests that ended in an error, by provider, catalog model and the public error code (HTTP status).",
    labelNames: ["provider", "model", "code"] as const,
    registers: [registry],
  }));
  const attemptFailures = fastInc(new Counter({
    name: "portico_generation_attempt_failures_total",
    help: "Upstream attempts that failed, by provider, catalog model of the attempt's endpoint and reason (rate_limited, timeout, outage, auth_failed, context_length, content_filter, model_unavailable, slow_stream, client_error).",
    labelNames: ["provider", "model", "reason"] as const,
    registers: [registry],
  }));
  const generationDuration = fastObserve(new Histogram({
    name: "portico_generation_duration_seconds",
    help: "Time from a request's arrival to the end of its answer (a stream's last event), by provider and catalog model.",
    labelNames: ["provider", "model"] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [registry],
  }));
  const timeToFirstToken = fastObserve(new Histogram({
    name: "portico_generation_time_to_first_token_seconds",
    help: "Streams: time from the request's arrival to the provider's first event, by provider and catalog model.",
    labelNames: ["provider", "model"] as const,
    buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  }));
  const tokens = fastInc(new Counter({
    name: "portico_generation_tokens_total",
    help: "Tokens the providers reported (not counting answers from the response cache), by provider, catalog model and kind (input, output).",
    labelNames: ["provider", "model", "kind"] as const,
    registers: [registry],
  }));
  const cacheHits = fastInc(new Counter({
    name: "portico_generation_cache_hits_total",
    help: "Requests the response cache answered (no provider call), by the provider and catalog model of the stored answer.",
    labelNames: ["provider", "model"] as const,
    registers: [registry],
  }));
  const cost = fastInc(new Counter({
    name: "portico_generation_cost_usd_total",
    help: "The providers' price of the priced requests in USD, by provider, catalog model and who paid (platform, byok).",
    labelNames: ["provider", "model", "paid_by"] as const,
    registers: [registry],
  }));
  return {
    registry,
    rpcDuration,
    httpDuration,
    overhead,
    generation: { total: generations, errors: generationErrors, attemptFailures, duration: generationDuration, timeToFirstToken, tokens, cost, cacheHits },
    render: (): Promise<string> => registry.metrics() };
}

export type Metrics = ReturnType<typeof createMetrics>;
