/**
 * Preset routes: create a preset (or a new version) from a chat-completions body, and the reads.
 * The body is handed to the core untouched (as a Struct), so the core alone decides validity and
 * stores values exactly as sent; the OpenAPI document's body schema is derived from the same
 * ChatRequest definition the core validates with (src/contract/requests/chat-request.ts).
 */
import { createClient } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { PresetsService } from "../../gen/portico/presets/v1/presets_service_pb.js";
import type { GatewayContext } from "../context.js";
import { publicError } from "../errors.js";
import {
  presentPreset,
  presentPresetVersion,
  presentPresetWithVersion,
  presetSchema,
  presetVersionSchema,
  presetWithVersionSchema,
} from "../presenters/presets.js";
import { callOptionsFor } from "../rpc.js";
import { contractRoute, errorResponses, listOf, pageOfResponse, pageRequest } from "../schemas.js";
import { requestSchemas } from "../../contract/requests/index.js";
import { UpdatePresetRequest } from "../../contract/requests/management.js";

type PageQuery = { limit?: number; offset?: number; starting_after?: string };

const NOT_AN_OBJECT = publicError(400, "Request body must be a JSON object");

/** `{workspaceId}` when the query names one (an empty value is the same as none). */
const workspaceOf = (query: unknown) => {
  const id = (query as { workspace_id?: string } | undefined)?.workspace_id;
  return id === undefined ? {} : { workspaceId: id };
};

