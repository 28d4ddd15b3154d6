/**
 * The model catalog (docs/catalog.md): the built-in catalog (builtin-catalog.ts) with the operator's catalog
 * file (PORTICO_CATALOG_FILE) merged over it, and its lookups:
 *
 * - a canonical slug → the model and its endpoints (`model`, `endpointsOf`);
 * - a provider slug + that provider's own model id (or one of its aliases) → the endpoint (`endpointFor`);
 * - what served a request (`resolve`): the endpoint of the provider that answered for the upstream model id,
 *   or, when the caller named a canonical slug, that model's endpoint on the provider.
 *
 * The catalog is built once at start-up from data in memory; lookups are map reads.
 */
import { readFileSync } from "node:fs";
import { z } from "zod";
import { ConfigError } from "../../config.js";
import { BUILTIN_CATALOG } from "./builtin-catalog.js";
import { EndpointPatch, ModelPatch, OperatorFile } from "../../contract/requests/catalog.js";
import type { CatalogFile, CatalogModel, Endpoint } from "./types.js";

export type { CatalogFile, CatalogModel, Endpoint } from "./types.js";

export interface CatalogMatch {
  model: CatalogModel;
  endpoint: Endpoint;
}

export interface Catalog {
  /** Every model, sorted by slug. */
  models(): readonly CatalogModel[];
  model(slug: string): CatalogModel | undefined;
  /** The model's endpoints that may serve requests (status not `disabled`); empty for an unknown slug. */
  endpointsOf(slug: string): Endpoint[];
  /** The endpoint a provider serves under its own model id or one of its aliases (any status). */
  endpointFor(provider: string, providerModelId: string): CatalogMatch | undefined;
  /**
   * The catalogued endpoint that served a request: `provider` answered for `upstreamModel`; the caller asked
   * for `requestedModel` (a canonical slug or `<provider>/<model>`). Undefined when uncatalogued.
   */
  resolve(requestedModel: string, provider: string, upstreamModel: string): CatalogMatch | undefined;
}

/** A catalog file that cannot be used: a ConfigError (a bad setting), thrown by createCore before it opens anything. */
export class CatalogError extends ConfigError {}

export function createCatalog(file: CatalogFile): Catalog {
  const bySlug = new Map<string, CatalogModel>();
  const byProviderId = new Map<string, CatalogMatch>();
  const key = (provider: string, id: string) => `${provider}\u0000${id}`;
  const models = [...file.models].sort((a, b) => (a.slug < b.slug ? -1 : a.slug > b.slug ? 1 : 0));
  for (const model of models) {
    bySlug.set(model.slug, model);
    for (const endpoint of model.endpoints) {
      for (const id of [endpoint.model_id, ...(endpoint.aliases ?? [])]) {
        const k = key(endpoint.provider, id);
        // The first model to claim a provider's id keeps it (an operator entry that reuses it is a mistake caught by validation).
        if (!byProviderId.has(k)) byProviderId.set(k, { model, endpoint });
      }
    }
  }
  return {
    models: () => models,
    model: (slug) => bySlug.get(slug),
    endpointsOf: (slug) => bySlug.get(slug)?.endpoints.filter((e) => e.status !== "disabled") ?? [],
    endpointFor: (provider, id) => byProviderId.get(key(provider, id)),
    resolve(requestedModel, provider, upstreamModel) {
      const direct = byProviderId.get(key(provider, upstreamModel));
      if (direct) return direct;
      const model = bySlug.get(requestedModel);
      const endpoint = model?.endpoints.find((e) => e.provider === provider);
      return model && endpoint ? { model, endpoint } : undefined;
    },
  };
}

// ---- the operator file ----

// The catalog file's entries are defined once in the contract (the management API's bodies are the same definitions).
export { EndpointPatch, ModelPatch };
type EndpointPatch = z.infer<typeof EndpointPatch>;
export type ModelPatch = z.infer<typeof ModelPatch>;
export type OperatorCatalogFile = z.infer<typeof OperatorFile>;

/** What an operator's new endpoint gets for the fields it leaves out: conservative terms (it may keep data). */
const ENDPOINT_DEFAULTS = {
  quantization: "unknown",
  data_policy: { training: true, retains_prompts: true },
  zdr: false,
  status: "active",
  max_completion_tokens: null,
} as const;

function mergeEndpoint(where: string, base: Endpoint | undefined, patch: EndpointPatch, modelContext: number | undefined): Endpoint {
  if (!base) {
    if (!patch.model_id) throw new CatalogError(`${where}: a new endpoint needs model_id (the provider's own model id)`);
    if (!patch.pricing) throw new CatalogError(`${where}: a new endpoint needs pricing (prompt and completion per token)`);
    const context = patch.context_length ?? modelContext;
    if (context === undefined) throw new CatalogError(`${where}: a new endpoint needs context_length`);
    const { remove: _r, ...rest } = patch;
    return {
      ...ENDPOINT_DEFAULTS,
      data_policy: { ...ENDPOINT_DEFAULTS.data_policy },
      source: { url: "operator catalog file", as_of: "" },
      ...rest,
      model_id: patch.model_id,
      pricing: patch.pricing,
      context_length: context,
    } as Endpoint;
  }
  const { remove: _r, pricing, ...rest } = patch;
  // Prices given replace the endpoint's whole price list: a negotiated price list is stated in full.
  return { ...base, ...rest, ...(pricing ? { pricing } : {}), source: patch.source ?? (pricing ? { url: "operator catalog file", as_of: "" } : base.source) } as Endpoint;
}

