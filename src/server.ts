/**
 * Composition root: builds the processes `portico serve`, `portico core` and `portico gateway` run,
 * from one Config. Nothing below this file reads the environment.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { FolderError } from "./lib/dirs.js";
import { redactDatabaseUrl } from "./db/client.js";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { Config } from "./config.js";
import { openDatabase, type DatabaseHandle } from "./db/client.js";
import { createCore, type Core } from "./core/core.js";
import { startCoreServer, type CoreServer } from "./core/server.js";
import { buildGateway } from "./gateway/app.js";
import { createMetricsEndpoint } from "./gateway/metrics-endpoint.js";
import { publicError } from "./gateway/errors.js";
import { createMetrics, type Metrics } from "./lib/metrics.js";
import { createIpcMetrics, isServeWorker } from "./cluster/ipc.js";
import { startTracing } from "./lib/tracing.js";

export interface RunningProcess {
  coreServer?: CoreServer;
  /**
   * In a worker of a multi-process `portico serve`: this worker's own core listener (loopback, a port of
   * its own), where other workers forward intern calls and the embedded host attaches; the public core
   * port is shared by all workers.
   */
  internalCoreServer?: CoreServer;
  gateway?: FastifyInstance;
  gatewayUrl?: string;
  database?: DatabaseHandle;
  core?: Core;
  /** Extra things to stop first (embedded intern host). */
  onClose: Array<() => Promise<void>>;
  /** False until start-up (including first-run setup) has finished: /readyz answers 503 until then. */
  startupComplete: boolean;
  close(): Promise<void>;
}

function processHandle(): RunningProcess {
  const handle: RunningProcess = {
    onClose: [],
    startupComplete: false,
    async close() {
      // The gateway first: its open requests and streams end (in band at the drain deadline) while the
      // core, the embedded host and the database still serve them.
      await handle.gateway?.close();
      for (const fn of handle.onClose.splice(0).reverse()) {
        await fn().catch(() => undefined);
      }
      await handle.internalCoreServer?.close();
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
    const tracing = await startTracing(config.tracing, logger, config.instanceId);
    if (tracing) handle.onClose.push(() => tracing.close());
    handle.database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, migrate: true }).catch((err: unknown) => {
      throw startupError(err, config);
    });
    logger.info({ provider: handle.database.provider }, "database ready");
    handle.core = await createCore({ database: handle.database, config, logger, metrics });
    const tls = config.grpcTls ? { cert: readFileSync(config.grpcTls.certFile), key: readFileSync(config.grpcTls.keyFile) } : undefined;
    handle.coreServer = await startCoreServer(handle.core, { host: config.host, port: config.grpcPort, logger, tls }).catch((err: unknown) => {
      throw listenError(err, "PORTICO_GRPC_PORT", config.host, config.grpcPort);
    });
    logger.info({ url: handle.coreServer.url }, `core listening (Connect, gRPC, gRPC-Web over ${tls ? "TLS" : "h2c"})`);
    if (isServeWorker()) {
      // A port of this worker alone, on the configured interface, where other processes forward intern
      // calls for links this worker holds. With PORTICO_CORE_ADVERTISE_URL, the worker advertises that
      // URL's scheme and host with its own port (so other machines sharing Redis can reach it).
      handle.internalCoreServer = await startCoreServer(handle.core, { host: config.host, port: 0, exclusive: true, logger, tls });
      const own = new URL(handle.internalCoreServer.url);
      if (config.interns.advertiseUrl) {
        const advertised = new URL(config.interns.advertiseUrl);
        advertised.port = own.port;
        handle.core.listening(advertised.origin);
      } else handle.core.listening(own.origin);
      logger.info({ url: handle.internalCoreServer.url }, "worker's own core listener (intern forwarding, embedded host)");
    } else handle.core.listening(handle.coreServer.url);
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
  startupComplete: () => boolean = () => true,
  tracingPlugin?: import("fastify").FastifyPluginCallback,
  /** The transport reaches a core over the wire (GatewayOptions.coreOverTheWire). */
  coreOverTheWire = false,
): Promise<{ app: FastifyInstance; url: string }> {
  const app = await buildGateway({
    ...(tracingPlugin ? { tracingPlugin } : {}),
    coreOverTheWire,
    startupComplete,
    transport,
    logger,
    metrics,
    bodyLimitBytes: config.bodyLimitBytes,
    requestTimeoutMs: config.requestTimeoutMs,
    brand: config.brand,
    metricsToken: config.metricsToken,
    heartbeatIntervalMs: config.interns.heartbeatIntervalMs,
    drainMs: drainBudget(config.shutdownTimeoutMs),
  });
  await app.listen({ host: config.host, port: config.httpPort }).catch(async (err: unknown) => {
    await app.close().catch(() => undefined);
    throw listenError(err, "PORT", config.host, config.httpPort);
  });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : config.httpPort;
  const url = `http://${config.host === "0.0.0.0" ? "127.0.0.1" : config.host}:${port}`;
  logger.info({ url: `${url}/api/v1` }, "gateway listening");
  return { app, url };
}

