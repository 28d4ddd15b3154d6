/**
 * The request body of the chat service's methods (chat completions and the Messages, Responses and Gemini dialects):
 * `body_json` parsed when it is set (the split gateway sends the body as the JSON text it received, far cheaper to
 * encode and decode than a Struct), else the Struct `body` (older callers, other gRPC clients). The text is checked
 * as the gateway checks an HTTP body (src/contract/json-input.ts): a JSON object, at most 32 levels deep, no lone
 * surrogate, no `__proto__` key; otherwise InvalidArgument naming `body_json`.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { invalidArgument } from "../errors.js";
import { parseJsonObjectText } from "../../contract/json-input.js";

export function bodyOf(req: { body?: JsonObject; bodyJson?: string }): JsonObject | undefined {
  if (!req.bodyJson) return req.body;
  const parsed = parseJsonObjectText(req.bodyJson, "body_json");
  if ("problem" in parsed) throw invalidArgument(parsed.problem.field, parsed.problem.message);
  return parsed.value as JsonObject;
}