export function mergeModel(where: string, base: CatalogModel | undefined, patch: ModelPatch): CatalogModel {
  if (!base && (!patch.name || !patch.endpoints?.length)) {
    throw new CatalogError(`${where}: a model the built-in catalog lacks needs a name and at least one endpoint`);
  }
  const endpoints = [...(base?.endpoints ?? [])];
  for (const [i, e] of (patch.endpoints ?? []).entries()) {
    const at = `${where}.endpoints[${i}] (${e.provider})`;
    const j = endpoints.findIndex((x) => x.provider === e.provider);
    if (e.remove) {
      if (j < 0) throw new CatalogError(`${at}: remove names no endpoint of this provider`);
      endpoints.splice(j, 1);
      continue;
    }
    const merged = mergeEndpoint(at, j >= 0 ? endpoints[j] : undefined, e, patch.context_length ?? base?.context_length);
    if (j >= 0) endpoints[j] = merged;
    else endpoints.push(merged);
  }
  if (endpoints.length === 0) throw new CatalogError(`${where}: no endpoint left (remove the model instead)`);
  const { remove: _r, endpoints: _e, ...fields } = patch;
  const description = fields.description ?? base?.description;
  return {
    slug: patch.slug,
    name: fields.name ?? base!.name,
    ...(description !== undefined ? { description } : {}),
    context_length: fields.context_length ?? base?.context_length ?? Math.max(...endpoints.map((e) => e.context_length)),
    architecture: fields.architecture ?? base?.architecture ?? { input_modalities: ["text"], output_modalities: ["text"] },
    supported_parameters: fields.supported_parameters ?? base?.supported_parameters ?? [],
    endpoints,
    ...ratingsOf(fields, base),
  };
}

/** The routing ratings: each given field replaces the lower layer's; a changed rating without a source says "operator". */
function ratingsOf(patch: ModelPatch, base: CatalogModel | undefined): Pick<CatalogModel, "quality" | "coding_score" | "task_scores" | "ratings_source"> {
  const out: Pick<CatalogModel, "quality" | "coding_score" | "task_scores" | "ratings_source"> = {};
  const quality = patch.quality ?? base?.quality;
  const coding = patch.coding_score ?? base?.coding_score;
  const tasks = patch.task_scores ? { ...base?.task_scores, ...patch.task_scores } : base?.task_scores;
  if (quality !== undefined) out.quality = quality;
  if (coding !== undefined) out.coding_score = coding;
  if (tasks !== undefined) out.task_scores = tasks;
  const changed = patch.quality !== undefined || patch.coding_score !== undefined || patch.task_scores !== undefined;
  const source = patch.ratings_source ?? (changed ? "operator" : base?.ratings_source);
  if (source !== undefined) out.ratings_source = source;
  return out;
}

/** The built-in catalog with `operator` merged over it (docs/catalog.md, "The operator file"). */
export function mergeCatalogs(builtin: CatalogFile, operator: unknown, name = "operator catalog"): CatalogFile {
  const parsed = OperatorFile.safeParse(operator);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const path = issue.path.length ? issue.path.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("").replace(/^\./, "") : "(top level)";
    throw new CatalogError(`${name}: ${path}: ${issue.message}`);
  }
  const models = new Map(builtin.models.map((m) => [m.slug, m]));
  for (const [i, patch] of parsed.data.models.entries()) {
    const where = `${name}: models[${i}] (${patch.slug})`;
    if (patch.remove) {
      if (!models.delete(patch.slug)) throw new CatalogError(`${where}: remove names a model the catalog lacks`);
      continue;
    }
    models.set(patch.slug, mergeModel(where, models.get(patch.slug), patch));
  }
  const merged: CatalogFile = { version: 1, models: [...models.values()] };
  checkProviderIds(merged, name);
  return merged;
}

/** A provider's own model id names one model: two models claiming it would price a request at a guess. */
export function checkProviderIds(catalog: CatalogFile, name: string): void {
  const owners = new Map<string, string>();
  for (const m of catalog.models) {
    for (const e of m.endpoints) {
      for (const id of [e.model_id, ...(e.aliases ?? [])]) {
        const k = `${e.provider}/${id}`;
        const other = owners.get(k);
        if (other !== undefined && other !== m.slug) throw new CatalogError(`${name}: provider ${e.provider}'s model id "${id}" is claimed by both ${other} and ${m.slug}`);
        owners.set(k, m.slug);
      }
    }
  }
}

/**
 * The catalog for this process: the built-in one, with the operator file at `file` (PORTICO_CATALOG_FILE)
 * merged over it when set. A file that cannot be read or parsed, or breaks a rule, is a CatalogError naming
 * the file and the entry, at start-up.
 */
export function loadCatalog(file?: string): Catalog {
  return createCatalog(loadCatalogFile(file));
}

/** The built-in catalog with the operator file merged over it, as data (the base under the management API's changes). */
export function loadCatalogFile(file?: string): CatalogFile {
  if (!file) return BUILTIN_CATALOG;
  let raw: string;
  try {
    raw = readFileSync(file, "utf8");
  } catch (err) {
    throw new CatalogError(`PORTICO_CATALOG_FILE ${file} cannot be read: ${(err as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (err) {
    throw new CatalogError(`PORTICO_CATALOG_FILE ${file} is not JSON: ${(err as Error).message}`);
  }
  return mergeCatalogs(BUILTIN_CATALOG, json, `PORTICO_CATALOG_FILE ${file}`);
}