/** `portico serve`: core + gateway in one process, joined by an in-memory transport. */
export async function startServe(config: Config, logger: Logger): Promise<RunningProcess> {
  const metrics = createMetrics();
  // Workers share the gateway port: a scrape must see all of them, whichever answers.
  if (isServeWorker()) metrics.render = createIpcMetrics(metrics.registry);
  const handle = await startCoreProcess(config, logger, metrics);
  try {
    // The core process started tracing (when configured); the gateway shares its provider.
    const tracing = await startTracing(config.tracing, logger, config.instanceId);
    if (tracing) handle.onClose.push(() => tracing.close());
    const { app, url } = await startGateway(config, logger, handle.core!.createInMemoryTransport(), metrics, () => handle.startupComplete, tracing?.fastifyPlugin());
    handle.gateway = app;
    handle.gatewayUrl = url;
    // Intern hosts reach this gateway here unless PORTICO_INTERN_GATEWAY_URL / PORTICO_PUBLIC_URL say otherwise.
    handle.core!.gatewayListening(url);
    return handle;
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/**
 * `portico core` with PORTICO_METRICS_PORT: a plain HTTP/1.1 listener on HOST for GET /metrics (the same
 * endpoint as the gateway's, token included); anything else is 404 in the error envelope.
 */
export async function startMetricsListener(config: Config, logger: Logger, metrics: Metrics, port: number): Promise<{ url: string; close(): Promise<void> }> {
  const scrape = createMetricsEndpoint(metrics, config.metricsToken, logger.child({ component: "metrics" }));
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/metrics" || (req.method !== "GET" && req.method !== "HEAD")) {
      const err = path === "/metrics" ? publicError(405, "Only GET is served here") : publicError(404, "Resource not found: this port serves GET /metrics only");
      res.writeHead(err.status, { "content-type": "application/json; charset=utf-8", ...(err.status === 405 ? { allow: "GET, HEAD" } : {}) });
      res.end(JSON.stringify(err.body));
      return;
    }
    scrape(req.headers.authorization).then((answer) => {
      res.writeHead(answer.status, answer.headers);
      res.end(req.method === "HEAD" ? undefined : answer.body);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, config.host, () => {
      server.off("error", reject);
      resolve();
    });
  }).catch((err: unknown) => {
    throw listenError(err, "PORTICO_METRICS_PORT", config.host, port);
  });
  const address = server.address();
  const bound = typeof address === "object" && address ? address.port : port;
  const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${bound}/metrics`;
  logger.info({ url }, "metrics listening");
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** `portico gateway --core <url>`: the gateway alone, dialing a core over gRPC (one HTTP/2 session per core URL, src/gateway/h2-grpc-transport.ts). */
export async function startSplitGateway(config: Config, logger: Logger, coreUrl: string): Promise<RunningProcess> {
  const handle = processHandle();
  const metrics = createMetrics();
  // Imported here: the core client serves only the split gateway, never `portico serve`.
  const { createCoreTransport } = await import("./gateway/core-transport.js");
  const transport = createCoreTransport(coreUrl, { tracing: config.tracing !== undefined, hopChannel: config.coreHopChannel });
  const tracing = await startTracing(config.tracing, logger, config.instanceId);
  if (tracing) handle.onClose.push(() => tracing.close());
  try {
    const { app, url } = await startGateway(config, logger, transport, metrics, () => true, tracing?.fastifyPlugin(), true);
    handle.gateway = app;
    handle.gatewayUrl = url;
  } catch (err) {
    await handle.close();
    throw err;
  }
  return handle;
}

/**
 * The part of the shutdown budget (PORTICO_SHUTDOWN_TIMEOUT_MS) open requests and streams may use to end
 * by themselves; the rest is kept for the embedded host, the core and the database to stop.
 */
export function drainBudget(shutdownTimeoutMs: number): number {
  return Math.max(Math.floor(shutdownTimeoutMs / 2), shutdownTimeoutMs - 3_000);
}

/** A listen failure, naming the setting that chose the address. */
function listenError(err: unknown, setting: string, host: string, port: number): Error {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "EADDRINUSE") return new Error(`${setting}=${port}: ${host}:${port} is already in use (set ${setting} to a free port)`, { cause: err });
  if (code === "EACCES") return new Error(`${setting}=${port}: not permitted to listen on ${host}:${port}`, { cause: err });
  if (code === "EADDRNOTAVAIL" || code === "ENOTFOUND") return new Error(`HOST=${host}: no such local address to listen on`, { cause: err });
  return err instanceof Error ? err : new Error(String(err));
}

/** A database failure at start-up, naming the setting at fault (DATABASE_URL redacted). */
function startupError(err: unknown, config: Config): Error {
  if (err instanceof FolderError) return err;
  const code = (err as NodeJS.ErrnoException).code ?? (err as { cause?: { code?: string } }).cause?.code;
  const message = err instanceof Error ? err.message : String(err);
  if (config.databaseUrl) {
    const where = `DATABASE_URL (${redactDatabaseUrl(config.databaseUrl)})`;
    if (code === "ECONNREFUSED" || /ECONNREFUSED/.test(message)) return new Error(`${where}: connection refused; is PostgreSQL running there?`, { cause: err });
    if (code === "ENOTFOUND" || /ENOTFOUND/.test(message)) return new Error(`${where}: unknown host`, { cause: err });
    if (code === "28P01" || code === "28000") return new Error(`${where}: authentication failed`, { cause: err });
    return new Error(`${where}: ${message}`, { cause: err });
  }
  return new Error(`PORTICO_DATA_DIR (${config.dataDir}): ${message}`, { cause: err });
}
