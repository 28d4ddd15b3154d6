/**
 * The query strings and path parameters of every operation, defined once like the bodies: the gateway
 * checks each request's query and path with these definitions (a broken rule is 400 naming the
 * parameter) and the OpenAPI document's parameters are derived from them (`requestParameterSchemas`;
 * a test compares the served document). Query values arrive as text: `queryValues` reads the ones a
 * definition types as integers or booleans into numbers and booleans first, and an empty value is
 * absent. Rules that need the database (a workspace's existence, a slug's shape, a cursor's position)
 * stay in the core, which checks the RPC fields the gateway fills from these.
 */
import type { z } from "zod";
import { boolean, integer, object, requestJsonSchema, string } from "./kit.js";
import { MAX_OFFSET, PageFields } from "./paging.js";

type Shape = Record<string, z.ZodType>;

/** A query or path definition: an object of named parameters (unknown query parameters pass, as before). */
export interface ParameterDefinitions {
  query?: z.ZodObject<Shape>;
  path?: z.ZodObject<Shape>;
}

const text = (description: string) => string().meta({ description });
const pathText = (description: string) => string({ min: 1 }).meta({ description });

const workspaceForPresets = text(
  "The workspace to act in (UUID); omitted = the calling key's workspace. Another workspace of the organization needs a management key (403); " +
    "one that is not a live workspace of the organization is 400 naming workspace_id.",
);
const slug = pathText(
  "Preset slug: 1 to 100 URL-unreserved characters (A-Z, a-z, 0-9, '-', '.', '_', '~'), not '.' or '..'; case-sensitive.",
);
const internId = pathText("The intern (UUID).");
const sessionId = pathText("The session id (the final chunk's session_id), 1 to 256 characters.");
const keyHash = { hash: pathText("The key's hash (64 lowercase hex characters).") };
const workspaceId = { id: pathText("Workspace id (UUID).") };
const byokId = { id: pathText("Credential id (UUID).") };

const messagesBeta = text("Accepted and ignored (Claude Code sends `beta=true`); beta features follow the `anthropic-beta` header.");

/** The paging parameters of every list (src/contract/requests/paging.ts). */
const page = PageFields;

const q = <S extends Shape>(shape: S) => object(shape);
const p = <S extends Shape, R extends keyof S>(shape: S, required: readonly R[]) => object(shape, { required });
const byIntern = { path: p({ internId }, ["internId"]) };

/** A catalog model's canonical slug in two path segments (`meta-llama/llama-3.3-70b-instruct`); the core checks its shape. */
const catalogModel = {
  author: pathText("The canonical slug's author (`meta-llama`)."),
  slug: pathText("The canonical slug's model part (`llama-3.3-70b-instruct`)."),
};
const byCatalogModel = { path: p(catalogModel, ["author", "slug"]) };
const byCatalogEndpoint = {
  path: p({ ...catalogModel, provider: pathText("The endpoint's provider slug.") }, ["author", "slug", "provider"]),
};
/** The largest page of `GET /models` (the list every client reads whole; docs/catalog.md). */
export const MAX_MODELS_LIMIT = 1000;

