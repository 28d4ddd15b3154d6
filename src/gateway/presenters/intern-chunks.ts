/**
 * Pure mapping from InternsService.StreamChat events to the public `chat.completion.chunk` JSON
 * (the description's "Stream chunk" + api-facts §3.4). One chunk per event; heartbeats become an
 * SSE comment; the chunk id and `created` are constant for a response.
 */
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { StreamChatResponse, StreamError, Usage } from "../../gen/portico/interns/v1/interns_service_pb.js";
import { ALL_REASONS, Reason, reasonFromLegacy, ruleOf } from "../../contract/reasons.js";

export interface ChunkContext {
  /** `chatcmpl-<uuid>`, constant for the response. */
  id: string;
  /** Unix seconds, constant for the response. */
  created: number;
  /** Word used in place of a brand (`service`): `service/intern`, `service.provide_input`. */
  brand: string;
}

export interface PublicUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost?: number;
  prompt_tokens_details?: { cached_tokens: number };
}

export interface StreamErrorBody {
  code: number;
  message: string;
  metadata: { reason: string; retryable: boolean };
}

export interface Chunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: Array<{ index: number; delta: Record<string, unknown>; finish_reason: string | null }>;
  error?: StreamErrorBody;
  session_id?: string | null;
  usage?: PublicUsage | null;
}

/** What the SSE writer does with one event. */
export type ChunkOutput = { kind: "chunk"; chunk: Chunk } | { kind: "heartbeat" } | { kind: "none" };

export function defaultModel(brand: string): string {
  return `${brand}/intern`;
}

export function provideInputName(brand: string): string {
  return `${brand}.provide_input`;
}

export function publicUsage(u: Usage | undefined): PublicUsage | null {
  if (!u) return null;
  const out: PublicUsage = {
    prompt_tokens: Number(u.promptTokens),
    completion_tokens: Number(u.completionTokens),
    total_tokens: Number(u.totalTokens),
  };
  if (u.cost !== undefined) out.cost = u.cost;
  if (u.cachedTokens !== undefined) out.prompt_tokens_details = { cached_tokens: Number(u.cachedTokens) };
  return out;
}

function base(ctx: ChunkContext, model: string): Omit<Chunk, "choices"> {
  return { id: ctx.id, object: "chat.completion.chunk", created: ctx.created, model: model || defaultModel(ctx.brand) };
}

function deltaChunk(ctx: ChunkContext, model: string, delta: Record<string, unknown>, finish: string | null = null): Chunk {
  return { ...base(ctx, model), choices: [{ index: 0, delta, finish_reason: finish }] };
}

/**
 * The reason of an in-stream error: its `reason_value`, or from a core of an earlier version (the
 * HTTP number and wire string only) the reason those name; turn_failed when it carries none.
 */
export function streamErrorReason(err: Pick<StreamError, "code" | "reason" | "reasonValue"> | undefined): Reason {
  if (err && ALL_REASONS.includes(err.reasonValue)) return err.reasonValue;
  const turnFailed = ruleOf(Reason.TURN_FAILED);
  return reasonFromLegacy(err?.code || turnFailed.status, err?.reason || turnFailed.wire, Reason.TURN_FAILED);
}

/** The `finish_reason: "error"` chunk. */
export function errorChunk(ctx: ChunkContext, model: string, err: { code: number; message: string; reason: string; retryable: boolean }): Chunk {
  return {
    ...deltaChunk(ctx, model, {}, "error"),
    error: { code: err.code, message: err.message, metadata: { reason: err.reason, retryable: err.retryable } },
  };
}

/** The final chunk: empty choices, session_id and usage (null when none, always after tool_calls). */
export function finalChunk(ctx: ChunkContext, model: string, sessionId: string | null, usage: PublicUsage | null): Chunk {
  return { ...base(ctx, model), choices: [], session_id: sessionId, usage };
}

export function toChunk(ev: StreamChatResponse, ctx: ChunkContext): ChunkOutput {
  const model = ev.model;
  const e = ev.event;
  switch (e.case) {
    case "role":
      return { kind: "chunk", chunk: deltaChunk(ctx, model, { role: "assistant" }) };
    case "content":
      return { kind: "chunk", chunk: deltaChunk(ctx, model, { content: e.value.text }) };
    case "reasoning":
      return { kind: "chunk", chunk: deltaChunk(ctx, model, { reasoning: e.value.text }) };
    case "question": {
      // The core's arguments object (also what GET …/sessions/{id} shows); built here for older cores.
      const args = JSON.stringify(e.value.arguments ?? {
        kind: e.value.kind,
        operation: e.value.operation ?? null,
        options: e.value.options,
        ...(e.value.deadline ? { deadline_at: timestampDate(e.value.deadline).toISOString() } : {}),
      });
      return {
        kind: "chunk",
        chunk: deltaChunk(ctx, model, {
          tool_calls: [
            { index: 0, id: e.value.interactionId, type: "function", function: { name: provideInputName(ctx.brand), arguments: args } },
          ],
        }),
      };
    }
    case "finish": {
      if (e.value.reason === "error") {
        const err = e.value.error;
        const rule = ruleOf(streamErrorReason(err));
        return {
          kind: "chunk",
          chunk: errorChunk(ctx, model, {
            code: rule.status,
            message: err?.message || "The run failed.",
            reason: rule.wire,
            retryable: err?.retryable ?? false,
          }),
        };
      }
      return { kind: "chunk", chunk: deltaChunk(ctx, model, {}, e.value.reason) };
    }
    case "final":
      return { kind: "chunk", chunk: finalChunk(ctx, model, e.value.sessionId || null, publicUsage(e.value.usage)) };
    case "heartbeat":
      return { kind: "heartbeat" };
    default:
      return { kind: "none" };
  }
}
