/**
 * `GET /api/v1/providers`: the providers this deployment can route chat completions to, which are the
 * providers BYOK credentials may name (any valid API key; `configured` is answered for that key).
 */
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { ProvidersService } from "../../gen/portico/providers/v1/providers_service_pb.js";
import type { GatewayContext } from "../context.js";
import { callOptionsFor } from "../rpc.js";
import { contractRoute, errorResponses } from "../schemas.js";

const providerSchema = {
  type: "object",
  required: ["slug", "name", "keyless", "configured"],
  properties: {
    slug: { type: "string", description: "The slug model ids start with (`<slug>/<model>`) and credentials name." },
    name: { type: "string", description: "Display name (the slug for operator-added providers)." },
    keyless: { type: "boolean", description: "Served without a credential (PORTICO_KEYLESS_PROVIDERS)." },
    configured: {
      type: "boolean",
      description:
        "A request from this key would find a credential now: keyless, an enabled shared operator key, or an enabled BYOK credential of the key's workspace that admits the key.",
    },
  },
} as const;

export async function registerProviderRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(ProvidersService, ctx.transport);
  const contract = contractRoute("listProviders");
  api.get(
    "/providers",
    {
      // A bad query is 400 only for a caller the core accepts (401/403 first), as on /activity.
      config: { authorizeFirst: { management: false } },
      validatorCompiler: contract.validatorCompiler,
      schema: {
        operationId: "listProviders",
        summary: "The providers this deployment can serve",
        description:
          "Built-in providers and the OpenAI-compatible ones the operator added, sorted by slug. BYOK credentials may name only these; model ids are `<slug>/<model>`.",
        tags: ["chat"],
        ...contract.schema,
        response: {
          200: { type: "object", required: ["data"], properties: { data: { type: "array", items: providerSchema } } },
          ...errorResponses(400, 401, 500),
        },
      },
    },
    async (req) => {
      const res = await client.listProviders({}, callOptionsFor(req));
      return { data: res.providers.map((p) => ({ slug: p.slug, name: p.name, keyless: p.keyless, configured: p.configured })) };
    },
  );
}
