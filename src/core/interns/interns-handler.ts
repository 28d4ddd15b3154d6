/**
 * InternsService.StreamChat: checks the caller (programme, intern visibility, rate limit), validates
 * the request, starts a run or delivers an answer through the run manager, then relays the run's
 * events in wire order: role, content/reasoning, then one finish (stop | tool_calls | error) and the
 * final event. Heartbeats fill idle gaps. gRPC callers and the HTTP gateway share this code.
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { TurnLimiter } from "../../lib/turn-limiter.js";
import type { Intern } from "../../db/prisma.js";
import { internSuspended } from "./intern-admin.js";
import type { Logger } from "pino";
import type { InternChatConfig } from "../../config.js";
import {
  InternsService,
  type StreamChatResponse,
  type Usage as ChatUsage,
} from "../../gen/portico/interns/v1/interns_service_pb.js";
import { callerOf, type Caller } from "../auth.js";
import { parseChatRequest } from "./chat-request.js";
import { internNotFound, outsideProgramme, rateLimited } from "./intern-errors.js";
import type { InternRepository, UsageRecord } from "./intern-repository.js";
import { usageFromProto, type ActiveRun, type RunManager } from "./run-manager.js";

export interface InternsHandlerDeps {
  repo: InternRepository;
  manager: RunManager;
  config: InternChatConfig;
  logger: Logger;
  /** Per-key token bucket for turns (in memory, or shared through Redis). */
  limiter: TurnLimiter;
}

type Event = StreamChatResponse["event"];

/** A response message built directly (create() is reflective and shows up per chunk in profiles). */
const UUID_SHAPE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function message(model: string, event: Event): StreamChatResponse {
  return { $typeName: "portico.interns.v1.StreamChatResponse", model, event };
}

function usageToProto(u: UsageRecord | undefined): ChatUsage | undefined {
  if (!u) return undefined;
  const out: ChatUsage = {
    $typeName: "portico.interns.v1.Usage",
    promptTokens: BigInt(u.prompt_tokens),
    completionTokens: BigInt(u.completion_tokens),
    totalTokens: BigInt(u.total_tokens),
  };
  if (u.cost !== undefined) out.cost = u.cost;
  if (u.cached_tokens !== undefined) out.cachedTokens = BigInt(u.cached_tokens);
  return out;
}

function finalEvent(run: ActiveRun, withUsage: boolean): Event {
  const usage = withUsage ? usageToProto(run.usage) : undefined;
  return { case: "final", value: { $typeName: "portico.interns.v1.FinalEvent", sessionId: run.sessionKey, ...(usage ? { usage } : {}) } };
}

function errorFinish(code: number, reason: string, message: string, retryable: boolean): Event {
  return {
    case: "finish",
    value: {
      $typeName: "portico.interns.v1.FinishEvent",
      reason: "error",
      error: { $typeName: "portico.interns.v1.StreamError", code, message, reason, retryable },
    },
  };
}

function stopFinish(reason: "stop" | "tool_calls"): Event {
  return { case: "finish", value: { $typeName: "portico.interns.v1.FinishEvent", reason } };
}

