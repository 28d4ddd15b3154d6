/**
 * GET /metrics, one definition for the gateway's port and for the metrics port of `portico core`
 * (PORTICO_METRICS_PORT): an optional bearer token (PORTICO_METRICS_TOKEN, compared in constant time),
 * then the process's `render()` (its registry, or the sum over the workers of `portico serve`). Errors are
 * answered in the public error envelope.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { Logger } from "pino";
import type { Metrics } from "../lib/metrics.js";
import { publicError, type PublicError } from "./errors.js";

export interface MetricsAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Answers a scrape that carried `authorization` (the request's header, if any). */
export function createMetricsEndpoint(metrics: Metrics, token: string | undefined, log: Logger): (authorization: string | undefined) => Promise<MetricsAnswer> {
  const allowed = bearerCheck(token);
  const envelope = (err: PublicError, headers: Record<string, string> = {}): MetricsAnswer => ({
    status: err.status,
    headers: { "content-type": "application/json; charset=utf-8", ...headers },
    body: JSON.stringify(err.body),
  });
  return async (authorization) => {
    if (!allowed(authorization)) {
      return envelope(publicError(401, "Metrics need the bearer token configured in PORTICO_METRICS_TOKEN"), { "www-authenticate": 'Bearer realm="metrics"' });
    }
    try {
      const body = await metrics.render();
      return { status: 200, headers: { "content-type": metrics.registry.contentType }, body };
    } catch (err) {
      log.warn({ err }, "metrics unavailable");
      return envelope(publicError(503, "Metrics unavailable: the other worker processes did not answer"));
    }
  };
}

/** Whether an Authorization header carries `token` as a bearer credential (always true without a token). */
function bearerCheck(token: string | undefined): (header: string | undefined) => boolean {
  if (token === undefined) return () => true;
  const digest = (v: string) => createHash("sha256").update(v).digest();
  const expected = digest(token);
  return (header) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
    return m !== null && timingSafeEqual(digest(m[1]!), expected);
  };
}
