/**
 * The one table of error reasons: for every value of the contract's `portico.errors.v1.Reason` enum,
 * its wire string (ErrorDetail.reason and the envelope's `metadata.reason`), the gRPC (Connect) code
 * the core raises it with, the public HTTP status and whether it is retryable by default. The core's
 * error constructors (src/lib/service-error.ts) and the gateway's status mapping (src/gateway/errors.ts)
 * both read it, and docs/api.md lists it (a test compares them).
 *
 * Two values share the wire string `busy`, as the API description requires: SESSION_BUSY (the
 * session's own run holds the turn: ABORTED, 409) and HOST_BUSY (capacity is short: UNAVAILABLE, 503).
 * A reason string and a code together always name one entry.
 */
import { Code } from "@connectrpc/connect";
import { Reason } from "../gen/portico/errors/v1/reason_pb.js";

export { Reason };

export interface ReasonRule {
  /** The value's wire string. */
  wire: string;
  /** Connect / gRPC code the core raises it with. */
  code: Code;
  /** Public HTTP status. */
  status: number;
  /** Default of ErrorDetail.retryable (a constructor may override it). */
  retryable: boolean;
  /** When true the public envelope carries no metadata (authentication and access refusals). */
  hideMetadata?: boolean;
  /** The reason the gateway gives errors it raises itself (routing, parsing, limits) with this status. */
  gatewayDefault?: boolean;
  /** What it means, for docs/api.md. */
  meaning: string;
}

/** Every reason, in enum order. */
export const REASON_RULES: Readonly<Record<Exclude<Reason, Reason.UNSPECIFIED>, ReasonRule>> = {
  [Reason.BAD_REQUEST]: { wire: "bad_request", gatewayDefault: true, code: Code.InvalidArgument, status: 400, retryable: false, meaning: "a request field (`field`) or the request is not acceptable" },
  [Reason.UNAUTHENTICATED]: { wire: "unauthenticated", code: Code.Unauthenticated, status: 401, retryable: false, hideMetadata: true, meaning: "no API key, or an unknown one (no metadata)" },
  [Reason.FORBIDDEN]: { wire: "forbidden", code: Code.PermissionDenied, status: 403, retryable: false, hideMetadata: true, meaning: "the key may not do this (no metadata)" },
  [Reason.NOT_FOUND]: { wire: "not_found", gatewayDefault: true, code: Code.NotFound, status: 404, retryable: false, meaning: "no such resource (or another tenant's), or no such route" },
  [Reason.INTERACTION_UNKNOWN]: { wire: "interaction_unknown", code: Code.NotFound, status: 404, retryable: false, meaning: "no pending intern question has this `tool_call_id`" },
  [Reason.CONFLICT]: { wire: "conflict", code: Code.Aborted, status: 409, retryable: true, meaning: "a concurrent write won; retry" },
  [Reason.INTERACTION_NOT_PENDING]: { wire: "interaction_not_pending", code: Code.FailedPrecondition, status: 409, retryable: false, meaning: "the run that asked the question has already ended" },
  [Reason.SESSION_BUSY]: { wire: "busy", code: Code.Aborted, status: 409, retryable: true, meaning: "the session's own run is streaming or paused (`Retry-After`)" },
  [Reason.ATTACHMENT_FAILED]: { wire: "attachment_failed", code: Code.FailedPrecondition, status: 410, retryable: false, meaning: "the run produced more output than the intern retains for replay" },
  [Reason.PAYLOAD_TOO_LARGE]: { wire: "payload_too_large", gatewayDefault: true, code: Code.ResourceExhausted, status: 413, retryable: false, meaning: "the request body exceeds the limit" },
  [Reason.RATE_LIMITED]: { wire: "rate_limited", gatewayDefault: true, code: Code.ResourceExhausted, status: 429, retryable: true, meaning: "too many requests (`Retry-After`)" },
  [Reason.CANCELLED]: { wire: "cancelled", code: Code.Canceled, status: 499, retryable: false, meaning: "the caller went away" },
  [Reason.INTERNAL_ERROR]: { wire: "internal_error", gatewayDefault: true, code: Code.Internal, status: 500, retryable: false, meaning: "an unexpected failure (details are logged, never returned)" },
  [Reason.INTERN_UNREACHABLE]: { wire: "intern_unreachable", code: Code.Unavailable, status: 502, retryable: true, meaning: "the intern's host is not connected" },
  [Reason.STREAM_SEVERED]: { wire: "stream_severed", code: Code.Unavailable, status: 502, retryable: true, meaning: "the link to the intern broke without its confirmation" },
  [Reason.TURN_FAILED]: { wire: "turn_failed", code: Code.Unavailable, status: 502, retryable: false, meaning: "the intern's host failed the turn" },
  [Reason.HOST_BUSY]: { wire: "busy", code: Code.Unavailable, status: 503, retryable: true, meaning: "no capacity to take or hold another run (`Retry-After`)" },
  [Reason.CORE_UNAVAILABLE]: { wire: "core_unavailable", code: Code.Unavailable, status: 503, retryable: true, meaning: "the gateway cannot reach the core, or the core cannot reach its database or get a connection in time; retry shortly (`Retry-After`)" },
  [Reason.STATE_CONFLICT]: { wire: "conflict", code: Code.FailedPrecondition, status: 409, retryable: false, meaning: "the resource's state forbids the change or the use (e.g. a workspace that still holds active keys, a disabled preset named in a completion)" },
  [Reason.INTERN_NOT_READY]: { wire: "intern_not_ready", code: Code.FailedPrecondition, status: 409, retryable: false, meaning: "the intern is suspended; provision it to resume" },
  [Reason.NO_CREDENTIAL]: { wire: "no_credential", code: Code.FailedPrecondition, status: 400, retryable: false, meaning: "no provider credential may serve the requested models (store one with POST /byok, or check its flags)" },
  [Reason.UPSTREAM_FAILED]: { wire: "upstream_failed", code: Code.Unavailable, status: 502, retryable: true, meaning: "every provider attempt failed before answering" },
  [Reason.TIMEOUT]: { wire: "timeout", code: Code.DeadlineExceeded, status: 504, retryable: true, meaning: "something did not answer in time" },
  [Reason.RUN_ENDED]: { wire: "run_ended", code: Code.FailedPrecondition, status: 410, retryable: false, meaning: "the intern run ended before its turn completed (cancelled, past its deadline, or ended by the agent); in-stream only" },
  [Reason.SPEND_LIMIT_EXCEEDED]: { wire: "spend_limit_exceeded", code: Code.ResourceExhausted, status: 402, retryable: false, meaning: "the request's largest possible cost does not fit in its key's spend limit or its workspace's budget (the message names which); raise the limit or wait for its reset" },
  [Reason.MODERATION_FLAGGED]: { wire: "moderation_flagged", code: Code.PermissionDenied, status: 403, retryable: false, meaning: "the moderation plugin's provider flagged the input (`metadata.categories`); nothing was sent to the model" },
};

