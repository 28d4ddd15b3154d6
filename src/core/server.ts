/**
 * The core's network listener: Connect, gRPC and gRPC-Web over HTTP/2 on one port: cleartext (h2c),
 * or TLS when given a certificate and key. gRPC calls to unary and server-streaming methods are served by
 * src/core/grpc-fast-path.ts (the in-process transport behind a gRPC framing), the rest by connect-node.
 */
import { correctParseErrors } from "./parse-error-status.js";
import { fastify, LogController, type FastifyInstance } from "fastify";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import type { Http2Server } from "node:http2";
import type { Logger } from "pino";
import type { Core } from "./core.js";
import { createDirectTransport } from "./direct-transport.js";
import { createGrpcFastPath, installGrpcFastPath } from "./grpc-fast-path.js";

export interface CoreServerOptions {
  host: string;
  port: number;
  logger: Logger;
  /** Largest accepted message in bytes. */
  readMaxBytes?: number;
  /** Listen on a port of this process alone, even in a node:cluster worker (which otherwise shares it). */
  exclusive?: boolean;
  /** Serve TLS with this certificate chain and key (PEM); without it the listener is h2c. */
  tls?: { cert: string | Buffer; key: string | Buffer } | undefined;
}

export interface CoreServer {
  app: FastifyInstance<Http2Server>;
  port: number;
  url: string;
  close(): Promise<void>;
}

export async function startCoreServer(core: Core, opts: CoreServerOptions): Promise<CoreServer> {
  const app = fastify({
    http2: true,
    ...(opts.tls ? { https: { cert: opts.tls.cert, key: opts.tls.key, minVersion: "TLSv1.2" as const } } : {}),
    loggerInstance: opts.logger.child({ component: "core" }),
    logController: new LogController({ disableRequestLogging: true }),
    forceCloseConnections: true,
  }) as unknown as FastifyInstance<Http2Server>;
  const sessions = new Set<import("node:http2").Http2Session>();
  app.server.on("session", (session) => {
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
  });
  const readMaxBytes = opts.readMaxBytes ?? 4 * 1024 * 1024;
  const fastPath = createGrpcFastPath(core.routes, createDirectTransport(core.routes, core.interceptors), readMaxBytes);
  installGrpcFastPath(app.server, fastPath);
  app.addHook("preClose", async () => {
    for (const s of sessions) s.close();
    // Hop channels start no more calls and end once theirs are answered (the sessions' close waits for them).
    fastPath.drain();
    // As connect-fastify's shutdownTimeoutMs: the calls still open 2 s into the close are aborted (no reason given, as there).
    setTimeout(() => fastPath.abortAll(undefined), 2000).unref();
  });
  await app.register(fastifyConnectPlugin, {
    routes: (router) => {
      core.routes(router);
      correctParseErrors(router);
    },
    interceptors: core.interceptors,
    readMaxBytes,
    shutdownTimeoutMs: 2000,
  });
  app.get("/healthz", async () => ({ status: "ok" }));
  await app.listen({ host: opts.host, port: opts.port, ...(opts.exclusive ? { exclusive: true } : {}) });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : opts.port;
  const hostForUrl = opts.host.includes(":") ? `[${opts.host}]` : opts.host;
  return {
    app,
    port,
    url: `${opts.tls ? "https" : "http"}://${hostForUrl === "0.0.0.0" ? "127.0.0.1" : hostForUrl}:${port}`,
    close: async () => {
      await app.close();
    },
  };
}
