/**
 * Every request body, query string and path parameter, defined once in this folder. The core and the
 * gateway validate with these definitions and the gateway's OpenAPI document shows their JSON Schemas
 * (`requestSchemas` for bodies, `requestParameterSchemas` for query and path), so the two cannot drift;
 * tests check the served document against both.
 */
import { ChatRequest } from "./chat-request.js";
import { CreateByokKeyRequest, UpdateByokKeyRequest } from "./byok.js";
import { InternChatRequest } from "./intern-chat.js";
import { CountTokensRequest, MessagesRequest } from "./messages-request.js";
import { EmbeddingsRequest } from "./embeddings-request.js";
import { ResponsesRequest } from "./responses-request.js";
import { PutCatalogModelRequest, UpdateCatalogEndpointRequest } from "./catalog.js";
import { requestJsonSchema } from "./kit.js";
import {
  AddWorkspaceMembersRequest,
  CreateApiKeyRequest,
  CreateInternRequest,
  CreateWorkspaceRequest,
  DeleteInternRequest,
  EmptyRequest,
  RemoveWorkspaceMembersRequest,
  UpdateApiKeyRequest,
  UpdateInternRequest,
  UpdatePresetRequest,
  UpdateRoutingSettingsRequest,
  UpdateWorkspaceRequest,
} from "./management.js";

export { ChatRequest } from "./chat-request.js";
export { InternChatRequest } from "./intern-chat.js";
export { CountTokensRequest, MessagesRequest } from "./messages-request.js";
export { EmbeddingsRequest } from "./embeddings-request.js";
export { ResponsesRequest } from "./responses-request.js";
export { CreateByokKeyRequest, UpdateByokKeyRequest } from "./byok.js";
export { PutCatalogModelRequest, UpdateCatalogEndpointRequest } from "./catalog.js";
export { RuleViolation, validate, violationOf } from "./kit.js";
export { RequestParameters, requestParameterSchemas } from "./parameters.js";

/** The JSON Schema of each operation's request body, by operationId, for a deployment's brand. */
export function requestSchemas(brand: string): Record<string, Record<string, unknown>> {
  return {
    createPresetVersion: requestJsonSchema(ChatRequest.schema(brand)),
    createChatCompletion: requestJsonSchema(ChatRequest.schema(brand)),
    createInternChatCompletion: requestJsonSchema(InternChatRequest),
    createMessage: requestJsonSchema(MessagesRequest.schema),
    createPresetVersionFromMessages: requestJsonSchema(MessagesRequest.schema),
    countMessageTokens: requestJsonSchema(CountTokensRequest.schema),
    createEmbeddings: requestJsonSchema(EmbeddingsRequest.schema),
    createResponse: requestJsonSchema(ResponsesRequest.schema),
    createPresetVersionFromResponses: requestJsonSchema(ResponsesRequest.schema),
    createByokKey: requestJsonSchema(CreateByokKeyRequest),
    updateByokKey: requestJsonSchema(UpdateByokKeyRequest),
    createApiKey: requestJsonSchema(CreateApiKeyRequest),
    updateApiKey: requestJsonSchema(UpdateApiKeyRequest),
    createWorkspace: requestJsonSchema(CreateWorkspaceRequest),
    updateWorkspace: requestJsonSchema(UpdateWorkspaceRequest),
    addWorkspaceMembers: requestJsonSchema(AddWorkspaceMembersRequest),
    removeWorkspaceMembers: requestJsonSchema(RemoveWorkspaceMembersRequest),
    updatePreset: requestJsonSchema(UpdatePresetRequest),
    updateRoutingSettings: requestJsonSchema(UpdateRoutingSettingsRequest),
    createIntern: requestJsonSchema(CreateInternRequest),
    updateIntern: requestJsonSchema(UpdateInternRequest),
    deleteIntern: requestJsonSchema(DeleteInternRequest),
    suspendIntern: requestJsonSchema(EmptyRequest),
    provisionIntern: requestJsonSchema(EmptyRequest),
    issueInternHostToken: requestJsonSchema(EmptyRequest),
    revokeInternHostToken: requestJsonSchema(EmptyRequest),
    cancelInternSessionRun: requestJsonSchema(EmptyRequest),
    putCatalogModel: requestJsonSchema(PutCatalogModelRequest),
    updateCatalogEndpoint: requestJsonSchema(UpdateCatalogEndpointRequest),
  };
}
