import type { ConnectError } from "@connectrpc/connect";
import { Reason } from "../contract/reasons.js";
import { serviceError } from "../lib/service-error.js";

export interface Page {
  offset: number;
  limit: number;
}

function parseIntParam(name: string, raw: unknown, fallback: number, min: number, max: number): number {
  if (raw === undefined || raw === null || raw === "" || raw === "null") return fallback;
  const text = String(raw);
  if (!/^-?\d+$/.test(text)) throw badParam(name, `${name} must be an integer`);
  const value = Number(text);
  if (value < min || value > max) throw badParam(name, `${name} must be between ${min} and ${max}`);
  return value;
}

function badParam(field: string, message: string): ConnectError {
  return serviceError(Reason.BAD_REQUEST, message, { field });
}

/** offset (>= 0, default 0) and limit (1..100, default 50) from a query string. */
export function parsePage(query: unknown): Page {
  const q = (query ?? {}) as Record<string, unknown>;
  return {
    offset: parseIntParam("offset", q.offset, 0, 0, 2_147_483_647),
    limit: parseIntParam("limit", q.limit, 50, 1, 100),
  };
}
