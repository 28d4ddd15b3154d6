/** /readyz answers 503 until the process says start-up (first-run setup included) has finished. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildGateway } from "../../../src/gateway/app.js";
import { createMetrics } from "../../../src/lib/metrics.js";
import { createLogger } from "../../../src/log.js";
import { startHarness, type Harness } from "../../helpers/harness.js";

describe("readiness", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h?.close());

  it("is 503 while start-up is unfinished and 200 after", async () => {
    let done = false;
    const app = await buildGateway({
      transport: h.core.createInMemoryTransport(),
      logger: createLogger({ level: "silent" }),
      metrics: createMetrics(),
      bodyLimitBytes: 1024 * 1024,
      brand: "service",
      startupComplete: () => done,
    });
    try {
      const before = await app.inject({ method: "GET", url: "/readyz" });
      expect(before.statusCode).toBe(503);
      expect(before.json().error.message).toContain("start-up");
      expect((await app.inject({ method: "GET", url: "/healthz" })).statusCode).toBe(200);
      done = true;
      expect((await app.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(200);
    } finally {
      await app.close();
    }
  });
});
