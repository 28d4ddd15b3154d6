/**
 * GenerationsService: a generation by id, and the request log (the organization's generations, newest first,
 * filtered, cursor-paged: docs/operations.md, "Request log").
 *
 * Who reads what: any key of the organization reads one generation by id (`GetGeneration`, as before). The
 * list is narrower, as the activity read is: a management key lists the whole organization's generations
 * (every workspace, every key); any other key lists only the generations it made itself (its rows are
 * always filtered to its own hash, and naming another key is refused with 403). Another organization's
 * generations never appear: every query is filtered by the caller's organization first.
 *
 * `metadata` pairs and the known `trace` keys are found through the record's `contextTerms` (one hex term per
 * pair, pipeline/context.ts): a substring match of a whole term, exact on both databases.
 */
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { GENERATION_STATUSES, MAX_METADATA_FILTER_PAIRS, MAX_QUERY_TIME_MS } from "../../contract/requests/parameters.js";
import type { JsonObject } from "@bufbuild/protobuf";
import type { Db } from "../../db/client.js";
import { Prisma } from "../../db/prisma.js";
import type { Generation, GenerationsService } from "../../gen/portico/generations/v1/generations_service_pb.js";
import { callerOf, requireManagement, type Caller } from "../auth.js";
import type { ContentLog } from "./content-log.js";
import { invalidArgument, notFound, permissionDenied } from "../errors.js";
import { checkPage, createOrdering, findArgs, pageFields, pageOf, pagedWhere } from "../paging.js";
import type { Init } from "../proto-init.js";
import type { GenerationStore } from "./generations.js";
import { contextTerm } from "./pipeline/context.js";

const opt = <T>(v: T | null): T | undefined => (v === null ? undefined : v);

/** The request log's order: newest first, the id breaking ties (the index `[organizationId, createdAt, id]`). */
export const GENERATIONS_ORDER = createOrdering("generations", [
  { field: "createdAt", dir: "desc", kind: "date" },
  { field: "id", dir: "desc", kind: "string" },
]);

const HASH = /^[0-9a-f]{64}$/;
/** What a workspace id may look like (a UUID); anything else never reaches the database. */
const ID = /^[A-Za-z0-9._:@-]{1,200}$/;
const MAX_FILTER_CHARS = 256;

/**
 * Filters over columns that other features add (the response cache's hit flag, the plugins that ran). While
 * the deployment's Generation model has no such column the filter is refused with 400 naming it, never
 * ignored; once the column exists the filter applies as written here (a boolean `cacheHit`; `plugins` as JSON
 * text holding each plugin's id as a JSON string).
 */
const hasColumn = (name: string): boolean => Object.hasOwn(Prisma.GenerationScalarFieldEnum, name);
const OPTIONAL_FILTERS = {
  cache_hit: { column: "cacheHit", where: (v: boolean) => ({ cacheHit: v }), feature: "response-cache hits" },
  plugin: { column: "plugins", where: (id: string) => ({ plugins: { contains: JSON.stringify(id) } }), feature: "the plugins each request ran" },
} as const;

function optionalFilter<K extends keyof typeof OPTIONAL_FILTERS>(field: K, value: Parameters<(typeof OPTIONAL_FILTERS)[K]["where"]>[0]): Record<string, unknown> {
  const f = OPTIONAL_FILTERS[field];
  if (!hasColumn(f.column)) throw invalidArgument(field, `${field} cannot filter yet: this deployment does not record ${f.feature}`);
  return (f.where as (v: typeof value) => Record<string, unknown>)(value);
}

function text(field: string, v: string | undefined, max = MAX_FILTER_CHARS): string | undefined {
  if (v === undefined || v === "") return undefined;
  if (v.length > max) throw invalidArgument(field, `${field} must be at most ${max} characters long`);
  return v;
}

type GenerationRow = NonNullable<Awaited<ReturnType<Db["generation"]["findFirst"]>>>;

function parseJson(v: string | null): unknown {
  if (v === null) return undefined;
  try {
    return JSON.parse(v);
  } catch {
    return undefined;
  }
}

