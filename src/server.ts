/**
 * Composition root: builds the processes `portico serve`, `portico core` and `portico gateway` run,
 * from one Config. Nothing below this file reads the environment.
 */
import { readFileSync } from "node:fs";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { Config } from "./config.js";
import { openDatabase, type DatabaseHandle } from "./db/client.js";
import { createCore, type Core } from "./core/core.js";
import { startCoreServer, type CoreServer } from "./core/server.js";
import { buildGateway } from "./gateway/app.js";
import { createMetrics, type Metrics } from "./lib/metrics.js";

export interface RunningProcess {
  coreServer?: CoreServer;
  gateway?: FastifyInstance;
  gatewayUrl?: string;
  database?: DatabaseHandle;
  core?: Core;
  /** Extra things to stop first (embedded intern host). */
  onClose: Array<() => Promise<void>>;
  close(): Promise<void>;
}

function processHandle(): RunningProcess {
  const handle: RunningProcess = {
    onClose: [],
    async close() {
      for (const fn of handle.onClose.splice(0).reverse()) {
        await fn().catch(() => undefined);
      }
      await handle.gateway?.close();
      await handle.coreServer?.close();
      await handle.core?.close();
      await handle.database?.close();
    },
  };
  return handle;
}

export async function startCoreProcess(config: Config, logger: Logger, metrics: Metrics = createMetrics()) {
  const handle = processHandle();
  try {
    handle.database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, migrate: true });
    logger.info({ provider: handle.database.provider }, "database ready");
    handle.core = await createCore({ database: handle.database, config, logger, metrics });
    const tls = config.grpcTls ? { cert: readFileSync(config.grpcTls.certFile), key: readFileSync(config.grpcTls.keyFile) } : undefined;
    handle.coreServer = await startCoreServer(handle.core, { host: config.host, port: config.grpcPort, logger, tls });
    logger.info({ url: handle.coreServer.url }, `core listening (Connect, gRPC, gRPC-Web over ${tls ? "TLS" : "h2c"})`);
    return handle;
  } catch (err) {
    await handle.close();
    throw err;
  }
}

export async function startGateway(
  config: Config,
  logger: Logger,
  transport: import("@connectrpc/connect").Transport,
  metrics: Metrics,
): Promise<{ app: FastifyInstance; url: string }> {
  const app = await buildGateway({
    transport,
    logger,
    metrics,
    bodyLimitBytes: config.bodyLimitBytes,
    requestTimeoutMs: config.requestTimeoutMs,
    brand: config.brand,
  });
  await app.listen({ host: config.host, port: config.httpPort });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : config.httpPort;
  const url = `http://${config.host === "0.0.0.0" ? "127.0.0.1" : config.host}:${port}`;
  logger.info({ url: `${url}/api/v1` }, "gateway listening");
  return { app, url };
}

/** `portico serve`: core + gateway in one process, joined by an in-memory transport. */
export async function startServe(config: Config, logger: Logger): Promise<RunningProcess> {
  const metrics = createMetrics();
  const handle = await startCoreProcess(config, logger, metrics);
  try {
    const { app, url } = await startGateway(config, logger, handle.core!.createInMemoryTransport(), metrics);
    handle.gateway = app;
    handle.gatewayUrl = url;
    return handle;
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/** `portico gateway --core <url>`: the gateway alone, dialing a core over gRPC (pooled HTTP/2 sessions). */
export async function startSplitGateway(config: Config, logger: Logger, coreUrl: string): Promise<RunningProcess> {
  const handle = processHandle();
  const metrics = createMetrics();
  const transport = createGrpcTransport({ baseUrl: coreUrl, pingIntervalMs: 10_000, idleConnectionTimeoutMs: 60_000 });
  const { app, url } = await startGateway(config, logger, transport, metrics);
  handle.gateway = app;
  handle.gatewayUrl = url;
  return handle;
}