/** Every reason value (UNSPECIFIED excluded), in enum order. */
export const ALL_REASONS: readonly Reason[] = Object.keys(REASON_RULES).map(Number) as Reason[];

export function ruleOf(reason: Reason): ReasonRule {
  const rule = (REASON_RULES as Record<number, ReasonRule | undefined>)[reason];
  if (!rule) throw new Error(`no rule for error reason ${reason}`);
  return rule;
}

const BY_WIRE = new Map<string, Reason[]>();
for (const reason of ALL_REASONS) {
  const wire = ruleOf(reason).wire;
  BY_WIRE.set(wire, [...(BY_WIRE.get(wire) ?? []), reason]);
}

/**
 * The reason a wire string names; when several share it (`busy`), the one raised with `code`, else
 * the first. Undefined for a string the table does not know (a newer peer's reason).
 */
export function reasonFromWire(wire: string, code?: Code): Reason | undefined {
  const candidates = BY_WIRE.get(wire);
  if (!candidates) return undefined;
  return candidates.find((r) => ruleOf(r).code === code) ?? candidates[0];
}

/** The reason an older peer's in-stream failure with no known wire string means, by its HTTP number. */
const LEGACY_BY_STATUS: Readonly<Record<number, Reason>> = {
  410: Reason.RUN_ENDED,
  429: Reason.RATE_LIMITED,
  500: Reason.INTERNAL_ERROR,
  503: Reason.HOST_BUSY,
  504: Reason.TIMEOUT,
};

/**
 * The reason a peer of an earlier version meant when it sent only an HTTP number and a wire string
 * (TurnFailed.code/reason from a host, StreamError.code/reason from a core): the table entry with
 * that wire string and status, else the one with that wire string, else the usual reason for that
 * status, else `fallback`.
 */
export function reasonFromLegacy(status: number, wire: string, fallback: Reason): Reason {
  const candidates = BY_WIRE.get(wire);
  if (candidates) return candidates.find((r) => ruleOf(r).status === status) ?? candidates[0]!;
  return LEGACY_BY_STATUS[status] ?? fallback;
}

/**
 * The reason the gateway reports for an error it raises itself with `status` (routing, parsing,
 * limits): the entry marked `gatewayDefault` for that status, else internal_error for 5xx and
 * bad_request below.
 */
export function reasonForStatus(status: number): Reason {
  const hit = ALL_REASONS.find((r) => ruleOf(r).status === status && ruleOf(r).gatewayDefault);
  if (hit !== undefined) return hit;
  return status >= 500 ? Reason.INTERNAL_ERROR : Reason.BAD_REQUEST;
}

/** The table as Markdown, as docs/api.md lists it between `<!-- reasons:begin -->` and `<!-- reasons:end -->`. */
export function reasonTableMarkdown(): string {
  const lines = ["| `reason` | HTTP | gRPC | retryable | meaning |", "|---|---|---|---|---|"];
  for (const r of ALL_REASONS) {
    const rule = ruleOf(r);
    lines.push(`| \`${rule.wire}\` | ${rule.status} | ${codeName(rule.code)} | ${rule.retryable ? "yes" : "no"} | ${rule.meaning} |`);
  }
  return `${lines.join("\n")}\n`;
}

/** UPPER_SNAKE gRPC name of a Connect code (Code.InvalidArgument → INVALID_ARGUMENT). */
function codeName(code: Code): string {
  const name = Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
  return name === "CANCELED" ? "CANCELLED" : name;
}
