/**
 * A split gateway whose core dies (SIGKILL) answers 503 with {reason: core_unavailable, retryable:
 * true} and Retry-After, on every route, never a 409 or the transport's words; once a core listens
 * again on the same address, the gateway's pooled HTTP/2 connection recovers.
 */
import { createServer } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { FastifyInstance } from "fastify";
import { afterAll, describe, expect, it } from "vitest";
import { buildGateway } from "../../../src/gateway/app.js";
import { createCoreTransport } from "../../../src/gateway/core-transport.js";
import { createMetrics } from "../../../src/lib/metrics.js";
import { createLogger } from "../../../src/log.js";
import { runPortico, startPortico } from "../../helpers/cli.js";

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** connect-node's gRPC transport (what a gateway built on Connect dials with), and the split gateway's own core client. */
const transports = [
  { name: "connect-node gRPC transport", make: (url: string) => createGrpcTransport({ baseUrl: url }), overTheWire: false },
  { name: "the split gateway's core client", make: (url: string) => createCoreTransport(url), overTheWire: true },
];

describe.each(transports)("split gateway with a dead core ($name)", ({ make, overTheWire }) => {
  const dir = mkdtempSync(join(tmpdir(), "portico-deadcore-"));
  let gateway: FastifyInstance | undefined;
  afterAll(async () => {
    await gateway?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("answers 503 retryable while the core is gone and recovers when it is back", async () => {
    const env = { PORTICO_DATA_DIR: dir, PORTICO_GRPC_PORT: String(await freePort()), PORTICO_EMBEDDED_HOST: "false" };
    const boot = JSON.parse((await runPortico(["admin", "bootstrap", "--json"], env)).stdout);
    const startCore = () => startPortico(["core"], env, (out) => (out.includes("core listening") ? true : undefined));
    let core = await startCore();
    gateway = await buildGateway({
      transport: make(`http://127.0.0.1:${env.PORTICO_GRPC_PORT}`),
      coreOverTheWire: overTheWire,
      logger: createLogger({ level: "silent" }),
      metrics: createMetrics(),
      bodyLimitBytes: 1_048_576,
      brand: "service",
    });
    await gateway.listen({ host: "127.0.0.1", port: 0 });
    const base = `http://127.0.0.1:${(gateway.server.address() as { port: number }).port}/api/v1`;
    const auth = { authorization: `Bearer ${boot.management_key}`, "content-type": "application/json" };
    const key = () => fetch(`${base}/key`, { headers: auth });
    expect((await key()).status).toBe(200);

    const died = new Promise((r) => core.child.once("exit", r));
    core.child.kill("SIGKILL");
    await died;

    const calls = [
      () => key(),
      () => fetch(`${base}/presets/p/chat/completions`, { method: "POST", headers: auth, body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }] }) }),
      () => fetch(`${base}/interns/00000000-0000-4000-8000-000000000000/chat/completions`, { method: "POST", headers: auth, body: JSON.stringify({ stream: true, messages: [{ role: "user", content: "x" }] }) }),
      () => key(),
    ];
    for (const call of calls) {
      const res = await call();
      const body = (await res.json()) as any;
      expect(res.status, JSON.stringify(body)).toBe(503);
      expect(body.error).toMatchObject({ code: 503, metadata: { reason: "core_unavailable", retryable: true } });
      expect(res.headers.get("retry-after")).toBe("1");
      expect(JSON.stringify(body)).not.toMatch(/ECONN|127\.0\.0\.1/);
    }

    core = await startCore();
    try {
      await expect.poll(async () => (await key()).status, { timeout: 15_000, interval: 100 }).toBe(200);
    } finally {
      const exited = new Promise((r) => core.child.once("exit", r));
      core.child.kill("SIGTERM");
      await exited;
    }
  });
});