/** Each operation's query and path definitions, by operationId. */
export const RequestParameters: Record<string, ParameterDefinitions> = {
  // keys
  listApiKeys: {
    query: q({
      ...page,
      include_disabled: boolean().meta({ description: "true to list disabled keys too (default false)." }),
      workspace_id: text("Only keys of this workspace."),
    }),
  },
  getApiKey: { path: p(keyHash, ["hash"]) },
  updateApiKey: { path: p(keyHash, ["hash"]) },
  deleteApiKey: { path: p(keyHash, ["hash"]) },
  // workspaces
  listWorkspaces: { query: q(page) },
  getWorkspace: { path: p(workspaceId, ["id"]) },
  updateWorkspace: { path: p(workspaceId, ["id"]) },
  deleteWorkspace: { path: p(workspaceId, ["id"]) },
  listWorkspaceMembers: { path: p(workspaceId, ["id"]), query: q(page) },
  addWorkspaceMembers: { path: p(workspaceId, ["id"]) },
  removeWorkspaceMembers: { path: p(workspaceId, ["id"]) },
  // audit
  listAuditEvents: {
    query: q({
      ...page,
      action: text("Only this action, for example key.create."),
      action_prefix: text(
        "Only actions starting with this text, for example `key.` (every key change) or `preset`; case-sensitive, at most 100 characters.",
      ),
      target_type: text("Only this kind of resource, for example api_key."),
      target_id: text("Only this resource."),
    }),
  },
  // presets
  createPresetVersion: { path: p({ slug }, ["slug"]), query: q({ workspace_id: workspaceForPresets }) },
  createPresetVersionFromMessages: { path: p({ slug }, ["slug"]), query: q({ workspace_id: workspaceForPresets }) },
  createPresetVersionFromResponses: { path: p({ slug }, ["slug"]), query: q({ workspace_id: workspaceForPresets }) },
  listPresets: { query: q({ ...page, workspace_id: workspaceForPresets }) },
  getPreset: { path: p({ slug }, ["slug"]), query: q({ workspace_id: workspaceForPresets }) },
  updatePreset: { path: p({ slug }, ["slug"]), query: q({ workspace_id: workspaceForPresets }) },
  listPresetVersions: { path: p({ slug }, ["slug"]), query: q({ ...page, workspace_id: workspaceForPresets }) },
  getPresetVersion: {
    path: p({ slug, version: pathText('Version number as a decimal string, e.g. "1".') }, ["slug", "version"]),
    query: q({ workspace_id: workspaceForPresets }),
  },
  // account-wide routing settings
  getRoutingSettings: { query: q({ workspace_id: text("The workspace (UUID) whose settings to read; omitted = the organization's.") }) },
  updateRoutingSettings: { query: q({ workspace_id: text("The workspace (UUID) whose settings to change; omitted = the organization's.") }) },
  // byok
  listByokKeys: {
    query: q({
      ...page,
      provider: text("Only credentials of this provider slug."),
      workspace_id: text("Workspace (UUID); omitted = the default workspace."),
    }),
  },
  getByokKey: { path: p(byokId, ["id"]) },
  updateByokKey: { path: p(byokId, ["id"]) },
  deleteByokKey: { path: p(byokId, ["id"]) },
  // interns
  listInterns: {
    query: q({
      ...page,
      status: text("Comma-separated statuses (running, awaiting_host, stopped), at most 8."),
      workspace_id: text("Must be the API key's workspace."),
    }),
  },
  getIntern: byIntern,
  updateIntern: byIntern,
  deleteIntern: byIntern,
  suspendIntern: byIntern,
  provisionIntern: byIntern,
  issueInternHostToken: byIntern,
  revokeInternHostToken: byIntern,
  createInternChatCompletion: byIntern,
  getInternSession: { path: p({ internId, sessionId: sessionId }, ["internId", "sessionId"]) },
  cancelInternSessionRun: { path: p({ internId, sessionId: sessionId }, ["internId", "sessionId"]) },
  // the Anthropic Messages dialect (docs/dialects.md)
  createMessage: { query: q({ beta: messagesBeta }) },
  countMessageTokens: { query: q({ beta: messagesBeta }) },
  // embeddings (docs/dialects.md): no query or path parameters
  createEmbeddings: {},
  // the OpenAI Responses dialect (docs/dialects.md)
  createResponse: {},
  // activity (docs/api.md, "Activity")
  getActivity: {
    query: q({
      date: text("Only this UTC day (YYYY-MM-DD): one of the last 30 completed days, or today."),
      api_key_hash: text("Only the generations of this API key (its SHA-256 hex hash)."),
      user_id: text("Only the generations of keys this member of the organization created."),
      workspace_id: text("Only the generations made in this workspace of the organization."),
      group_by: text(
        "`workspace`: the rows split per workspace (workspace_id on each). Portico: `model`, `provider` or `key` give one row per day and model, provider or API key (api_key_hash on each).",
      ),
      include_today: boolean().meta({ description: "Portico: `true` makes the window the 30 UTC days ending today (today so far included)." }),
    }),
  },
  // the model list and the catalog (docs/catalog.md)
  // `/models` pages by offset and limit as @openrouter/sdk sends them, and answers whole without
  // them: the one list outside the cursor rule (docs/api.md#pagination).
  listModels: {
    query: q({
      offset: integer({ min: 0, max: MAX_OFFSET }).meta({ description: "Entries to skip (default 0)." }),
      limit: integer({ min: 1, max: MAX_MODELS_LIMIT }).meta({ description: `At most this many entries (1 to ${MAX_MODELS_LIMIT}; default: all).` }),
    }),
  },
  listModelEndpoints: byCatalogModel,
  listCatalogModels: { query: q(page) },
  getCatalogModel: byCatalogModel,
  putCatalogModel: byCatalogModel,
  updateCatalogEndpoint: byCatalogEndpoint,
  deleteCatalogEndpoint: byCatalogEndpoint,
  deleteCatalogModel: byCatalogModel,
  // generations
  getGeneration: {
    query: object({ id: text("The generation id (the `id` of the completion or its chunks).") }, { required: ["id"] }),
  },
};

