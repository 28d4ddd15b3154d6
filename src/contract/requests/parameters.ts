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
import { boolean, object, oneOf, requestJsonSchema, string } from "./kit.js";
import { ModelsPageFields, PageFields } from "./paging.js";

type Shape = Record<string, z.ZodType>;

/**
 * A query or path definition: an object of named parameters. Unknown query parameters pass, as before, unless
 * `closedQuery` is set: then the first one is refused (400 naming it and listing the known ones).
 */
export interface ParameterDefinitions {
  query?: z.ZodObject<Shape>;
  path?: z.ZodObject<Shape>;
  closedQuery?: boolean;
}

const text = (description: string) => string().meta({ description });
/** The statuses a generation ends in (GET /generations `status`). */
export const GENERATION_STATUSES = ["success", "error", "cancelled"] as const;
/** `metadata` of the request log: a JSON object of string pairs, every one of which the request's `metadata` held. */
export const MAX_METADATA_FILTER_PAIRS = 16;
const metadataFilter = string({ max: 12_000 })
  .refine(
    (v) => {
      try {
        const o: unknown = JSON.parse(v);
        if (o === null || typeof o !== "object" || Array.isArray(o)) return false;
        const entries = Object.entries(o);
        return entries.length >= 1 && entries.length <= MAX_METADATA_FILTER_PAIRS && entries.every(([k, x]) => typeof x === "string" && k.length <= 64 && x.length <= 512);
      } catch {
        return false;
      }
    },
    { message: `must be a JSON object of 1 to ${MAX_METADATA_FILTER_PAIRS} string pairs (keys at most 64, values at most 512 characters), e.g. {"team":"search"}` },
  )
  .meta({ description: 'Only generations whose request\'s `metadata` held every one of these pairs: a JSON object of strings, e.g. `{"team":"search"}` (URL-encoded).' });

/** The end of the times a query may name (10000-01-01T00:00:00Z); the start is 1970-01-01. */
export const MAX_QUERY_TIME_MS = 253_402_300_800_000;
/** A time in a query: RFC 3339 with a zone (`2026-11-26T10:00:00Z`, `…+02:00`) or a UTC day (`2026-11-26`). */
export const QUERY_TIME = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/;
const time = string({ max: 40, pattern: QUERY_TIME, patternText: "must be an RFC 3339 time with a zone (2026-11-26T10:00:00Z) or a day (2026-11-26)" }).refine(
  (v) => {
    const t = Date.parse(v);
    // Date.parse rolls 2026-02-30 over to March: the calendar day must exist as written.
    const [y, m, d] = v.slice(0, 10).split("-").map(Number) as [number, number, number];
    const day = new Date(Date.UTC(y, m - 1, d));
    return t >= 0 && t < MAX_QUERY_TIME_MS && day.getUTCMonth() === m - 1 && day.getUTCDate() === d;
  },
  { message: "must be a real time from 1970 to 9999" },
);
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
  // identity and providers (docs/api.md): no query parameters, and a query key is refused
  getCurrentKey: { query: q({}), closedQuery: true },
  listProviders: { query: q({}), closedQuery: true },
  // activity (docs/api.md, "Activity")
  getActivity: {
    closedQuery: true,
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
    closedQuery: true,
    query: q(ModelsPageFields),
  },
  listModelEndpoints: { ...byCatalogModel, query: q({}), closedQuery: true },
  listCatalogModels: { query: q(page), closedQuery: true },
  getCatalogModel: byCatalogModel,
  putCatalogModel: byCatalogModel,
  updateCatalogEndpoint: byCatalogEndpoint,
  deleteCatalogEndpoint: byCatalogEndpoint,
  deleteCatalogModel: byCatalogModel,
  // generations
  getGeneration: {
    query: object({ id: text("The generation id (the `id` of the completion or its chunks).") }, { required: ["id"] }),
  },
  getGenerationContent: {
    query: object({ id: text("The generation id (`gen-…`) whose logged request and response bodies to return.") }, { required: ["id"] }),
  },
  listGenerations: {
    query: q({
      ...page,
      key: string({ max: 64 }).meta({
        description: "Only the generations of this API key: its hash (64 lowercase hex characters) or its label (`pk-v1-…`). A key other than a management key lists its own generations only (403 for another key).",
      }),
      workspace_id: string({ max: 200 }).meta({ description: "Only the generations made in this workspace of the organization (404 when it is not one)." }),
      model: string({ max: 256 }).meta({ description: "Only generations that asked for or were served by this model (`<provider>/<model>` or a catalog slug)." }),
      provider: string({ max: 64 }).meta({ description: "Only generations served by this provider (slug)." }),
      status: oneOf(GENERATION_STATUSES).meta({ description: "Only generations with this status." }),
      from: time.meta({ description: "Only generations that arrived at or after this time (RFC 3339, e.g. `2026-11-26T10:00:00Z`, or a UTC day `2026-11-26`)." }),
      to: time.meta({ description: "Only generations that arrived before this time (RFC 3339 or a UTC day); later than `from`." }),
      session_id: string({ max: 256 }).meta({ description: "Only generations of this session (the request's `session_id`, else its `x-session-id` header)." }),
      user: string({ max: 256 }).meta({ description: "Only generations whose request named this `user`." }),
      trace_id: string({ max: 256 }).meta({ description: "Only generations whose request's `trace.trace_id` was this." }),
      trace_name: string({ max: 256 }).meta({ description: "Only generations whose request's `trace.trace_name` was this." }),
      span_name: string({ max: 256 }).meta({ description: "Only generations whose request's `trace.span_name` was this." }),
      generation_name: string({ max: 256 }).meta({ description: "Only generations whose request's `trace.generation_name` was this." }),
      parent_span_id: string({ max: 256 }).meta({ description: "Only generations whose request's `trace.parent_span_id` was this." }),
      metadata: metadataFilter,
      cache_hit: boolean().meta({ description: "Only generations answered (true) or not (false) from the response cache (docs/operations.md, \"Response cache\")." }),
      plugin: string({ max: 64 }).meta({ description: "Only generations that ran this plugin (its id); 400 while the deployment records no plugins." }),
      intern_id: string({ max: 64 }).meta({ description: "Only the model calls of this intern's runs, made with their run credentials (docs/interns.md, \"Model calls through Portico\")." }),
      run_id: string({ max: 64 }).meta({ description: "Only the model calls of this intern run, made with its run credential." }),
    }),
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

