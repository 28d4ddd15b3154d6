/**
 * The OpenAI chat-completions dialect at the core's edge: the ChatService's JSON bodies in and out. The
 * canonical model (../model.ts) uses this dialect's shapes, so decoding is taking the JSON object as the
 * request (the validate stage checks it) and encoding is handing the stamped object back: no copy, no
 * per-chunk work. Another dialect gets a module like this one that translates both ways.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { ruleOf } from "../../../contract/reasons.js";
import type { CanonicalRequest, CanonicalResponse, StreamEvent } from "../model.js";

export function decodeRequest(body: JsonObject | undefined): CanonicalRequest {
  // Asserted, not checked here: the validate stage checks this body against the schema the type comes from.
  return (body ?? {}) as unknown as CanonicalRequest;
}

export function encodeResponse(completion: CanonicalResponse): JsonObject {
  return completion as unknown as JsonObject;
}

/**
 * The event as is; an in-stream error shows as `{code, message, metadata: {reason, retryable}}`, its reason's wire
 * string and default from the one table, as every in-band error of the API (docs/api.md, "Streams"; the intern
 * streams' error chunk); `start_usage` (for dialects that report usage first) is not part of this dialect.
 */
export function encodeEvent(event: StreamEvent): JsonObject {
  if (event.error === undefined && event.start_usage === undefined) return event as unknown as JsonObject;
  const { start_usage: _start, ...rest } = event;
  if (event.error === undefined) return rest as unknown as JsonObject;
  const { reason, code, message } = event.error;
  const rule = ruleOf(reason);
  return { ...rest, error: { code, message, metadata: { reason: rule.wire, retryable: rule.retryable } } } as unknown as JsonObject;
}