/** The JSON Schemas of an operation's query string and path parameters (for the route's OpenAPI schema); none when it has none. */
export function requestParameterSchemas(operationId: string): { querystring?: Record<string, unknown>; params?: Record<string, unknown> } {
  const defs = RequestParameters[operationId] ?? {};
  return {
    ...(defs.query ? { querystring: requestJsonSchema(defs.query) } : {}),
    ...(defs.path ? { params: requestJsonSchema(defs.path) } : {}),
  };
}

const typesCache = new WeakMap<z.ZodType, Record<string, string[]>>();

/** The JSON types each property of a definition accepts (from its derived JSON Schema). */
function propertyTypes(def: z.ZodObject<Shape>): Record<string, string[]> {
  let types = typesCache.get(def);
  if (!types) {
    const props = (requestJsonSchema(def).properties ?? {}) as Record<string, { type?: string | string[]; anyOf?: Array<{ type?: string }> }>;
    types = Object.fromEntries(
      Object.entries(props).map(([name, s]) => [name, s.anyOf ? s.anyOf.flatMap((b) => (b.type ? [b.type] : [])) : s.type === undefined ? [] : [s.type].flat()]),
    );
    typesCache.set(def, types);
  }
  return types;
}

/**
 * The query as the definition's types: an empty value (and, for a number or boolean, `null`, which
 * clients send for "unset") is absent; a decimal integer text becomes a number where the definition
 * wants an integer; `true`/`false` become booleans where it wants a boolean. Anything else is left as
 * text, for the definition to refuse naming the parameter.
 */
export function queryValues(def: z.ZodObject<Shape>, query: unknown): Record<string, unknown> {
  const types = propertyTypes(def);
  const out: Record<string, unknown> = {};
  for (const [name, raw] of Object.entries((query ?? {}) as Record<string, unknown>)) {
    if (raw === undefined || raw === "") continue;
    const want = types[name] ?? [];
    const numeric = want.includes("integer") || want.includes("number");
    if (typeof raw === "string" && raw === "null" && (numeric || want.includes("boolean"))) continue;
    if (typeof raw === "string" && numeric && /^-?\d{1,16}$/.test(raw)) out[name] = Number(raw);
    else if (typeof raw === "string" && want.includes("boolean") && (raw === "true" || raw === "false")) out[name] = raw === "true";
    else out[name] = raw;
  }
  return out;
}

