/**
 * Call options for RPCs made on behalf of an HTTP request: the caller's credentials and session
 * header pass through unchanged (the core decides everything about auth), plus the request id.
 */
import type { CallOptions } from "@connectrpc/connect";
import type { FastifyRequest } from "fastify";

const FORWARDED_HEADERS = ["authorization", "x-session-id"] as const;

export function callOptionsFor(req: FastifyRequest, signal?: AbortSignal): CallOptions {
  const headers: Record<string, string> = { "x-request-id": String(req.id) };
  for (const name of FORWARDED_HEADERS) {
    const value = req.headers[name];
    if (typeof value === "string") headers[name] = value;
  }
  const opts: CallOptions = { headers };
  if (signal) opts.signal = signal;
  return opts;
}
