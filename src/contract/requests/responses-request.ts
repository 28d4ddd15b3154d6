/**
 * The OpenAI Responses request (`POST /api/v1/responses`, `ResponsesRequest`), defined once: validation with the
 * service's messages and wire paths, and the OpenAPI body. The dialect (src/core/chat/dialects/openai-responses.ts)
 * decodes a valid body into the canonical request; the routing fields Portico shares with chat completions
 * (`models`, `provider`, `plugins`, `session_id`, `trace`, `service_tier`, `stop_server_tools_when`) are passed on
 * under the same names and checked by the ChatRequest definition.
 *
 * Decisions (docs/dialects.md):
 * - Stateless: `previous_response_id` (any non-null value), `store: true`, `conversation`, `background`, `prompt`
 *   and item references are refused naming the field; `store: false` is accepted (and is what every answer says).
 * - The top level is closed: a field of OpenAI's API that Portico does not serve is refused naming it, never dropped.
 * - Input items: messages (`role` user / system / developer / assistant; `type: "message"` may be omitted) with
 *   `input_text` / `input_image` (URL or data URL) parts, or `output_text` / `refusal` parts in assistant turns;
 *   `function_call`, `function_call_output`, `reasoning`. Other item and part types are refused naming them.
 * - Tools are function tools and namespace tools (function members only), the latter flattened into function tools
 *   with qualified names for the upstream and given back as `name` + `namespace`; OpenAI's hosted tools and custom
 *   tools are refused naming the tool's `type`.
 * - `include` takes `reasoning.encrypted_content` only.
 */
import { anything, array, boolean, byType, closedObject, discriminated, fail, integer, isPlainObject, nullable, number, object, oneOf, record, string, validate, z } from "./kit.js";
import { REASONING_EFFORTS, REASONING_SUMMARIES } from "./chat-request.js";

const str = () => string();
const tag = <const T extends string>(value: T) => z.literal(value);
const status = () => oneOf(["in_progress", "completed", "incomplete"]);

const inputText = object({ type: tag("input_text"), text: str() }, { required: ["type", "text"] });
const inputImage = object(
  { type: tag("input_image"), image_url: string({ min: 1 }), detail: oneOf(["auto", "low", "high"]) },
  { required: ["type", "image_url"] },
);
const outputText = object({ type: tag("output_text"), text: str(), annotations: array(anything(), { max: 4096 }), logprobs: anything() }, { required: ["type", "text"] });
const refusal = object({ type: tag("refusal"), refusal: str() }, { required: ["type", "refusal"] });
const contentPart = discriminated("type", [inputText, inputImage, outputText, refusal]);

const messageItem = object(
  {
    type: tag("message"),
    id: str(),
    status: status(),
    role: oneOf(["user", "system", "developer", "assistant"]),
    content: byType([str(), array(contentPart)], "must be a string or an array of content parts"),
  },
  { required: ["type", "role", "content"] },
);
const functionCallItem = object(
  { type: tag("function_call"), id: str(), status: status(), call_id: string({ min: 1 }), name: string({ min: 1 }), namespace: string({ min: 1 }), arguments: str() },
  { required: ["type", "call_id", "name", "arguments"] },
);
const functionCallOutputItem = object(
  {
    type: tag("function_call_output"),
    id: nullable(str()),
    status: nullable(status()),
    call_id: string({ min: 1 }),
    output: byType([str(), array(discriminated("type", [inputText, inputImage]))], "must be a string or an array of input_text / input_image parts"),
  },
  { required: ["type", "call_id", "output"] },
);
const reasoningItem = object(
  {
    type: tag("reasoning"),
    id: str(),
    status: status(),
    summary: array(object({ type: tag("summary_text"), text: str() }, { required: ["type", "text"] })),
    content: nullable(array(object({ type: tag("reasoning_text"), text: str() }, { required: ["type", "text"] }))),
    encrypted_content: nullable(str()),
  },
  { required: ["type", "summary"] },
);
const inputItem = discriminated("type", [messageItem, functionCallItem, functionCallOutputItem, reasoningItem]).meta({
  description: "An input item. A message item's `type: \"message\"` may be omitted.",
});

