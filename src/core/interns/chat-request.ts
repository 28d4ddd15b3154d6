/**
 * Validation of the intern chat request (the description's "Intern chat request" plus api-facts §3.2),
 * in the core so gRPC callers meet the same rules as HTTP callers. The field rules are the contract's
 * InternChatRequest definition (src/contract/requests/intern-chat.ts); what the last message asks for
 * is decided here. Pure: no I/O.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import type { Value } from "@bufbuild/protobuf/wkt";
import type { StreamChatRequest } from "../../gen/portico/interns/v1/interns_service_pb.js";
import { checkInternChatRequest } from "../../contract/requests/intern-chat.js";
import { ruleError } from "../errors.js";
import { badRequest } from "./intern-errors.js";

export interface ChatLimits {
  maxPromptChars: number;
}

/** What the request asks for: start a run with a prompt, or answer a paused run's question. */
export type ChatIntent =
  | { kind: "prompt"; prompt: string; approvalMode: "manual" | "self-drive"; sessionKey: string | undefined }
  | { kind: "answer"; interactionId: string; answer: string; sessionKey: string };

function lengthBetween(value: string, min: number, max: number): boolean {
  const n = [...value].length;
  return n >= min && n <= max;
}

/** Identifiers are stored and looked up in the database; PostgreSQL text cannot hold U+0000. */
function hasNul(value: string): boolean {
  return value.includes("\u0000");
}

/** google.protobuf.Value → JSON; a Value without a kind (some gRPC clients send one) is undefined. */
export function valueToJson(v: Value): JsonValue | undefined {
  const k = v.kind;
  switch (k.case) {
    case "nullValue":
      return null;
    case "numberValue":
    case "stringValue":
    case "boolValue":
      return k.value;
    case "listValue":
      return k.value.values.map((x) => valueToJson(x) ?? null);
    case "structValue": {
      const out: Record<string, JsonValue> = {};
      for (const [key, x] of Object.entries(k.value.fields)) out[key] = valueToJson(x) ?? null;
      return out;
    }
    default:
      return undefined;
  }
}

/** A string, or an array of text parts joined; anything else is undefined. */
export function textOf(content: JsonValue | undefined): string | undefined {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    let out = "";
    for (const part of content) {
      if (!part || typeof part !== "object" || Array.isArray(part)) return undefined;
      const p = part as Record<string, JsonValue>;
      if (p["type"] !== "text" || typeof p["text"] !== "string") return undefined;
      out += p["text"];
    }
    return out;
  }
  return undefined;
}

/**
 * Checks the request and says what it asks for. `headerSessionId` is the x-session-id header; the
 * body's session_id wins over it. Throws 400 bad_request naming the field.
 */
export function parseChatRequest(req: StreamChatRequest, limits: ChatLimits, headerSessionId?: string): ChatIntent {
  if (req.malformedField) throw badRequest(`Invalid request parameters: ${req.malformedField} has the wrong type`, req.malformedField);
  let sessionKey = req.sessionId;
  if (sessionKey === undefined && headerSessionId !== undefined && headerSessionId !== "") sessionKey = headerSessionId;
  try {
    checkInternChatRequest({
      stream: req.stream,
      messages: req.messages.map((m) => ({ role: m.role })),
      ...(req.approvalMode !== "" ? { approval_mode: req.approvalMode } : {}),
      ...(req.model !== undefined ? { model: req.model } : {}),
      ...(sessionKey !== undefined ? { session_id: sessionKey } : {}),
    });
  } catch (err) {
    throw ruleError(err);
  }
  const approvalMode = req.approvalMode === "" ? "self-drive" : req.approvalMode;
  const lastIndex = req.messages.length - 1;
  const last = req.messages[lastIndex]!;
  const content = last.content ? valueToJson(last.content) : null;
  if (last.role === "user") {
    const prompt = textOf(content);
    if (prompt === undefined) {
      throw badRequest(`messages[${lastIndex}].content must be a string or an array of text parts`, `messages[${lastIndex}].content`);
    }
    if (prompt.trim() === "") throw badRequest(`messages[${lastIndex}].content must not be empty`, `messages[${lastIndex}].content`);
    if (prompt.length > limits.maxPromptChars) {
      throw badRequest(`the prompt exceeds ${limits.maxPromptChars} characters`, `messages[${lastIndex}].content`);
    }
    return { kind: "prompt", prompt, approvalMode: approvalMode as "manual" | "self-drive", sessionKey };
  }
  if (last.role === "tool") {
    if (sessionKey === undefined) throw badRequest("session_id is required when the last message has role tool", "session_id");
    if (!lengthBetween(last.toolCallId, 1, 128) || hasNul(last.toolCallId)) {
      throw badRequest(`messages[${lastIndex}].tool_call_id must be 1 to 128 characters`, `messages[${lastIndex}].tool_call_id`);
    }
    const answer = textOf(content);
    if (answer === undefined) {
      throw badRequest(`messages[${lastIndex}].content must be a string or an array of text parts`, `messages[${lastIndex}].content`);
    }
    return { kind: "answer", interactionId: last.toolCallId, answer: answer.trim(), sessionKey };
  }
  throw badRequest("the last message must have role user or tool", `messages[${lastIndex}].role`);
}
