/**
 * Stage "content" (docs/operations.md, "Content logging"): when the caller's workspace logs content, hands the
 * request as validated and the answer to the content log (content-log.ts) once the answer is complete: the
 * non-streamed response, or the stream assembled (text, reasoning, tool calls, finish reason, usage) once it
 * ends; `{error}` when the request failed. Off (one property read) when the workspace does not log content.
 * Never blocks or fails the answer: the log only queues.
 */
import { ConnectError } from "@connectrpc/connect";
import type { ContentLog } from "../content-log.js";
import type { StreamEvent } from "../model.js";
import type { ChatCall, ChatOutcome, ChatStage, Next } from "./stage.js";
import { tapEvents } from "./tap.js";

interface AssembledChoice {
  index: number;
  content: string;
  reasoning: string;
  tool_calls: Map<number, { id?: string; type?: string; name: string; arguments: string }>;
  finish_reason: string | null;
}

/** The stream's events folded into one chat.completion-like answer. */
function assembler() {
  const choices = new Map<number, AssembledChoice>();
  let usage: unknown = null;
  let model: string | undefined;
  let provider: string | undefined;
  let error: unknown;
  return {
    add(e: StreamEvent) {
      model ??= e.model;
      provider ??= e.provider;
      if (e.usage) usage = e.usage;
      if (e.error) error = e.error;
      for (const c of e.choices ?? []) {
        let a = choices.get(c.index);
        if (!a) choices.set(c.index, (a = { index: c.index, content: "", reasoning: "", tool_calls: new Map(), finish_reason: null }));
        const d = c.delta as { content?: string | null; reasoning?: string | null; tool_calls?: Array<{ index: number; id?: string; type?: string; function?: { name?: string; arguments?: string } }> } | undefined;
        if (typeof d?.content === "string") a.content += d.content;
        if (typeof d?.reasoning === "string") a.reasoning += d.reasoning;
        for (const t of d?.tool_calls ?? []) {
          let call = a.tool_calls.get(t.index);
          if (!call) a.tool_calls.set(t.index, (call = { name: "", arguments: "" }));
          if (t.id) call.id = t.id;
          if (t.type) call.type = t.type;
          if (t.function?.name) call.name += t.function.name;
          if (t.function?.arguments) call.arguments += t.function.arguments;
        }
        if (c.finish_reason) a.finish_reason = c.finish_reason;
      }
    },
    result(id: string) {
      return {
        id,
        object: "chat.completion",
        streamed: true,
        ...(model !== undefined ? { model } : {}),
        ...(provider !== undefined ? { provider } : {}),
        choices: [...choices.values()].map((a) => ({
          index: a.index,
          message: {
            role: "assistant",
            content: a.content,
            ...(a.reasoning ? { reasoning: a.reasoning } : {}),
            ...(a.tool_calls.size > 0
              ? { tool_calls: [...a.tool_calls.values()].map((t) => ({ id: t.id, type: t.type ?? "function", function: { name: t.name, arguments: t.arguments } })) }
              : {}),
          },
          finish_reason: a.finish_reason,
        })),
        usage,
        ...(error !== undefined ? { error } : {}),
      };
    },
  };
}

function errorBody(err: unknown, call: ChatCall): unknown {
  if (call.signal.aborted) return { error: { cancelled: true } };
  if (err instanceof ConnectError) return { error: { code: err.code, message: err.rawMessage } };
  return { error: { message: "internal error" } };
}

export function createContentStage(deps: { log: ContentLog | undefined }): ChatStage {
  const { log } = deps;
  return {
    name: "content",
    run(call, next) {
      const days = call.caller.contentLogRetentionDays;
      return !log || !days ? next() : logged(log, days, call, next);
    },
  };
}

/** The request logged with its answer (the workspace logs content). */
async function logged(log: ContentLog, days: number, call: ChatCall, next: Next): Promise<ChatOutcome> {
  // The request as validated, before the stages after this one change it (preset, plugins).
  let request: unknown;
  try {
    request = structuredClone(call.request);
  } catch {
    return next();
  }
  // Never fails the answer: whatever goes wrong here only loses the log entry.
  const keep = (response: unknown) => {
    try {
      record(response);
    } catch {
      /* the content log only queues; nothing to surface */
    }
  };
  const record = (response: unknown) =>
    log.record({
      id: call.track.id,
      organizationId: call.caller.organizationId,
      workspaceId: call.caller.workspaceId,
      retentionDays: days,
      request,
      response,
      keys: call.attempts.map((a) => a.call.apiKey).filter((k): k is string => typeof k === "string" && k !== ""),
    });
  let outcome;
  try {
    outcome = await next();
  } catch (err) {
    keep(errorBody(err, call));
    throw err;
  }
  if (outcome.kind === "completion") {
    keep(outcome.completion);
    return outcome;
  }
  const acc = assembler();
  return {
    kind: "stream",
    events: tapEvents(outcome.events, {
      map(e) {
        acc.add(e);
        return e;
      },
      end(e) {
        const body = acc.result(call.track.id);
        keep(e.how === "failed" ? { ...body, ...(errorBody(e.error, call) as object) } : e.how === "closed" ? { ...body, cancelled: true } : body);
      },
    }),
  };
}
