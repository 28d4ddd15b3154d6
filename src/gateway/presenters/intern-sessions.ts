/**
 * Intern sessions and their pending question: proto → public JSON, with the response schemas the
 * routes declare (and so the OpenAPI document). `pending_question.arguments` is the `provide_input`
 * tool call's arguments object exactly as the stream carried it (parsed, not a JSON string).
 */
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { PendingQuestion, Session, SessionUsage } from "../../gen/portico/interns/v1/session_pb.js";

const iso = (t: Timestamp | undefined) => (t ? timestampDate(t).toISOString() : null);

export const pendingQuestionSchema = {
  type: ["object", "null"],
  description:
    "The question a paused run waits for (null otherwise): the provide_input tool call its stream carried. Answer it with a tool message " +
    "whose tool_call_id is tool_call_id, or cancel the run.",
  required: ["tool_call_id", "name", "arguments", "deadline_at"],
  properties: {
    tool_call_id: { type: "string", description: "The tool call id to answer with." },
    name: { type: "string", description: "The tool call's function name (service.provide_input)." },
    arguments: {
      type: "object",
      additionalProperties: true,
      description: "The tool call's arguments, as an object: exactly what the stream's `function.arguments` string held (kind, operation, options, deadline_at, …).",
    },
    deadline_at: { type: "string", description: "When the question expires and the run is cancelled (ISO 8601)." },
  },
} as const;

/** A run's usage (tokens, and cost in USD when priced), or null: the schema, with what it means where it is used. */
export function usageSchema(description: string) {
  return {
    type: ["object", "null"],
    description,
    properties: {
      prompt_tokens: { type: "integer" },
      completion_tokens: { type: "integer" },
      total_tokens: { type: "integer" },
      cost: { type: "number", description: "USD, as the account pays it; absent when unpriced." },
    },
  } as const;
}

export const sessionSchema = {
  type: "object",
  required: ["session_id", "state", "run_id", "started_at", "pending_question"],
  properties: {
    session_id: { type: "string", description: "Session id." },
    state: { type: "string", description: "streaming, paused (waiting for the answer to pending_question) or idle (no run holds the session)." },
    run_id: { type: ["string", "null"], description: "The run holding the session; when idle its latest run; null when it never had one." },
    started_at: { type: ["string", "null"], description: "When that run started (ISO 8601); null with run_id." },
    pending_question: pendingQuestionSchema,
    usage: usageSchema(
      "That run's usage: when its model calls went through Portico, the sum of its generations (so far, while it runs); otherwise what the " +
        "intern reported at its end; null when none is known.",
    ),
  },
} as const;

export function presentPendingQuestion(q: PendingQuestion | undefined) {
  if (!q) return null;
  return { tool_call_id: q.toolCallId, name: q.name, arguments: q.arguments ?? {}, deadline_at: iso(q.deadline) };
}

export function presentSession(s: Session) {
  return {
    session_id: s.sessionId,
    state: s.state,
    run_id: s.runId ?? null,
    started_at: s.runId !== undefined ? iso(s.startedAt) : null,
    pending_question: presentPendingQuestion(s.pendingQuestion),
    usage: presentUsage(s.usage),
  };
}

export function presentUsage(u: SessionUsage | undefined) {
  return u
    ? {
        prompt_tokens: Number(u.promptTokens),
        completion_tokens: Number(u.completionTokens),
        total_tokens: Number(u.totalTokens),
        ...(u.cost !== undefined ? { cost: u.cost } : {}),
      }
    : null;
}
