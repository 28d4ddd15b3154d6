/**
 * The public HTTP gateway: translates the OpenAI-compatible JSON/SSE API under /api/v1 into core
 * RPCs. It owns HTTP concerns only (parsing, limits, envelopes, SSE); the core decides the rest.
 * buildGateway() returns the app without listening; server code owns listen and shutdown.
 */
import { randomUUID } from "node:crypto";
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { fastify, LogController, type FastifyError, type FastifyInstance } from "fastify";
import fastifySwagger from "@fastify/swagger";
import { Code, createClient, type Transport } from "@connectrpc/connect";
import type { Logger } from "pino";
import { HealthService } from "../gen/portico/health/v1/health_service_pb.js";
import { IdentityService } from "../gen/portico/identity/v1/identity_service_pb.js";
import { callOptionsFor, watchClientClose } from "./rpc.js";
import type { Metrics } from "../lib/metrics.js";
import type { GatewayContext } from "./context.js";
import { asConnectError, publicError, publicErrorFromConnect, reasonForStatus, type PublicError } from "./errors.js";
import { registerGatewayRoutes } from "./routes/index.js";
import { registerGeminiRoutes } from "./routes/gemini.js";
import { registerConsoleRoutes } from "./routes/console.js";
import { checkJsonInput } from "../contract/json-input.js";
import { createMetricsEndpoint } from "./metrics-endpoint.js";
import { createSseRelay } from "./sse-relay.js";

/** Fastify error code of a body that breaks the JSON input limits (depth, Unicode). */
const JSON_INPUT_ERROR = "PORTICO_JSON_INPUT";

export interface GatewayOptions {
  transport: Transport;
  /**
   * The transport reaches a core over the wire (the split gateway, src/gateway/core-transport.ts): the request
   * bodies of chat completions and of the Messages, Responses and Gemini dialects go to it as the JSON text the gateway received (`body_json`), which costs far less than a
   * `google.protobuf.Struct` to send and to read. Default false: in process the parsed object is handed over as
   * is. Deployments update the core before the gateway: a core that predates `body_json` refuses such requests
   * for their missing body.
   */
  coreOverTheWire?: boolean;
  logger: Logger;
  metrics: Metrics;
  bodyLimitBytes: number;
  brand: string;
  /** Time to receive a whole request (headers and body) before 408; default 30 s. */
  requestTimeoutMs?: number;
  /** False while the process is still setting up (first-run bootstrap): /readyz answers 503. */
  startupComplete?: () => boolean;
  /** When set, /metrics requires `Authorization: Bearer <metricsToken>`; otherwise it is open. */
  metricsToken?: string | undefined;
  /** Idle time after which an open stream carries a `: keepalive` comment; default 30 s. */
  heartbeatIntervalMs?: number;
  /**
   * On close: how long open requests and streams may run to their end before the streams still open
   * are ended in band (error chunk and `data: [DONE]`); default 5 s.
   */
  drainMs?: number;
  /** Tracing on (src/lib/tracing.ts): the Fastify plugin making a span per request. */
  tracingPlugin?: import("fastify").FastifyPluginCallback;
}

/** A streaming answer opens (200, headers, `: keepalive`) after at most this long without its first chunk. */
export const STREAM_OPEN_AFTER_MS = 1_000;

