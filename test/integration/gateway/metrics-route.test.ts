/**
 * /metrics answers with the process's render(): its registry, or (in a `serve` worker) the sum over every
 * worker gathered by the primary. When that gathering fails, the scrape gets 503 in the error envelope
 * rather than this worker's share passed off as the whole (test/e2e/foundation/serve-workers.test.ts
 * covers the sum itself). With PORTICO_METRICS_TOKEN set, a scrape needs that bearer token.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildGateway } from "../../../src/gateway/app.js";
import { createMetrics } from "../../../src/lib/metrics.js";
import { createLogger } from "../../../src/log.js";
import { startHarness, type Harness } from "../../helpers/harness.js";

describe("/metrics", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h?.close());

  const gateway = (metrics: ReturnType<typeof createMetrics>, metricsToken?: string) =>
    buildGateway({ transport: h.core.createInMemoryTransport(), logger: createLogger({ level: "silent" }), metrics, bodyLimitBytes: 1024 * 1024, brand: "service", metricsToken });

  it("renders the registry in Prometheus text format, counting requests", async () => {
    const app = await gateway(createMetrics());
    try {
      for (let i = 0; i < 3; i++) expect((await app.inject({ method: "GET", url: "/healthz" })).statusCode).toBe(200);
      const res = await app.inject({ method: "GET", url: "/metrics" });
      expect(res.statusCode).toBe(200);
      expect(res.headers["content-type"]).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(res.body).toMatch(/^portico_gateway_http_request_duration_seconds_count\{method="GET",route="\/healthz",status="200"\} 3$/m);
    } finally {
      await app.close();
    }
  });

  it("answers 503 in the envelope when the workers' metrics cannot be gathered", async () => {
    const metrics = createMetrics();
    metrics.render = () => Promise.reject(new Error("the serve primary did not answer with the workers' metrics in time"));
    const app = await gateway(metrics);
    try {
      const res = await app.inject({ method: "GET", url: "/metrics" });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.code).toBe(503);
      expect(res.json().error.message).toMatch(/^Metrics unavailable/);
    } finally {
      await app.close();
    }
  });

  it("with a token configured, answers 401 without it or with another, and 200 with it", async () => {
    const token = "scrape-token-0123456789";
    const app = await gateway(createMetrics(), token);
    try {
      for (const authorization of [undefined, "Bearer wrong-token-0123456789", `Basic ${token}`, `Bearer ${token}x`, "Bearer"]) {
        const res = await app.inject({ method: "GET", url: "/metrics", headers: authorization ? { authorization } : {} });
        expect(res.statusCode).toBe(401);
        expect(res.headers["www-authenticate"]).toBe('Bearer realm="metrics"');
        expect(res.json()).toEqual({ error: { code: 401, message: "Metrics need the bearer token configured in PORTICO_METRICS_TOKEN" } });
        expect(res.body).not.toContain(token);
      }
      const ok = await app.inject({ method: "GET", url: "/metrics", headers: { authorization: `bearer ${token}` } });
      expect(ok.statusCode).toBe(200);
      expect(ok.body).toMatch(/^portico_gateway_http_request_duration_seconds_count\{method="GET",route="\/metrics",status="401"\} 5$/m);
      // The other probes stay open: they carry nothing but liveness and readiness.
      expect((await app.inject({ method: "GET", url: "/healthz" })).statusCode).toBe(200);
    } finally {
      await app.close();
    }
  });
});
