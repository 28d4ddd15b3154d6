/**
 * The providers the catalog knows: the providers this deployment can route to, which are the adapters'
 * registry (src/core/chat/providers/index.ts: the built-in adapters and PORTICO_OPENAI_COMPATIBLE_PROVIDERS).
 * BYOK credentials, shared provider keys and catalog endpoints added through the management API may name
 * only these (docs/catalog.md, docs/byok.md).
 */
import type { ProviderRegistry } from "../chat/providers/index.js";

/** Whether this deployment can route requests to a provider slug. */
export type ServesProvider = (slug: string) => boolean;

/** The providers a registry can route to. */
export const servedBy =
  (registry: ProviderRegistry): ServesProvider =>
  (slug: string) =>
    registry.get(slug) !== undefined;

/** The refusal of a provider slug this deployment does not serve (BYOK credentials, provider keys, catalog endpoints). */
export const UNSERVED_PROVIDER =
  "provider must name a provider this deployment serves: GET /api/v1/providers lists them " +
  "(an operator adds OpenAI-compatible ones with PORTICO_OPENAI_COMPATIBLE_PROVIDERS)";