/** A stored generation in the service's message form. */
export function generationMessage(row: GenerationRow): Init<Generation> {
  const trace = parseJson(row.trace);
  const metadata = parseJson(row.metadata);
  return {
    id: row.id,
    keyHash: row.keyHash,
    workspaceId: row.workspaceId,
    requestedModel: row.requestedModel,
    model: opt(row.model),
    provider: opt(row.provider),
    credentialId: opt(row.credentialId),
    presetSlug: opt(row.presetSlug),
    presetVersion: opt(row.presetVersion),
    streamed: row.streamed,
    promptTokens: opt(row.promptTokens),
    completionTokens: opt(row.completionTokens),
    totalTokens: opt(row.totalTokens),
    latencyMs: row.latencyMs,
    timeToFirstTokenMs: opt(row.timeToFirstTokenMs),
    status: row.status,
    finishReason: opt(row.finishReason),
    errorCode: opt(row.errorCode),
    attempts: row.attempts,
    createdAt: timestampFromDate(row.createdAt),
    cachedTokens: opt(row.cachedTokens),
    cacheWriteTokens: opt(row.cacheWriteTokens),
    reasoningTokens: opt(row.reasoningTokens),
    costFemtoUsd: opt(row.costFemtoUsd),
    upstreamInferenceCostFemtoUsd: opt(row.upstreamCostFemtoUsd),
    isByok: row.credentialSource === "byok",
    catalogModel: opt(row.catalogModel),
    uncatalogued: row.provider !== null && row.catalogModel === null,
    cacheHit: row.cacheHit,
    user: opt(row.user),
    sessionId: opt(row.sessionId),
    traceId: opt(row.traceId),
    ...(trace && typeof trace === "object" && !Array.isArray(trace) ? { trace: trace as Record<string, never> } : {}),
    metadata: metadata && typeof metadata === "object" && !Array.isArray(metadata) ? (metadata as Record<string, string>) : {},
    plugins: pluginsOf(row.plugins),
    serverTools: opt(row.serverTools),
    attemptsLog: opt(row.attemptsLog),
    dialect: opt(row.dialect),
    internId: opt(row.internId),
    runId: opt(row.internRunId),
    internSessionId: opt(row.internSessionId),
  };
}

/** The key filter: a hash, or a label naming keys of the organization; a non-management caller only names itself. */
async function keyHashes(db: Db, caller: Caller, key: string | undefined): Promise<string[] | undefined> {
  if (!caller.isManagement) {
    if (key !== undefined && key !== caller.keyHash && key !== caller.keyLabel) {
      throw permissionDenied("Only management keys can list another key's generations; this key lists its own");
    }
    return [caller.keyHash];
  }
  if (key === undefined) return undefined;
  if (HASH.test(key)) return [key];
  const keys = await db.apiKey.findMany({ where: { organizationId: caller.organizationId, label: key }, select: { hash: true } });
  return keys.map((k) => k.hash);
}

/** The plugins column (JSON text of an array of reports) as the message's list; a row written before it: none. */
function pluginsOf(text: string | null): JsonObject[] {
  if (text === null) return [];
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) ? (parsed.filter((p) => typeof p === "object" && p !== null && !Array.isArray(p)) as JsonObject[]) : [];
  } catch {
    return [];
  }
}

const asObject = (v: unknown): JsonObject => (v !== null && typeof v === "object" && !Array.isArray(v) ? (v as JsonObject) : { value: v as JsonObject[string] });

