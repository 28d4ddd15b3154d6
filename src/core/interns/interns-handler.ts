/**
 * InternsService.StreamChat: checks the caller (programme, intern visibility, rate limit), validates
 * the request, starts a run or delivers an answer through the run manager, then relays the run's
 * events in wire order: role, content/reasoning, then one finish (stop | tool_calls | error) and the
 * final event. Heartbeats fill idle gaps. gRPC callers and the HTTP gateway share this code.
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { TurnLimiter } from "../../lib/turn-limiter.js";
import type { Intern } from "../../db/prisma.js";
import { internSuspended } from "./intern-admin.js";
import type { Logger } from "pino";
import type { InternChatConfig } from "../../config.js";
import {
  InternsService,
  type StreamChatRequest,
  type StreamChatResponse,
  type Usage as ChatUsage,
} from "../../gen/portico/interns/v1/interns_service_pb.js";
import { callerOf, type Caller } from "../auth.js";
import { parseChatRequest } from "./chat-request.js";
import { badRequest, internNotFound, internUnreachable, outsideProgramme, rateLimited } from "./intern-errors.js";
import type { InternCluster, LinkOwner } from "./cluster.js";
import { errorDetailOf } from "../errors.js";
import { ErrorDetailSchema } from "../../gen/portico/errors/v1/error_detail_pb.js";
import { Reason, ruleOf } from "../../contract/reasons.js";
import { FORWARDED_HEADER, type Forwarder } from "./forwarder.js";
import type { InternRepository, UsageRecord } from "./intern-repository.js";
import { causeOfEvent, endingOf, type ActiveRun, type RunEnding, type RunManager } from "./run-manager.js";

export interface InternsHandlerDeps {
  repo: InternRepository;
  manager: RunManager;
  /** Where an intern's link is when this process does not hold it. */
  cluster: InternCluster;
  forwarder: Forwarder;
  config: InternChatConfig;
  logger: Logger;
  /** Per-key token bucket for turns (in memory, or shared through Redis). */
  limiter: TurnLimiter;
  instanceId: string;
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
  return finalOf(run.sessionKey, withUsage ? run.usage : undefined);
}

function finalOf(sessionId: string, usageRecord: UsageRecord | undefined): Event {
  const usage = usageToProto(usageRecord);
  return { case: "final", value: { $typeName: "portico.interns.v1.FinalEvent", sessionId, ...(usage ? { usage } : {}) } };
}

const FORWARDED_REQUEST_HEADERS = ["authorization", "x-session-id", "x-request-id"] as const;

/**
 * The error finish of a reason: the status and wire string from its row in the one error table
 * (`code` is still filled for gateways of earlier versions).
 */