export function createInternsHandler(deps: InternsHandlerDeps): ServiceImpl<typeof InternsService> {
  const { repo, manager, config } = deps;
  async function consumeTurn(caller: Caller): Promise<void> {
    const turn = await deps.limiter.take(caller.keyHash);
    if (!turn.allowed) throw rateLimited(turn.retryAfterSeconds);
  }

  /** Relays a run's events to the client until the response ends (stop, pause, error). */
  async function* relay(run: ActiveRun, ctx: HandlerContext): AsyncGenerator<StreamChatResponse> {
    let released = false;
    const onAbort = () => {
      if (!released) manager.clientGone(run);
    };
    ctx.signal.addEventListener("abort", onAbort, { once: true });
    try {
      if (ctx.signal.aborted) {
        onAbort();
        return;
      }
      yield message(run.model, { case: "role", value: { $typeName: "portico.interns.v1.RoleEvent", role: "assistant" } });
      for (;;) {
        const next = run.next(config.heartbeatIntervalMs);
        const item = next instanceof Promise ? await next : next;
        if (item === undefined) {
          yield message(run.model, { case: "heartbeat", value: { $typeName: "portico.interns.v1.HeartbeatEvent" } });
          continue;
        }
        if (item.kind === "aborted") return;
        if (item.kind === "severed") {
          await manager.finishRun(run, "ended", "stream_severed");
          yield message(run.model, errorFinish(502, "stream_severed", "The connection to the intern broke without its confirmation.", true));
          yield message(run.model, finalEvent(run, true));
          return;
        }
        if (item.kind === "overflow") {
          await manager.finishRun(run, "failed", "attachment_failed");
          yield message(run.model, errorFinish(410, "attachment_failed", "The run produced more output than the intern retains for replay.", false));
          yield message(run.model, finalEvent(run, true));
          return;
        }
        const e = item.event;
        switch (e.case) {
          case "content":
            yield message(run.model, { case: "content", value: { $typeName: "portico.interns.v1.ContentEvent", text: e.value.text } });
            continue;
          case "reasoning":
            yield message(run.model, { case: "reasoning", value: { $typeName: "portico.interns.v1.ReasoningEvent", text: e.value.text } });
            continue;
          case "model":
            run.model = e.value.model;
            continue;
          case "usage":
            run.usage = usageFromProto(e.value);
            continue;
          case "question": {
            await manager.pause(run, e.value);
            if (run.state === "done") {
              // The pause could not be recorded (the run ended meanwhile).
              yield message(run.model, errorFinish(410, "run_ended", "The intern ended the run.", false));
              yield message(run.model, finalEvent(run, true));
              return;
            }
            const q = e.value;
            yield message(run.model, {
              case: "question",
              value: {
                $typeName: "portico.interns.v1.QuestionEvent",
                interactionId: run.interaction?.id ?? q.interactionId,
                kind: q.kind || "permission",
                ...(q.operation !== undefined ? { operation: q.operation } : {}),
                options: q.options,
                ...(run.interaction ? { deadline: timestampFromDate(run.interaction.deadlineAt) } : {}),
              },
            });
            yield message(run.model, stopFinish("tool_calls"));
            // From here the run outlives the client: closing after [DONE] keeps it paused.
            released = true;
            manager.detach(run);
            yield message(run.model, finalEvent(run, false));
            return;
          }
          case "turnEnded":
            await manager.finishRun(run, "finished", e.value.stopReason || "end_turn");
            yield message(run.model, stopFinish("stop"));
            yield message(run.model, finalEvent(run, true));
            return;
          case "turnFailed":
            await manager.finishRun(run, "failed", e.value.reason || "turn_failed");
            yield message(
              run.model,
              errorFinish(e.value.code || 502, e.value.reason || "turn_failed", e.value.message || "The intern failed the turn.", e.value.retryable),
            );
            yield message(run.model, finalEvent(run, true));
            return;
          case "runEnded":
            await manager.finishRun(run, e.value.deadline ? "cancelled" : "ended", e.value.deadline ? "deadline" : "run_ended");
            yield message(run.model, errorFinish(410, "run_ended", "The intern ended the run.", false));
            yield message(run.model, finalEvent(run, true));
            return;
          default:
            continue;
        }
      }
    } finally {
      ctx.signal.removeEventListener("abort", onAbort);
      if (!released) manager.clientGone(run);
    }
  }

  /** The intern's standing instructions open every new session, ahead of its first prompt. */
  const withInstructions = async (intern: Intern, sessionKey: string | undefined, prompt: string): Promise<string> => {
    if (!intern.instructions) return prompt;
    const fresh = sessionKey === undefined || !(await repo.sessionHasRuns(intern.id, sessionKey));
    return fresh ? `${intern.instructions}\n\n${prompt}` : prompt;
  };

  return {
    async *streamChat(req, ctx) {
      const caller = callerOf(ctx);
      if (!caller.internsProgramme) throw outsideProgramme();
      const intent = parseChatRequest(req, config, ctx.requestHeader.get("x-session-id") ?? undefined);
      // Intern ids are UUIDs; anything else cannot name one (and never reaches the database).
      const intern = UUID_SHAPE.test(req.internId) ? await repo.findIntern(req.internId) : null;
      if (!intern || intern.organizationId !== caller.organizationId || intern.workspaceId !== caller.workspaceId) {
        throw internNotFound();
      }
      if (intern.suspendedAt) throw internSuspended();
      await consumeTurn(caller);
      const run =
        intent.kind === "prompt"
          ? await manager.startRun({
              intern,
              sessionKey: intent.sessionKey,
              prompt: await withInstructions(intern, intent.sessionKey, intent.prompt),
              approvalMode: intent.approvalMode,
              signal: ctx.signal,
            })
          : await manager.answer({
              intern,
              sessionKey: intent.sessionKey,
              interactionId: intent.interactionId,
              answer: intent.answer,
              signal: ctx.signal,
            });
      yield* relay(run, ctx);
    },
  };
}
