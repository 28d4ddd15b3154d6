/**
 * The model relay: a loopback HTTP forwarder in the host through which agents reach Portico's model
 * endpoints for the run they serve.
 *
 * Why a relay: the credential Portico hands out is per run (StartRun.gateway), but one agent process
 * serves every run of its session, an agent's environment and argv are fixed when it starts, and the
 * ACP `gateway` auth method is per process too (gemini-cli 0.61 copies the base URL and headers into
 * each ACP session's config at session/new|load, so re-authenticating later does not reach a session
 * already open). So every agent process gets, once, a stable local base URL and a host-local secret
 * (through ACP `authenticate`, the profile's `modelGateway` family or `${PORTICO_MODEL_*}` placeholders);
 * the relay recognises the secret, finds the session's current run and forwards the request to
 * `<gateway base_url>/api<path>` with `Authorization: Bearer <run token>`. The run token never enters an
 * agent's environment, argv or ACP stream, a process serves any number of runs without a restart, and a
 * call made while its session has no run (or a run without a gateway) is refused here.
 *
 * Paths: an agent's base URL `http://127.0.0.1:<port>` stands for Portico's `<base_url>/api`, so
 * `/v1/messages?beta=true`, `/v1/responses`, `/v1/chat/completions` and
 * `/v1beta/models/<m>:streamGenerateContent?alt=sse` land on Portico's routes of the same name.
 *
 * The secret is accepted in `Authorization: Bearer`, `x-api-key` (Anthropic clients), `x-goog-api-key`
 * (Gemini clients) or a `key` query parameter; it and the run token are never logged.
 */
import { createHash, randomBytes } from "node:crypto";
import { createServer, request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders, type Server, type ServerResponse } from "node:http";
import { request as httpsRequest } from "node:https";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";

/** Where a relayed call goes: the run's gateway. */
export interface RelayTarget {
  runId: string;
  /** Portico's gateway base URL (no trailing slash), e.g. "http://10.0.0.5:8080". */
  baseUrl: string;
  /** The run's credential. */
  token: string;
}

/** What one agent process is given: a stable local base URL and a secret only this host knows. */
export interface RelayEndpoint {
  /** `http://127.0.0.1:<port>`: stands for `<gateway base_url>/api`. */
  baseUrl: string;
  /** Host-local secret identifying this agent process (not the run token). */
  secret: string;
  /** Forget this endpoint: its secret is refused from now on. */
  dispose(): void;
}

export interface ModelRelay {
  /** A new endpoint whose calls go to `target()` at the time of each call (undefined: refused). */
  register(target: () => RelayTarget | undefined): Promise<RelayEndpoint>;
  /** Endpoints registered and not disposed. */
  size(): number;
  close(): Promise<void>;
}

export interface ModelRelayOptions {
  logger: Logger;
  /** CA bundle (PEM) that verifies an https gateway; default: the system CAs. */
  ca?: string | Buffer | undefined;
}

/** Secrets handed to agents look like this, so they are easy to spot (and to tell from run tokens). */
const SECRET_PREFIX = "prl-";

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
]);
/** Credentials an agent may send: all of them are the local secret, and none goes upstream. */
const AUTH_HEADERS = new Set(["authorization", "x-api-key", "x-goog-api-key"]);

function digest(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}

function sendError(res: ServerResponse, status: number, type: string, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ error: { type, message } });
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

/** Candidate secrets a request carries, in the places the different agent families put them. */
function presentedSecrets(req: IncomingMessage, url: URL): string[] {
  const out: string[] = [];
  const auth = req.headers.authorization;
  if (typeof auth === "string") {
    const m = /^Bearer\s+(.+)$/i.exec(auth.trim());
    if (m?.[1]) out.push(m[1].trim());
  }
  for (const h of ["x-api-key", "x-goog-api-key"]) {
    const v = req.headers[h];
    if (typeof v === "string" && v.trim()) out.push(v.trim());
  }
  const q = url.searchParams.get("key");
  if (q) out.push(q);
  return out;
}

export function createModelRelay(opts: ModelRelayOptions): ModelRelay {
  const { logger } = opts;
  const endpoints = new Map<string, () => RelayTarget | undefined>();
  let server: Server | undefined;
  let listening: Promise<string> | undefined;

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const rawUrl = req.url ?? "/";
    let url: URL;
    try {
      url = new URL(rawUrl, "http://relay.invalid");
    } catch {
      return sendError(res, 400, "invalid_request_error", "malformed request path");
    }
    const targetOf = presentedSecrets(req, url)
      .map((s) => endpoints.get(digest(s)))
      .find((t) => t !== undefined);
    if (!targetOf) return sendError(res, 401, "authentication_error", "the intern host's model relay does not know this credential");
    const target = targetOf();
    if (!target) {
      return sendError(res, 403, "permission_error", "no run of this agent's session has a model gateway right now (model calls are relayed only during a run)");
    }
    url.searchParams.delete("key");
    let upstream: URL;
    try {
      const base = new URL(target.baseUrl);
      const basePath = base.pathname.replace(/\/+$/, "");
      // `url.pathname` is already resolved ("..", "%2e%2e" gone), so the call stays under the gateway's /api.
      upstream = new URL(`${basePath}/api${url.pathname}${url.search}`, base);
    } catch {
      return sendError(res, 400, "invalid_request_error", "the request path cannot be relayed");
    }
    const headers: OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (v === undefined || HOP_BY_HOP.has(k) || AUTH_HEADERS.has(k)) continue;
      headers[k] = v;
    }
    headers.authorization = `Bearer ${target.token}`;
    const started = Date.now();
    const send = upstream.protocol === "https:" ? httpsRequest : httpRequest;
    const up = send(upstream, { method: req.method, headers, ...(upstream.protocol === "https:" && opts.ca ? { ca: opts.ca } : {}) }, (upRes) => {
      const out: OutgoingHttpHeaders = {};
      for (const [k, v] of Object.entries(upRes.headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
      res.writeHead(upRes.statusCode ?? 502, out);
      upRes.pipe(res);
      upRes.on("error", () => res.destroy());
      upRes.on("end", () => {
        logger.debug({ runId: target.runId, method: req.method, path: url.pathname, status: upRes.statusCode, ms: Date.now() - started }, "relayed a model call");
      });
    });
    up.on("error", (err) => {
      logger.info({ runId: target.runId, method: req.method, path: url.pathname, error: (err as NodeJS.ErrnoException).code ?? err.message }, "model relay could not reach the gateway");
      sendError(res, 502, "api_error", "the intern host could not reach Portico's gateway");
    });
    // The agent gave up (cancel, process gone): so does the upstream call.
    res.on("close", () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  }

  function listen(): Promise<string> {
    listening ??= new Promise<string>((resolve, reject) => {
      const s = createServer(handle);
      s.keepAliveTimeout = 5_000;
      s.once("error", reject);
      s.listen(0, "127.0.0.1", () => {
        server = s;
        s.unref();
        resolve(`http://127.0.0.1:${(s.address() as AddressInfo).port}`);
      });
    });
    return listening;
  }

  return {
    async register(target) {
      const baseUrl = await listen();
      const secret = `${SECRET_PREFIX}${randomBytes(24).toString("base64url")}`;
      const key = digest(secret);
      endpoints.set(key, target);
      return { baseUrl, secret, dispose: () => void endpoints.delete(key) };
    },
    size: () => endpoints.size,
    async close() {
      endpoints.clear();
      const s = server;
      server = undefined;
      listening = undefined;
      if (!s) return;
      s.closeAllConnections();
      await new Promise<void>((r) => s.close(() => r()));
    },
  };
}