function errorFinish(reason: Reason, message: string, retryable: boolean): Event {
  const rule = ruleOf(reason);
  return {
    case: "finish",
    value: {
      $typeName: "portico.interns.v1.FinishEvent",
      reason: "error",
      error: { $typeName: "portico.interns.v1.StreamError", code: rule.status, message, reason: rule.wire, retryable, reasonValue: reason },
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

  /** Renders a run's ending (from the manager's transition table): the finish chunk and the final one. */
  function* ending(run: ActiveRun, end: RunEnding): Generator<StreamChatResponse> {
    const f = end.finish;
    yield message(run.model, f.kind === "stop" ? stopFinish("stop") : errorFinish(f.reasonValue, f.message, f.retryable));
    yield message(run.model, finalEvent(run, true));
  }

  /** Relays a run's events to the client until the response ends (stop, pause, error). */
  async function* relay(run: ActiveRun, ctx: HandlerContext): AsyncGenerator<StreamChatResponse> {
    // Every change to the run goes through the manager's reader; this only renders.
    const reader = manager.reader(run);
    const onAbort = () => reader.leave();
    ctx.signal.addEventListener("abort", onAbort, { once: true });
    try {
      if (ctx.signal.aborted) {
        onAbort();
        return;
      }
      yield message(run.model, { case: "role", value: { $typeName: "portico.interns.v1.RoleEvent", role: "assistant" } });
      for (;;) {
        const next = reader.next(config.heartbeatIntervalMs);
        const item = next instanceof Promise ? await next : next;
        if (item === undefined) {
          yield message(run.model, { case: "heartbeat", value: { $typeName: "portico.interns.v1.HeartbeatEvent" } });
          continue;
        }
        if (item.kind === "aborted") return;
        if (item.kind === "ended") {
          yield* ending(run, item.ending);
          return;
        }
        if (item.kind === "startFailed") {
          yield message(run.model, errorFinish(item.reason, item.message, item.retryable));
          yield message(run.model, finalEvent(run, true));
          return;
        }
        if (item.kind === "severed" || item.kind === "overflow") {
          yield* ending(run, await reader.end({ on: item.kind }));
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
            // Every chunk of one response names one model: a change shows from the next response.
            continue;
          case "usage":
            reader.usage(e.value);
            continue;
          case "question": {
            const endedMeanwhile = await reader.pause(e.value);
            if (endedMeanwhile) {
              // The pause could not be recorded (the run ended meanwhile).
              yield* ending(run, endedMeanwhile);
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
                ...(run.interaction ? { deadline: timestampFromDate(run.interaction.deadlineAt), arguments: run.interaction.arguments } : {}),
              },
            });
            yield message(run.model, stopFinish("tool_calls"));
            // From here the run outlives the client: closing after [DONE] keeps it paused.
            reader.release();
            yield message(run.model, finalEvent(run, false));
            return;
          }
          case "turnEnded":
          case "turnFailed":
          case "runEnded":
            yield* ending(run, await reader.end(causeOfEvent(e)!));
            return;
          default:
            continue;
        }
      }
    } finally {
      ctx.signal.removeEventListener("abort", onAbort);
      reader.leave();
    }
  }

  /**
   * Relays the call to the core process that holds the intern's link. Before the first message its
   * errors are this call's errors (a dead owner: 502 intern_unreachable); after it, a broken relay
   * ends the response with stream_severed like a broken link.
   */
  async function* forward(owner: LinkOwner, req: StreamChatRequest, ctx: HandlerContext, sessionHint: string): AsyncGenerator<StreamChatResponse> {
    const headers = new Headers();
    for (const name of FORWARDED_REQUEST_HEADERS) {
      const v = ctx.requestHeader.get(name);
      if (v) headers.set(name, v);
    }
    headers.set(FORWARDED_HEADER, deps.instanceId);
    let opened = false;
    let finished = false;
    let model = "";
    try {
      for await (const msg of deps.forwarder.client(owner.url).streamChat(req, { headers, signal: ctx.signal })) {
        opened = true;
        model = msg.model;
        if (msg.event.case === "finish") finished = true;
        yield msg;
        if (msg.event.case === "final") return;
      }
    } catch (err) {
      if (ctx.signal.aborted) return;
      const ce = ConnectError.from(err);
      if (!opened) {
        if (ce.code === Code.Unavailable && ce.details.length === 0) {
          deps.logger.warn({ owner: owner.instanceId, internId: req.internId }, "the core holding the intern's link is unreachable");
          throw internUnreachable();
        }
        // The owner's answer, as it gave it (its ErrorDetail re-attached; transport metadata dropped).
        const detail = errorDetailOf(ce);
        throw new ConnectError(ce.rawMessage, ce.code, undefined, detail ? [{ desc: ErrorDetailSchema, value: detail }] : []);
      }
      deps.logger.warn({ owner: owner.instanceId, internId: req.internId, code: Code[ce.code] }, "forwarded intern stream broke");
      const f = endingOf({ on: "severed" }).finish;
      if (!finished && f.kind === "error") yield message(model, errorFinish(f.reasonValue, f.message, f.retryable));
      yield message(model, finalOf(sessionHint, undefined));
    }
  }

  /** The intern's standing instructions open every new session, ahead of its first prompt. */
  const withInstructions = async (intern: Intern, sessionKey: string | undefined, prompt: string): Promise<string> => {
    if (!intern.instructions) return prompt;
    const fresh = sessionKey === undefined || !(await repo.sessionHasRuns(intern.id, sessionKey));
    return fresh ? `${intern.instructions}\n\n${prompt}` : prompt;
  };

  /** The caller's visible intern (programme, organization and workspace checked) and a valid session id. */
  async function sessionTarget(req: { internId: string; sessionId: string }, ctx: HandlerContext): Promise<Intern> {
    const caller = callerOf(ctx);
    if (!caller.internsProgramme) throw outsideProgramme();
    const length = [...req.sessionId].length;
    if (length < 1 || length > 256) throw badRequest("session_id must be 1 to 256 characters", "session_id");
    const intern = UUID_SHAPE.test(req.internId) ? await repo.findIntern(req.internId) : null;
    if (!intern || intern.organizationId !== caller.organizationId || intern.workspaceId !== caller.workspaceId) {
      throw internNotFound();
    }
    return intern;
  }

  return {
    async getSession(req, ctx) {
      const intern = await sessionTarget(req, ctx);
      return { session: await manager.getSession(intern, req.sessionId) };
    },

    async cancelSessionRun(req, ctx) {
      const intern = await sessionTarget(req, ctx);
      return { session: await manager.cancelSession(intern, req.sessionId) };
    },

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
      if (!manager.holdsLink(intern.id) && !ctx.requestHeader.has(FORWARDED_HEADER)) {
        const owner = await deps.cluster.ownerOf(intern.id);
        if (owner) {
          // The owner checks the turn limit and everything else as for its own callers.
          yield* forward(owner, req, ctx, intent.sessionKey ?? "");
          return;
        }
      }
      await consumeTurn(caller);
      const run =
        intent.kind === "prompt"
          ? await manager.startRun({
              intern,
              sessionKey: intent.sessionKey,
              prompt: await withInstructions(intern, intent.sessionKey, intent.prompt),
              approvalMode: intent.approvalMode,
              callerKey: caller.keyHash,
              caller,
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
