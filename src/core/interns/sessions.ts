/**
 * A session as callers read it (InternsService.GetSession, the sessions of InternAdminService.GetIntern):
 * its state and, while paused, the pending question exactly as the stream presented it, so a caller
 * that lost the `provide_input` tool call can still answer it or cancel the run. Pure mappers.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { InternInteraction, InternRun } from "../../db/prisma.js";
import type { PendingQuestion, Session, SessionUsage } from "../../gen/portico/interns/v1/session_pb.js";
import { TERMINAL_RUN_STATES, type RunState, type UsageRecord } from "./intern-repository.js";

/** Largest arguments object (as JSON) a question carries with the host's extra fields. */
export const MAX_ARGUMENTS_BYTES = 16 * 1024;

/** Fields the core writes into every question's arguments; a host's extra fields cannot replace them. */
const OWN_FIELDS = new Set(["kind", "operation", "options", "deadline_at"]);

/**
 * The `provide_input` tool call's arguments object: kind, operation (null when unknown), options,
 * deadline_at, then any further fields the host sent (e.g. `tool`). Stored with the question and sent on
 * the stream, so both show the same object.
 */
export function questionArguments(
  q: { kind: string; operation?: string | undefined | null; options: readonly string[]; extra?: JsonObject | undefined },
  deadlineAt: Date,
): JsonObject {
  const args: JsonObject = {
    kind: q.kind || "permission",
    operation: q.operation ?? null,
    options: [...q.options],
    deadline_at: deadlineAt.toISOString(),
  };
  for (const [k, v] of Object.entries(q.extra ?? {})) {
    if (OWN_FIELDS.has(k) || v === undefined) continue;
    // A host's fields are stored with the question and streamed: a field that would take the object past
    // the bound is left out rather than stored.
    if (Buffer.byteLength(JSON.stringify({ ...args, [k]: v })) > MAX_ARGUMENTS_BYTES) continue;
    args[k] = v;
  }
  return args;
}

/** The stored arguments of a question (rebuilt from its columns for rows written before they were stored). */
export function argumentsOf(inter: InternInteraction): JsonObject {
  const stored = inter.arguments as JsonValue | null;
  if (stored && typeof stored === "object" && !Array.isArray(stored)) return stored;
  const options = Array.isArray(inter.options) ? (inter.options as string[]) : [];
  return questionArguments({ kind: inter.kind, operation: inter.operation, options }, inter.deadlineAt);
}

/** The `provide_input` function name (`<brand>.provide_input`). */
export function provideInputName(brand: string): string {
  return `${brand}.provide_input`;
}

type Init<T> = Omit<T, "$typeName" | "$unknown">;

export function pendingQuestionToProto(inter: InternInteraction, brand: string): PendingQuestion {
  return {
    $typeName: "portico.interns.v1.PendingQuestion",
    toolCallId: inter.id,
    name: provideInputName(brand),
    arguments: argumentsOf(inter),
    deadline: timestampFromDate(inter.deadlineAt),
  };
}

/**
 * The session's public view. `run` is the run holding it (or, when idle, its latest run); `pending` the
 * question that run waits for. A run in a terminal state never makes the session busy.
 */
export function sessionToProto(
  sessionKey: string,
  run: InternRun | null,
  pending: InternInteraction | null,
  brand: string,
  /** The run's usage so far (the sum of its generations while it runs); default: what its end recorded. */
  usage?: UsageRecord,
): Init<Session> {
  const live = run !== null && !TERMINAL_RUN_STATES.includes(run.state as RunState);
  const state = live ? run.state : "idle";
  const u = usage ?? (run?.usage as UsageRecord | null | undefined) ?? undefined;
  return {
    sessionId: sessionKey,
    state,
    ...(run ? { runId: run.id, startedAt: timestampFromDate(run.createdAt) } : {}),
    ...(live && state === "paused" && pending ? { pendingQuestion: pendingQuestionToProto(pending, brand) } : {}),
    ...(u && typeof u.prompt_tokens === "number" ? { usage: sessionUsage(u) } : {}),
  };
}

/** A run's usage as the session views (and the admin view's live sessions) carry it. */
export function sessionUsage(u: UsageRecord): SessionUsage {
  return {
    $typeName: "portico.interns.v1.SessionUsage",
    promptTokens: BigInt(Math.trunc(u.prompt_tokens)),
    completionTokens: BigInt(Math.trunc(u.completion_tokens ?? 0)),
    totalTokens: BigInt(Math.trunc(u.total_tokens ?? 0)),
    ...(typeof u.cost === "number" ? { cost: u.cost } : {}),
  };
}
