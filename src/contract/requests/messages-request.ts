/**
 * The Anthropic Messages request (`POST /api/v1/messages`, `MessagesRequest`) and the token-count request
 * (`POST /api/v1/messages/count_tokens`), defined once: validation with the service's messages and wire
 * paths, and the OpenAPI body. The dialect (src/core/chat/dialects/anthropic-messages.ts) decodes a valid body
 * into the canonical request; the routing fields Portico shares with chat completions (`models`, `provider`,
 * `plugins`, `session_id`, `trace`, `user`, `service_tier`, `stop_server_tools_when`) are passed on under the same
 * names and checked by the ChatRequest definition.
 *
 * Decisions (docs/dialects.md):
 * - The top level is closed: a field of Anthropic's API that Portico does not serve (`container`,
 *   `mcp_servers`, `context_management`, `output_config`, …) is refused naming it, never dropped.
 * - Content blocks: `text`, `image` (base64 or URL source) and `tool_result` in user turns; `text`,
 *   `tool_use`, `thinking` and `redacted_thinking` in assistant turns; other block types (documents, server
 *   tools' blocks) are refused naming the block.
 * - Tools are custom tools (`{name, description?, input_schema}`, `type` absent or `"custom"`); Anthropic's
 *   server tools are refused naming the tool.
 * - `stop_sequences` holds at most 4 entries (the canonical request's bound).
 */
import { anything, array, bodyDefinition, boolean, byType, closedObject, discriminated, integer, nullable, number, object, oneOf, string, z, type BodyDefinition } from "./kit.js";

const str = () => string();
const tag = <const T extends string>(value: T) => z.literal(value);
const cacheControl = () => nullable(object({ type: oneOf(["ephemeral"]), ttl: oneOf(["5m", "1h"]) }, { required: ["type"] }));

const textBlock = object({ type: tag("text"), text: str(), cache_control: cacheControl(), citations: nullable(array(anything(), { max: 4096 })) }, { required: ["type", "text"] });
const imageSource = discriminated("type", [
  object({ type: tag("base64"), media_type: oneOf(["image/jpeg", "image/png", "image/gif", "image/webp"]), data: string({ min: 1 }) }, { required: ["type", "media_type", "data"] }),
  object({ type: tag("url"), url: string({ min: 1 }) }, { required: ["type", "url"] }),
]);
const imageBlock = object({ type: tag("image"), source: imageSource, cache_control: cacheControl() }, { required: ["type", "source"] });
const toolResultBlock = object(
  {
    type: tag("tool_result"),
    tool_use_id: string({ min: 1 }),
    content: byType([str(), array(textBlock)], "must be a string or an array of text blocks"),
    is_error: boolean(),
    cache_control: cacheControl(),
  },
  { required: ["type", "tool_use_id"] },
);
const toolUseBlock = object({ type: tag("tool_use"), id: string({ min: 1 }), name: string({ min: 1 }), input: object({}), cache_control: cacheControl() }, { required: ["type", "id", "name", "input"] });
const thinkingBlock = object({ type: tag("thinking"), thinking: str(), signature: str() }, { required: ["type", "thinking", "signature"] });
const redactedThinkingBlock = object({ type: tag("redacted_thinking"), data: str() }, { required: ["type", "data"] });

const userContent = byType([str(), array(discriminated("type", [textBlock, imageBlock, toolResultBlock]))], "must be a string or an array of content blocks");
const assistantContent = byType(
  [str(), array(discriminated("type", [textBlock, toolUseBlock, thinkingBlock, redactedThinkingBlock]))],
  "must be a string or an array of content blocks",
);
const message = discriminated("role", [
  object({ role: tag("user"), content: userContent }, { required: ["role", "content"] }),
  object({ role: tag("assistant"), content: assistantContent }, { required: ["role", "content"] }),
]);

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,128}$/;
const tool = object(
  {
    type: oneOf(["custom"]),
    name: string({ pattern: TOOL_NAME, patternText: "must be 1 to 128 characters of a-z, A-Z, 0-9, _ and -" }),
    description: str(),
    input_schema: object({}),
    cache_control: cacheControl(),
  },
  { required: ["name", "input_schema"] },
);
const toolChoice = discriminated("type", [
  object({ type: tag("auto"), disable_parallel_tool_use: boolean() }, { required: ["type"] }),
  object({ type: tag("any"), disable_parallel_tool_use: boolean() }, { required: ["type"] }),
  object({ type: tag("tool"), name: string({ min: 1 }), disable_parallel_tool_use: boolean() }, { required: ["type", "name"] }),
  object({ type: tag("none") }, { required: ["type"] }),
]);
const thinking = discriminated("type", [
  object({ type: tag("enabled"), budget_tokens: integer({ min: 1024 }) }, { required: ["type", "budget_tokens"] }),
  object({ type: tag("disabled") }, { required: ["type"] }),
]);

/** The fields both operations share; `max_tokens` is required on /messages only. */
const shared = () => ({
  model: string({ min: 1 }),
  messages: array(message, { min: 1 }),
  system: byType([str(), array(textBlock)], "must be a string or an array of text blocks"),
  tools: array(tool),
  tool_choice: toolChoice,
  thinking,
  cache_control: cacheControl(),
  // Routing fields shared with chat completions (checked by the ChatRequest definition under the same names).
  models: anything(),
  provider: anything(),
  plugins: anything(),
  session_id: anything(),
  trace: anything(),
  user: anything(),
  service_tier: anything(),
  stop_server_tools_when: anything(),
});

const messagesRequest = closedObject(
  {
    ...shared(),
    max_tokens: integer({ min: 1 }),
    stop_sequences: array(str(), { max: 4 }),
    stream: boolean(),
    temperature: number({ min: 0, max: 1 }),
    top_p: number({ min: 0, max: 1 }),
    top_k: integer({ min: 0 }),
    metadata: object({ user_id: nullable(string({ max: 256 })) }),
    // Portico's response cache (docs/operations.md), checked by the ChatRequest definition under the same name.
    cache: anything(),
  },
  { required: ["model", "messages", "max_tokens"] },
).meta({ description: "An Anthropic Messages request. Unknown top-level fields are refused." });

const countTokensRequest = closedObject(shared(), { required: ["model", "messages"] }).meta({
  description: "An Anthropic token-count request: the Messages request's prompt fields.",
});

export type MessagesRequest = z.output<typeof messagesRequest>;
export type CountTokensRequest = z.output<typeof countTokensRequest>;

export const MessagesRequest: BodyDefinition<typeof messagesRequest> = bodyDefinition(messagesRequest);

export const CountTokensRequest: BodyDefinition<typeof countTokensRequest> = bodyDefinition(countTokensRequest);