declare module "fastify" {
  interface FastifyRequest {
    /** The JSON body's text as received ("" without a JSON body): what a core over the wire is sent (`body_json`). */
    jsonText: string;
  }
  interface FastifyContextConfig {
    /** Intern routes put {reason, retryable} metadata on every error, including gateway-level ones. */
    errorMetadata?: boolean;
    /**
     * Credentials are judged before input: when the body or query fails the route's schema, the core
     * first checks the key (and management permission) and its 401/403 wins over the 400.
     */
    authorizeFirst?: { management: boolean };
  }
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

export async function buildGateway(opts: GatewayOptions): Promise<FastifyInstance> {
  const requestTimeoutMs = opts.requestTimeoutMs ?? 30_000;
  const send = (reply: import("fastify").FastifyReply, err: PublicError) => {
    if (err.retryAfterSeconds > 0) reply.header("retry-after", String(err.retryAfterSeconds));
    return reply.code(err.status).type("application/json; charset=utf-8").send(err.body);
  };
  const app = fastify({
    loggerInstance: opts.logger.child({ component: "gateway" }),
    bodyLimit: opts.bodyLimitBytes,
    // Path parameters (slugs, ids) are validated by the core; let long ones reach it for a 400 in the envelope.
    routerOptions: { maxParamLength: 1024 },
    logController: new LogController({ disableRequestLogging: true }),
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers["x-request-id"];
      return typeof given === "string" && REQUEST_ID.test(given) ? given : randomUUID();
    },
    ajv: { customOptions: { allowUnionTypes: true, coerceTypes: false, useDefaults: false, removeAdditional: false, allErrors: false } },
    // Connections still open after the drain (see preClose below) are closed; requests arriving during
    // the drain get a 503 in the envelope from the onRequest hook.
    forceCloseConnections: true,
    return503OnClosing: false,
    // A client must deliver its whole request in time (a slow or stalled body is cut with 408); only
    // receiving is limited, so long SSE responses are unaffected. Node checks every `connectionsCheckingInterval`.
    requestTimeout: requestTimeoutMs,
    http: { headersTimeout: Math.min(requestTimeoutMs, 60_000), connectionsCheckingInterval: Math.min(1_000, requestTimeoutMs) },
    frameworkErrors: (error, req, reply) => {
      // Malformed percent-encoding and over-long path parameters: the envelope, never the path echoed.
      const status = error.code === "FST_ERR_MAX_PARAM_LENGTH" ? 414 : 400;
      const message = status === 414 ? "Request path is too long" : "Request path is not valid percent-encoded UTF-8";
      return send(reply, publicError(status, message, metadataFor(req.url, status)));
    },
    clientErrorHandler: (err: NodeJS.ErrnoException, socket) => writeClientError(err, socket),
  });
  // First, so that its span covers every other hook of a request.
  if (opts.tracingPlugin) await app.register(opts.tracingPlugin);
  // What Node answers before Fastify sees a request, in the envelope too: an `Expect` other than
  // 100-continue (Node's default: an empty 417) and CONNECT (Node's default: the socket closed unanswered).
  app.server.on("checkExpectation", (_req: IncomingMessage, res: ServerResponse) => {
    const body = JSON.stringify(publicError(417, "Only `Expect: 100-continue` is supported").body);
    res.writeHead(417, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body), connection: "close" });
    res.end(body);
  });
  app.server.on("connect", (_req: IncomingMessage, socket: Duplex) => {
    writeRawError(socket, 405, "CONNECT is not supported: this is not a proxy", { allow: "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS" });
  });
  // Only JSON bodies: anything else is 415 in the envelope. An empty JSON body is "no body" (clients
  // that always send Content-Type can still DELETE); routes that need a body say so in their schema.
  app.removeContentTypeParser("text/plain");
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.decorateRequest("jsonText", "");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (req, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (text.trim() === "") return done(null, undefined);
    return parseJson(req, text, (err, value) => {
      if (err) return done(err, undefined);
      const problem = checkJsonInput(value);
      if (problem) return done(Object.assign(new Error(problem.message), { statusCode: 400, code: JSON_INPUT_ERROR, field: problem.field }), undefined);
      req.jsonText = text;
      return done(null, value);
    });
  });

  await app.register(fastifySwagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Portico public API",
        version: "1.0.0",
        description: "OpenAI-compatible presets, intern streaming chat and BYOK credentials.",
      },
      servers: [{ url: "/" }],
      components: {
        securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
      },
      security: [{ bearer: [] }],
    },
  });

  const heartbeatMs = opts.heartbeatIntervalMs ?? 30_000;
  const relay = createSseRelay({ heartbeatMs });
  let closing = false;
  let inFlight = 0;
  let drained: (() => void) | undefined;
  // Callback-style hooks (here and onResponse): an async hook costs Fastify a promise and its callbacks per request.
  app.addHook("onRequest", (req, reply, done) => {
    reply.header("x-request-id", req.id);
    if (closing) {
      reply.header("connection", "close").header("retry-after", "1");
      // Answered here: the hook chain stops (no `done`).
      send(reply, publicError(503, "The server is shutting down; retry the request.", metadataFor(req.url, 503)));
      return;
    }
    inFlight += 1;
    watchClientClose(reply, () => {
      // A client that leaves early is not an operator's concern: one info line, no stack.
      if (!reply.raw.writableFinished) req.log.info({ method: req.method, route: req.routeOptions.url ?? "unmatched" }, "client left before the response was complete");
      inFlight -= 1;
      if (inFlight === 0) drained?.();
    });
    done();
  });
  // A stop lets what is running end: no new connections, idle ones closed, requests and streams given
  // until the drain deadline, then the streams still open ended in band (never a connection reset).
  app.addHook("preClose", async () => {
    closing = true;
    const deadline = Date.now() + (opts.drainMs ?? 5_000);
    app.server.close();
    app.server.closeIdleConnections();
    const requestsDone = inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => (drained = resolve));
    await relay.drain(deadline);
    const left = deadline - Date.now();
    if (left > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([requestsDone, new Promise<void>((resolve) => (timer = setTimeout(resolve, left)))]);
      clearTimeout(timer);
    }
  });
  app.addHook("onResponse", (req, reply, done) => {
    const route = req.routeOptions.url ?? "unmatched";
    opts.metrics.httpDuration.observe(
      { method: req.method, route, status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    const level = reply.statusCode >= 500 ? "error" : "info";
    req.log[level](
      { method: req.method, route, status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 },
      "request completed",
    );
    done();
  });

  const identity = createClient(IdentityService, opts.transport);
  app.setErrorHandler(async (error: FastifyError, req, reply) => {
    const withMetadata = req.routeOptions.config?.errorMetadata === true;
    const authorizeFirst = req.routeOptions.config?.authorizeFirst;
    const connectErr = asConnectError(error);
    const isInputError = error.validation !== undefined || error.code === JSON_INPUT_ERROR || connectErr?.code === Code.InvalidArgument;
    if (authorizeFirst && isInputError) {
      try {
        await identity.authorize({ requireManagement: authorizeFirst.management }, callOptionsFor(req));
      } catch (authErr) {
        const connectAuthErr = asConnectError(authErr);
        if (connectAuthErr) return send(reply, publicErrorFromConnect(connectAuthErr));
        throw authErr;
      }
    }
    if (connectErr) {
      const pub = publicErrorFromConnect(connectErr);
      if (pub.status >= 500) req.log.error({ err: connectErr }, "core call failed");
      if (withMetadata && !pub.body.error.metadata && pub.status !== 401 && pub.status !== 403 && pub.status !== 404) {
        pub.body.error.metadata = { reason: reasonForStatus(pub.status), retryable: pub.status >= 500 };
      }
      return send(reply, pub);
    }
    const status = error.validation ? 400 : (error.statusCode ?? 500);
    if (status >= 500) {
      req.log.error({ err: error }, "unhandled gateway error");
      return send(reply, publicError(500, "Internal Server Error"));
    }
    if (error.code === JSON_INPUT_ERROR) {
      const field = (error as FastifyError & { field?: string }).field ?? "body";
      return send(reply, publicError(400, error.message, { reason: reasonForStatus(400), retryable: false, field }));
    }
    const message = gatewayMessage(error, status, opts.bodyLimitBytes);
    const metadata = withMetadata ? { reason: reasonForStatus(status), retryable: false } : undefined;
    return send(reply, publicError(status, message, metadata));
  });

  app.setNotFoundHandler((req, reply) => send(reply, publicError(404, `No route for ${req.method} on this path`, metadataFor(req.url, 404))));

  const health = createClient(HealthService, opts.transport);
  app.get("/healthz", { schema: { hide: true } }, async () => ({ status: "ok" }));
  app.get("/readyz", { schema: { hide: true } }, async (_req, reply) => {
    if (opts.startupComplete && !opts.startupComplete()) return send(reply, publicError(503, "Not ready: start-up is not finished"));
    try {
      const res = await health.check({}, { timeoutMs: 2000 });
      // The instance that answered: with several worker processes or cores, which one served this probe.
      if (res.ready) return { status: "ready", instance_id: res.instanceId };
      if (res.unavailable.length > 0) return send(reply, publicError(503, `Not ready: ${res.unavailable.join(", ")} unreachable`));
    } catch {
      // fall through
    }
    return send(reply, publicError(503, "Not ready"));
  });
  const scrape = createMetricsEndpoint(opts.metrics, opts.metricsToken, app.log);
  app.get("/metrics", { schema: { hide: true } }, async (req, reply) => {
    const answer = await scrape(req.headers.authorization);
    return reply.code(answer.status).headers(answer.headers).send(answer.body);
  });

  // Agents probe the base URL they were given (`<gateway>/api` for claude agents, docs/intern-host.md) with HEAD.
  for (const url of ["/api", "/api/"]) {
    app.route({ method: "HEAD", url, schema: { hide: true }, handler: async (_req, reply) => reply.code(200).send() });
  }

  await registerConsoleRoutes(app as unknown as FastifyInstance);

  const ctx: GatewayContext = {
    transport: opts.transport,
    logger: opts.logger,
    metrics: opts.metrics,
    brand: opts.brand,
    relay,
    streamOpenAfterMs: Math.min(STREAM_OPEN_AFTER_MS, heartbeatMs),
    jsonBodies: opts.coreOverTheWire === true,
  };
  await app.register(
    async (api) => {
      api.get("/openapi.json", { schema: { hide: true } }, async () => app.swagger());
      await registerGatewayRoutes(api, ctx);
    },
    { prefix: "/api/v1" },
  );
  // The Gemini dialect lives where Google's clients put it under a base URL: `<base>/v1beta/models/…` (routes/gemini.ts).
  await app.register(async (api) => registerGeminiRoutes(api, ctx), { prefix: "/api/v1beta" });
  return app as unknown as FastifyInstance;
}

/** Intern routes carry {reason, retryable} on every error, also those raised before routing. */
function metadataFor(url: string, status: number): { reason: string; retryable: boolean } | undefined {
  return url.startsWith("/api/v1/interns/") ? { reason: reasonForStatus(status), retryable: false } : undefined;
}

/**
 * Errors Node's HTTP parser raises before a request exists (oversized headers, malformed requests,
 * a request not received in time), answered in the envelope when the socket can still take it.
 */
function writeClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  const [status, message] =
    err.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? [408, "Request not received in time"]
      : err.code === "HPE_HEADER_OVERFLOW"
        ? [431, "Request headers are too large"]
        : err.code === "HPE_URI_TOO_LONG"
          ? [414, "Request path is too long"]
          : [400, "Malformed HTTP request"];
  writeRawError(socket, status, message);
}

/** An error in the envelope written straight on a socket (no request object exists), then closed. */
function writeRawError(socket: Duplex, status: number, message: string, headers: Record<string, string> = {}): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify(publicError(status, message).body);
  const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("");
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`,
  );
}

function gatewayMessage(error: FastifyError, status: number, bodyLimit: number): string {
  switch (error.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return `Request body exceeds ${bodyLimit} bytes`;
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return "Unsupported Content-Type: send application/json";
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return "Request body is required";
    case "FST_ERR_CTP_INVALID_JSON_BODY":
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return "Malformed JSON body";
  }
  if (error.validation) return `Invalid request parameters: ${error.message}`;
  if (status === 400 && error instanceof SyntaxError) return "Malformed JSON body";
  return status === 404 ? "Resource not found" : "Invalid request";
}
