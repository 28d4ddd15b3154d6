/**
 * ProvidersService: the providers this deployment can route chat completions to (the registry of
 * src/core/chat/providers/index.ts), which are also the providers BYOK credentials and shared provider
 * keys may name. Any valid API key may list them; `configured` is answered for the calling key.
 */
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { ProvidersService } from "../../gen/portico/providers/v1/providers_service_pb.js";
import { callerOf } from "../auth.js";
import type { ProviderRegistry } from "../chat/providers/index.js";
import type { CredentialRecord } from "../chat/credentials/select.js";
import type { SharedCredentialStore } from "./provider-keys.js";

export interface ProvidersHandlerDeps {
  providers: ProviderRegistry;
  /** The workspace's BYOK credentials, without keys. */
  credentials: { listAll(workspaceId: string): Promise<CredentialRecord[]> };
  /** The operator's shared keys (keyless providers included). */
  shared: SharedCredentialStore;
}

export function createProvidersHandler(deps: ProvidersHandlerDeps): ServiceImpl<typeof ProvidersService> {
  return {
    async listProviders(_req, ctx: HandlerContext) {
      const caller = callerOf(ctx);
      const [own, shared] = await Promise.all([deps.credentials.listAll(caller.workspaceId), deps.shared.providers()]);
      const withCredential = new Set(shared.map((s) => s.provider));
      for (const c of own) {
        if (c.disabled) continue;
        if (c.allowedApiKeyHashes && !c.allowedApiKeyHashes.includes(caller.keyHash)) continue;
        if (c.allowedUserIds && !c.allowedUserIds.includes(caller.userId)) continue;
        withCredential.add(c.provider);
      }
      return {
        providers: deps.providers.list().map((p) => ({
          slug: p.slug,
          name: p.name,
          keyless: p.keyless,
          configured: p.keyless || withCredential.has(p.slug),
        })),
      };
    },
  };
}
