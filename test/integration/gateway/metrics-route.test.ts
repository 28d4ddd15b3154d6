/**
 * /metrics answers with the process's render(): its registry, or (in a `serve` worker) the sum over every
 * worker gathered by the primary. When that gathering fails, the scrape gets 503 in the error envelope
 * rather than this worker's share passed off as the whole (test/e2e/foundation/serve-workers.test.ts
 * covers the sum itself).
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

  const gateway = (metrics: ReturnType<typeof createMetrics>) =>
    buildGateway({ transport: h.core.createInMemoryTransport(), logger: createLogger({ level: "silent" }), metrics, bodyLimitBytes: 1024 * 1024, brand: "service" });

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
});