export async function registerPresetRoutes(api: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const client = createClient(PresetsService, ctx.transport);

  /** One create-a-version route per dialect: the same call, with the body in that dialect's case of the request oneof. */
  const createFrom = (form: {
    path: string;
    operationId: "createPresetVersion" | "createPresetVersionFromMessages" | "createPresetVersionFromResponses";
    bodyCase: "chatRequestJson" | "messagesRequestJson" | "responsesRequestJson";
    summary: string;
    description: string;
  }) => {
    const contract = contractRoute(form.operationId, "core", requestSchemas(ctx.brand)[form.operationId]);
    api.post<{ Params: { slug: string }; Body: unknown }>(
      form.path,
      {
        validatorCompiler: contract.validatorCompiler,
        schema: {
          operationId: form.operationId,
          summary: form.summary,
          description: form.description,
          tags: ["presets"],
          ...contract.schema,
          response: {
            200: { type: "object", required: ["data"], properties: { data: presetWithVersionSchema } },
            ...errorResponses(400, 401, 403, 404, 409, 500),
          },
        },
      },
      async (req, reply) => {
        const body = req.body;
        if (typeof body !== "object" || body === null || Array.isArray(body)) {
          return reply.code(400).type("application/json; charset=utf-8").send(NOT_AN_OBJECT.body);
        }
        const res = await client.createPresetVersion(
          { slug: req.params.slug, request: { case: form.bodyCase, value: body as Record<string, never> }, ...workspaceOf(req.query) },
          callOptionsFor(req),
        );
        return { data: presentPresetWithVersion(res.preset, res.designatedVersion) };
      },
    );
  };

  createFrom({
    path: "/presets/:slug/chat/completions",
    operationId: "createPresetVersion",
    bodyCase: "chatRequestJson",
    summary: "Create a preset, or a new version of it, from a chat-completions request",
    description:
      "The body is a chat-completions request, validated in full. Only fields overlapping the preset configuration are stored " +
      "(model, models, provider, sampling parameters, tools, plugins, response_format, …); messages, stream and other fields are ignored, " +
      "except that the first system (else developer) message becomes the version's system prompt.",
  });
  createFrom({
    path: "/presets/:slug/messages",
    operationId: "createPresetVersionFromMessages",
    bodyCase: "messagesRequestJson",
    summary: "Create a preset, or a new version of it, from an Anthropic Messages request",
    description:
      "The body is an Anthropic Messages request, validated in full and translated to the chat request it stands for (docs/dialects.md); " +
      "the fields overlapping the preset configuration are stored as from a chat-completions body (docs/presets.md): `system` becomes the " +
      "system prompt, `stop_sequences` the stop list, `thinking.budget_tokens` `reasoning.max_tokens`; `messages` and `stream` are not stored.",
  });
  createFrom({
    path: "/presets/:slug/responses",
    operationId: "createPresetVersionFromResponses",
    bodyCase: "responsesRequestJson",
    summary: "Create a preset, or a new version of it, from an OpenAI Responses request",
    description:
      "The body is an OpenAI Responses request, validated in full and translated to the chat request it stands for (docs/dialects.md); " +
      "the fields overlapping the preset configuration are stored as from a chat-completions body (docs/presets.md): `instructions` becomes the " +
      "system prompt, `max_output_tokens` `max_tokens`, `text.format` `response_format`; `input`, `stream`, `include` and `metadata` are not stored.",
  });

  const listPresetsContract = contractRoute("listPresets");
  api.get(
    "/presets",
    {
      validatorCompiler: listPresetsContract.validatorCompiler,
      schema: {
        operationId: "listPresets",
        summary: "List the workspace's presets, most recently updated first",
        tags: ["presets"],
        ...listPresetsContract.schema,
        response: {
          200: listOf(presetSchema),
          ...errorResponses(400, 401, 403, 500),
        },
      },
    },
    async (req) => {
      const res = await client.listPresets({ ...pageRequest(req.query as PageQuery), ...workspaceOf(req.query) }, callOptionsFor(req));
      return { data: res.presets.map(presentPreset), total_count: res.totalCount, ...pageOfResponse(res) };
    },
  );

  const updatePresetContract = contractRoute("updatePreset", UpdatePresetRequest);
  api.patch<{ Params: { slug: string } }>(
    "/presets/:slug",
    {
      validatorCompiler: updatePresetContract.validatorCompiler,
      config: { authorizeFirst: { management: true } },
      schema: {
        operationId: "updatePreset",
        summary: "Rename, describe, designate a version of, or archive a preset",
        description:
          "Management key required. Omitted fields stay unchanged; description null clears it. status is active, disabled or archived. " +
          "Creating a version later designates that version and keeps the status. Recorded in the audit log.",
        tags: ["presets"],
        ...updatePresetContract.schema,
        response: {
          200: { type: "object", required: ["data"], properties: { data: presetWithVersionSchema } },
          ...errorResponses(400, 401, 403, 404, 500),
        },
      },
    },
    async (req) => {
      const b = (req.body ?? {}) as { name?: string; description?: string | null; designated_version?: number; status?: string };
      const paths = (["name", "description", "designated_version", "status"] as const).filter((f) => Object.hasOwn(b, f));
      const res = await client.updatePreset(
        {
          slug: req.params.slug,
          ...(b.name !== undefined ? { name: b.name } : {}),
          ...(typeof b.description === "string" ? { description: b.description } : {}),
          ...(b.designated_version !== undefined ? { designatedVersion: b.designated_version } : {}),
          ...(b.status !== undefined ? { status: b.status } : {}),
          updateMask: { paths },
          ...workspaceOf(req.query),
        },
        callOptionsFor(req),
      );
      return { data: presentPresetWithVersion(res.preset, res.designatedVersion) };
    },
  );

  const getPresetContract = contractRoute("getPreset");
  api.get<{ Params: { slug: string } }>(
    "/presets/:slug",
    {
      validatorCompiler: getPresetContract.validatorCompiler,
      schema: {
        operationId: "getPreset",
        summary: "Get a preset with its designated version",
        tags: ["presets"],
        ...getPresetContract.schema,
        response: {
          200: { type: "object", required: ["data"], properties: { data: presetWithVersionSchema } },
          ...errorResponses(400, 401, 403, 404, 500),
        },
      },
    },
    async (req) => {
      const res = await client.getPreset({ slug: req.params.slug, ...workspaceOf(req.query) }, callOptionsFor(req));
      return { data: presentPresetWithVersion(res.preset, res.designatedVersion) };
    },
  );

  const listPresetVersionsContract = contractRoute("listPresetVersions");
  api.get<{ Params: { slug: string } }>(
    "/presets/:slug/versions",
    {
      validatorCompiler: listPresetVersionsContract.validatorCompiler,
      schema: {
        operationId: "listPresetVersions",
        summary: "List a preset's versions, oldest first",
        tags: ["presets"],
        ...listPresetVersionsContract.schema,
        response: {
          200: listOf(presetVersionSchema),
          ...errorResponses(400, 401, 403, 404, 500),
        },
      },
    },
    async (req) => {
      const page = pageRequest(req.query as PageQuery);
      const res = await client.listPresetVersions({ slug: req.params.slug, ...page, ...workspaceOf(req.query) }, callOptionsFor(req));
      return { data: res.versions.map(presentPresetVersion), total_count: res.totalCount, ...pageOfResponse(res) };
    },
  );

  const getPresetVersionContract = contractRoute("getPresetVersion");
  api.get<{ Params: { slug: string; version: string } }>(
    "/presets/:slug/versions/:version",
    {
      validatorCompiler: getPresetVersionContract.validatorCompiler,
      schema: {
        operationId: "getPresetVersion",
        summary: "Get one version of a preset",
        tags: ["presets"],
        ...getPresetVersionContract.schema,
        response: {
          200: { type: "object", required: ["data"], properties: { data: presetVersionSchema } },
          ...errorResponses(400, 401, 403, 404, 500),
        },
      },
    },
    async (req) => {
      const res = await client.getPresetVersion(
        { slug: req.params.slug, version: req.params.version, ...workspaceOf(req.query) },
        callOptionsFor(req),
      );
      if (!res.version) throw new Error("core returned no version");
      return { data: presentPresetVersion(res.version) };
    },
  );
}
