/**
 * Prometheus metrics of one process. Each process builds one registry in its composition root and
 * passes it to the parts that record; /metrics answers with `render()`: this registry, or in a worker of
 * `portico serve` the sum over every worker (src/cluster/ipc.ts), since the workers share one port and a
 * scrape reaches whichever of them the cluster picks.
 */
import { Histogram, Registry, collectDefaultMetrics } from "prom-client";

export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const rpcDuration = new Histogram({
    name: "portico_core_rpc_duration_seconds",
    help: "Duration of core RPCs (unary: to response; streaming: to first message).",
    labelNames: ["procedure", "code"] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [registry],
  });
  const httpDuration = new Histogram({
    name: "portico_gateway_http_request_duration_seconds",
    help: "Duration of gateway HTTP requests until the response head (streams: until they end).",
    labelNames: ["method", "route", "status"] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30],
    registers: [registry],
  });
  const overhead = new Histogram({
    name: "portico_overhead_seconds",
    help: "Portico's own time for a chat request: the response's x-portico-overhead-ms (time to the response head minus the time spent waiting on providers), by route and provider.",
    labelNames: ["route", "provider"] as const,
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [registry],
  });
  return { registry, rpcDuration, httpDuration, overhead, render: (): Promise<string> => registry.metrics() };
}

export type Metrics = ReturnType<typeof createMetrics>;