const FUNCTION_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const functionTool = object(
  {
    type: tag("function"),
    name: string({ pattern: FUNCTION_NAME, patternText: "must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -" }),
    description: nullable(str()),
    parameters: nullable(object({})),
    strict: nullable(boolean()),
  },
  { required: ["type", "name"] },
);
/** A member of a namespace: a function tool whose name is unique within its namespace (custom tools are refused). */
const namespaceMember = object(
  {
    type: tag("function"),
    name: string({ min: 1, max: 128 }),
    description: nullable(str()),
    parameters: nullable(object({})),
    strict: nullable(boolean()),
  },
  { required: ["type", "name"] },
);
/** OpenAI's namespace tool: function tools grouped under a name; flattened for the upstream (docs/dialects.md). */
const namespaceTool = object(
  {
    type: tag("namespace"),
    name: string({ min: 1, max: 128 }),
    description: nullable(str()),
    tools: array(discriminated("type", [namespaceMember]), { min: 1 }),
  },
  { required: ["type", "name", "tools"] },
);
const tool = discriminated("type", [functionTool, namespaceTool]);
const toolChoice = byType(
  [oneOf(["none", "auto", "required"]), closedObject({ type: oneOf(["function"]), name: string({ min: 1 }) }, { required: ["type", "name"] })],
  'must be "none", "auto", "required" or {type: "function", name}',
);
const format = discriminated("type", [
  closedObject({ type: tag("text") }, { required: ["type"] }),
  closedObject({ type: tag("json_object") }, { required: ["type"] }),
  closedObject(
    {
      type: tag("json_schema"),
      name: string({ pattern: FUNCTION_NAME, patternText: "must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -" }),
      schema: object({}),
      description: str(),
      strict: nullable(boolean()),
    },
    { required: ["type", "name", "schema"] },
  ),
]);

const responsesRequest = closedObject(
  {
    model: string({ min: 1 }),
    input: byType([str(), array(inputItem, { min: 1 })], "must be a string or an array of input items"),
    instructions: nullable(str()),
    tools: array(tool),
    tool_choice: toolChoice,
    parallel_tool_calls: nullable(boolean()),
    reasoning: nullable(
      closedObject({ effort: nullable(oneOf(REASONING_EFFORTS)), summary: nullable(oneOf(REASONING_SUMMARIES)), generate_summary: nullable(oneOf(REASONING_SUMMARIES)) }),
    ),
    max_output_tokens: nullable(integer({ min: 1 })),
    temperature: nullable(number({ min: 0, max: 2 })),
    top_p: nullable(number({ min: 0, max: 1 })),
    text: closedObject({ format, verbosity: nullable(oneOf(["low", "medium", "high"])) }),
    stream: nullable(boolean()),
    store: nullable(boolean()),
    previous_response_id: nullable(str()),
    include: nullable(array(oneOf(["reasoning.encrypted_content"]))),
    truncation: nullable(oneOf(["disabled"])),
    metadata: nullable(record(string({ max: 512 }), { maxEntries: 16, maxKeyLength: 64 })),
    // Codex's client telemetry (`{"x-codex-installation-id": ...}`): validated, not passed to any upstream.
    client_metadata: nullable(record(string({ max: 512 }), { maxEntries: 16, maxKeyLength: 64 })),
    user: str(),
    prompt_cache_key: str(),
    // Routing fields shared with chat completions (checked by the ChatRequest definition under the same names).
    models: anything(),
    provider: anything(),
    plugins: anything(),
    session_id: anything(),
    trace: anything(),
    service_tier: anything(),
    stop_server_tools_when: anything(),
    // Portico's response cache (docs/operations.md), checked by the ChatRequest definition under the same name.
    cache: anything(),
  },
  { required: ["model", "input"] },
).meta({ description: "An OpenAI Responses request (stateless). Unknown top-level fields are refused." });

export type ResponsesRequest = z.output<typeof responsesRequest>;
export type ResponsesInputItem = z.output<typeof inputItem>;
export type ResponsesTool = z.output<typeof tool>;

/** Message items may omit `type`; it is added before validation so the item's other rules apply. */
function withItemTypes(body: Record<string, unknown>): Record<string, unknown> {
  if (!Array.isArray(body.input)) return body;
  const input = body.input.map((item: unknown) => (isPlainObject(item) && item.type === undefined && "role" in item ? { type: "message", ...item } : item));
  return { ...body, input };
}

export const ResponsesRequest = {
  schema: responsesRequest,
  /** Validates a parsed JSON body; throws RuleViolation naming the first broken field (stateful fields included). */
  parse(body: unknown): ResponsesRequest {
    if (!isPlainObject(body)) fail("body", "must be a JSON object");
    const req = validate(responsesRequest, withItemTypes(body));
    if (req.previous_response_id !== undefined && req.previous_response_id !== null) {
      fail("previous_response_id", "previous_response_id is not supported: Portico's Responses API is stateless; send the whole conversation in input (docs/dialects.md)");
    }
    if (req.store === true) fail("store", "store: true is not supported: Portico's Responses API is stateless; send store: false or omit it (docs/dialects.md)");
    return req;
  },
};