export function createGenerationsHandler(deps: { db: Db; store: GenerationStore; contentLog?: ContentLog }): ServiceImpl<typeof GenerationsService> {
  return {
    /** Content logging (docs/operations.md, "Content logging"): management keys only, the caller's organization only. */
    async getGenerationContent(req, ctx) {
      const caller = callerOf(ctx);
      requireManagement(caller);
      if (!/^gen-[0-9a-f-]{36}$/.test(req.id)) throw invalidArgument("id", "id must be a generation id (gen-…)");
      const content = deps.contentLog ? await deps.contentLog.read(req.id, caller.organizationId) : null;
      if (!content) throw notFound("No logged content for this generation");
      return {
        id: content.id,
        request: asObject(content.request),
        ...(content.response !== null && content.response !== undefined ? { response: asObject(content.response) } : {}),
        createdAt: timestampFromDate(content.createdAt),
        expiresAt: timestampFromDate(content.expiresAt),
      };
    },
    async getGeneration(req, ctx) {
      const caller = callerOf(ctx);
      if (!/^gen-[0-9a-f-]{36}$/.test(req.id)) throw invalidArgument("id", "id must be a generation id (gen-…)");
      // A generation answered a moment ago may still be queued: write the queue first.
      await deps.store.flush();
      const row = await deps.db.generation.findFirst({ where: { id: req.id, organizationId: caller.organizationId } });
      if (!row) throw notFound("No such generation");
      return { generation: generationMessage(row) };
    },

    async listGenerations(req, ctx) {
      const caller = callerOf(ctx);
      const page = checkPage(req, GENERATIONS_ORDER);
      const and: Record<string, unknown>[] = [{ organizationId: caller.organizationId }];

      const key = text("key", req.key, 64);
      const hashes = await keyHashes(deps.db, caller, key);
      if (hashes !== undefined) and.push(hashes.length === 1 ? { keyHash: hashes[0] } : { keyHash: { in: hashes } });

      const workspaceId = text("workspace_id", req.workspaceId, 200);
      if (workspaceId !== undefined) {
        if (!ID.test(workspaceId)) throw invalidArgument("workspace_id", "workspace_id is not a workspace id");
        const ws = await deps.db.workspace.findFirst({ where: { id: workspaceId, organizationId: caller.organizationId }, select: { id: true } });
        if (!ws) throw notFound("No such workspace in this organization");
        and.push({ workspaceId });
      }
      const model = text("model", req.model);
      if (model !== undefined) and.push({ OR: [{ model }, { requestedModel: model }, { catalogModel: model }] });
      const provider = text("provider", req.provider, 64);
      if (provider !== undefined) and.push({ provider });
      const status = text("status", req.status, 16);
      if (status !== undefined) {
        if (!(GENERATION_STATUSES as readonly string[]).includes(status)) throw invalidArgument("status", `status must be one of ${GENERATION_STATUSES.join(", ")}`);
        and.push({ status });
      }
      const from = req.from ? timestampDate(req.from) : undefined;
      const to = req.to ? timestampDate(req.to) : undefined;
      const inRange = (d: Date) => d.getTime() >= 0 && d.getTime() < MAX_QUERY_TIME_MS;
      if (from && !inRange(from)) throw invalidArgument("from", "from must be a time from 1970 to 9999");
      if (to && !inRange(to)) throw invalidArgument("to", "to must be a time from 1970 to 9999");
      if (from && to && from.getTime() >= to.getTime()) throw invalidArgument("to", "to must be later than from");
      if (from || to) and.push({ createdAt: { ...(from ? { gte: from } : {}), ...(to ? { lt: to } : {}) } });
      const sessionId = text("session_id", req.sessionId);
      if (sessionId !== undefined) and.push({ sessionId });
      const user = text("user", req.user);
      if (user !== undefined) and.push({ user });
      const internId = text("intern_id", req.internId);
      if (internId !== undefined) and.push({ internId });
      const runId = text("run_id", req.runId);
      if (runId !== undefined) and.push({ internRunId: runId });
      const traceId = text("trace_id", req.traceId);
      if (traceId !== undefined) and.push({ traceId });
      const trace = { trace_name: req.traceName, span_name: req.spanName, generation_name: req.generationName, parent_span_id: req.parentSpanId };
      for (const [k, v] of Object.entries(trace)) {
        const value = text(k, v);
        if (value !== undefined) and.push({ contextTerms: { contains: contextTerm(`trace.${k}`, value) } });
      }
      const pairs = Object.entries(req.metadata);
      if (pairs.length > MAX_METADATA_FILTER_PAIRS) throw invalidArgument("metadata", `metadata must hold at most ${MAX_METADATA_FILTER_PAIRS} pairs`);
      for (const [k, v] of pairs) {
        if (k.length > 64 || v.length > 512) throw invalidArgument("metadata", "metadata keys must be at most 64 and values at most 512 characters long");
        and.push({ contextTerms: { contains: contextTerm(`metadata.${k}`, v) } });
      }
      if (req.cacheHit !== undefined) and.push(optionalFilter("cache_hit", req.cacheHit));
      const plugin = text("plugin", req.plugin, 64);
      if (plugin !== undefined) and.push(optionalFilter("plugin", plugin));

      // Generations answered a moment ago may still be queued: write the queue first.
      await deps.store.flush();
      const rows = await deps.db.generation.findMany({
        where: pagedWhere({ AND: and }, GENERATIONS_ORDER, page),
        ...findArgs(GENERATIONS_ORDER, page),
      });
      const result = pageOf(rows, GENERATIONS_ORDER, page);
      return { generations: result.items.map(generationMessage), ...pageFields(result) };
    },
  };
}
