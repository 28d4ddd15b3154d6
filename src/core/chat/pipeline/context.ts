/**
 * What the caller said about a request, recorded on its generation (docs/operations.md, "Request log"):
 * `user`, the session (`session_id`, else the `x-session-id` header), `trace` (its `trace_id` in a column of
 * its own, the whole object as JSON text) and `metadata` (JSON text). Taken from the validated request only
 * (the validate stage, and the preset stage after a preset changed the request), so every value recorded
 * met the ChatRequest definition's bounds (src/contract/requests/chat-request.ts).
 */
import type { HandlerContext } from "@connectrpc/connect";
import { MAX_SESSION_ID_CHARS } from "../../../contract/requests/chat-request.js";
import { SESSION_HEADERS } from "../../../contract/session-headers.js";
import { invalidArgument } from "../../errors.js";
import type { CanonicalRequest } from "../model.js";
import type { ChatCall } from "./stage.js";

/** The header a caller may name its session with; the body's `session_id` wins. */
export const SESSION_HEADER = "x-session-id";

/**
 * The session a call's headers name: `x-session-id`, else the first of the coding agents' own session headers
 * (src/contract/session-headers.ts) present and not empty; one longer than the body's bound → 400 naming it.
 */
export function sessionHeaderOf(ctx: HandlerContext): string | undefined {
  for (const name of SESSION_HEADERS) {
    const raw = ctx.requestHeader.get(name)?.trim();
    if (!raw) continue;
    if (raw.length > MAX_SESSION_ID_CHARS) {
      throw invalidArgument(name, `${name} must be at most ${MAX_SESSION_ID_CHARS} characters long`);
    }
    return raw;
  }
  return undefined;
}

/** The known `trace` keys the request log filters by besides `trace_id` (which has a column of its own). */
export const FILTERED_TRACE_KEYS = ["trace_name", "span_name", "generation_name", "parent_span_id"] as const;

const hex = (s: string) => Buffer.from(s, "utf8").toString("hex");
/**
 * One filter term, `<hex name>=<hex value>` between newlines: the request log finds a pair with a substring
 * match on `contextTerms`, exact on both databases (lowercase hex has no LIKE wildcard and no letter case).
 */
export const contextTerm = (name: string, value: string): string => `\n${hex(name)}=${hex(value)}\n`;

function termsOf(trace: Record<string, unknown> | undefined, metadata: unknown): string | null {
  const terms: string[] = [];
  if (trace) for (const k of FILTERED_TRACE_KEYS) if (typeof trace[k] === "string") terms.push(`${hex(`trace.${k}`)}=${hex(trace[k] as string)}`);
  if (metadata !== null && typeof metadata === "object" && !Array.isArray(metadata)) {
    for (const [k, v] of Object.entries(metadata)) if (typeof v === "string") terms.push(`${hex(`metadata.${k}`)}=${hex(v)}`);
  }
  return terms.length > 0 ? `\n${terms.join("\n")}\n` : null;
}

const text = (v: unknown): string | null => (typeof v === "string" ? v : null);
const json = (v: unknown): string | null => (v !== null && typeof v === "object" && !Array.isArray(v) ? JSON.stringify(v) : null);

/** Sets the call's recorded context from its (validated) request; the header's session stands when the body has none. */
export function captureContext(call: ChatCall, request: CanonicalRequest = call.request): void {
  const r = request as Record<string, unknown>;
  const ctx = call.track.context;
  ctx.user = text(r.user);
  ctx.sessionId = text(r.session_id) || call.sessionHeader || null;
  const trace = r.trace as Record<string, unknown> | undefined;
  ctx.trace = json(trace);
  ctx.traceId = ctx.trace ? text(trace!.trace_id) : null;
  ctx.metadata = json(r.metadata);
  ctx.contextTerms = termsOf(ctx.trace ? trace : undefined, r.metadata);
}
