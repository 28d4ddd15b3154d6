import type { FastifyInstance } from "fastify";
import type { GatewayContext } from "../context.js";
import { registerIdentityRoutes } from "./identity.js";
import { registerInternRoutes } from "./interns.js";
import { registerByokRoutes } from "./byok.js";
import { registerPresetRoutes } from "./presets.js";
import { registerKeyRoutes } from "./keys.js";
import { registerWorkspaceRoutes } from "./workspaces.js";
import { registerRoutingSettingsRoutes } from "./routing-settings.js";
import { registerAuditRoutes } from "./audit.js";
import { registerInternAdminRoutes } from "./intern-admin.js";
import { registerInternSessionRoutes } from "./intern-sessions.js";
import { registerChatRoutes } from "./chat.js";
import { registerMessagesRoutes } from "./messages.js";
import { registerEmbeddingsRoutes } from "./embeddings.js";
import { registerResponsesRoutes } from "./responses.js";
import { registerGenerationRoutes } from "./generations.js";
import { registerProviderRoutes } from "./providers.js";
import { registerActivityRoutes } from "./activity.js";
import { registerCatalogRoutes } from "./catalog.js";

/** Registers every public route under the /api/v1 prefix. Each domain adds one line here. */
export async function registerGatewayRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  await registerIdentityRoutes(api, ctx);
  await registerInternRoutes(api, ctx);
  await registerByokRoutes(api, ctx);
  await registerPresetRoutes(api, ctx);
  await registerKeyRoutes(api, ctx);
  await registerWorkspaceRoutes(api, ctx);
  await registerRoutingSettingsRoutes(api, ctx);
  await registerAuditRoutes(api, ctx);
  await registerInternAdminRoutes(api, ctx);
  await registerInternSessionRoutes(api, ctx);
  await registerChatRoutes(api, ctx);
  await registerMessagesRoutes(api, ctx);
  await registerEmbeddingsRoutes(api, ctx);
  await registerResponsesRoutes(api, ctx);
  await registerGenerationRoutes(api, ctx);
  await registerProviderRoutes(api, ctx);
  await registerActivityRoutes(api, ctx);
  await registerCatalogRoutes(api, ctx);
}
