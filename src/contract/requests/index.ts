/**
 * Every public request body, defined once in this folder. The core validates with these definitions
 * and the gateway's OpenAPI document shows their JSON Schemas (`requestSchemas`), so the two cannot
 * drift; a test checks the served document against this map.
 */
import { ChatRequest } from "./chat-request.js";
import { CreateByokKeyRequest, UpdateByokKeyRequest } from "./byok.js";
import { InternChatRequest } from "./intern-chat.js";
import { CountTokensRequest, MessagesRequest } from "./messages-request.js";
import { requestJsonSchema } from "./kit.js";

export { ChatRequest } from "./chat-request.js";
export { InternChatRequest } from "./intern-chat.js";
export { CountTokensRequest, MessagesRequest } from "./messages-request.js";
export { CreateByokKeyRequest, UpdateByokKeyRequest } from "./byok.js";
export { RuleViolation, validate, violationOf } from "./kit.js";

/** The JSON Schema of each operation's request body, by operationId, for a deployment's brand. */
export function requestSchemas(brand: string): Record<string, Record<string, unknown>> {
  return {
    createPresetVersion: requestJsonSchema(ChatRequest.schema(brand)),
    createChatCompletion: requestJsonSchema(ChatRequest.schema(brand)),
    createInternChatCompletion: requestJsonSchema(InternChatRequest),
    createMessage: requestJsonSchema(MessagesRequest.schema),
    createPresetVersionFromMessages: requestJsonSchema(MessagesRequest.schema),
    countMessageTokens: requestJsonSchema(CountTokensRequest.schema),
    createByokKey: requestJsonSchema(CreateByokKeyRequest),
    updateByokKey: requestJsonSchema(UpdateByokKeyRequest),
  };
}
