/**
 * The catalog's third layer (docs/catalog.md, "Changing the catalog while it serves"): operators' changes made
 * through the management API or `portico admin catalog`, stored one row per canonical slug
 * (`CatalogOverride`) and applied over the built-in catalog and the operator file:
 *
 *   built-in  <  PORTICO_CATALOG_FILE  <  database overrides
 *
 * A row is one of three kinds, each an entry in the catalog file's format (the file's zod definition):
 * - `replace`: the whole model (an added model, or one that replaces a lower layer's);
 * - `patch`: `{slug, endpoints: [endpoint changes by provider]}` over the lower layers' model, the file's
 *   merge rules (`pricing` replaces the whole price list, `{"provider": …, "remove": true}` removes);
 * - `remove`: the model is removed.
 *
 * The management operations here are pure: they take the lower layers and the current row and return the
 * new row, or throw a 400 naming the field. Every new row is checked by building the catalog with it.
 */
import { z } from "zod";
import { validate } from "../../contract/requests/kit.js";
import { checkRules, invalidArgument, notFound } from "../errors.js";
import { PutCatalogModelRequest, UpdateCatalogEndpointRequest } from "../../contract/requests/catalog.js";
import { CatalogError, checkProviderIds, mergeModel, ModelPatch, type CatalogFile, type CatalogModel } from "./catalog.js";
import { UNSERVED_PROVIDER, type ServesProvider } from "./providers.js";

export type OverrideKind = "replace" | "patch" | "remove";

export interface OverrideRow {
  slug: string;
  kind: OverrideKind;
  /** The entry in the catalog file's format. */
  entry: ModelPatch;
}

/** Applies the rows over `base`; a row that no longer applies (its base changed) is reported and skipped. */
export function applyOverrides(base: CatalogFile, rows: readonly OverrideRow[], onSkip?: (slug: string, problem: string) => void): CatalogFile {
  const models = new Map(base.models.map((m) => [m.slug, m]));
  for (const row of rows) {
    try {
      applyRow(models, row);
    } catch (err) {
      if (!(err instanceof CatalogError) && !(err instanceof z.ZodError)) throw err;
      onSkip?.(row.slug, err.message);
    }
  }
  return { version: 1, models: [...models.values()] };
}

function applyRow(models: Map<string, CatalogModel>, row: OverrideRow): void {
  const where = `catalog override (${row.slug})`;
  const entry = ModelPatch.parse(row.entry);
  if (row.kind === "remove") {
    models.delete(row.slug);
    return;
  }
  if (row.kind === "replace") {
    models.set(row.slug, mergeModel(where, undefined, entry));
    return;
  }
  const base = models.get(row.slug);
  if (!base) throw new CatalogError(`${where}: the model is no longer in the lower layers`);
  models.set(row.slug, mergeModel(where, base, entry));
}

/** The slug's model as `base` and `rows` make it, or undefined. */
function effectiveModel(base: CatalogFile, rows: readonly OverrideRow[], slug: string): CatalogModel | undefined {
  return applyOverrides(base, rows.filter((r) => r.slug === slug)).models.find((m) => m.slug === slug);
}

/** Checks that the catalog built with `row` in place of the slug's row is sound; a broken rule is a 400. */
function checkWith(base: CatalogFile, rows: readonly OverrideRow[], row: OverrideRow | undefined, slug: string): void {
  const next = rows.filter((r) => r.slug !== slug);
  if (row) next.push(row);
  try {
    const models = new Map(base.models.map((m) => [m.slug, m]));
    for (const r of next) if (r.slug === slug) applyRow(models, r);
    const candidate = applyOverrides({ version: 1, models: [...models.values()] }, next.filter((r) => r.slug !== slug));
    checkProviderIds(candidate, "catalog");
  } catch (err) {
    if (err instanceof CatalogError) {
      const message = err.message.replace(/^catalog( override \([^)]*\))?: /, "");
      if (/model id "/.test(message)) throw invalidArgument("model_id", `model_id must name a model id no other model has: ${message}`);
      throw invalidArgument("body", message);
    }
    throw err;
  }
}

const AddModelBody = PutCatalogModelRequest;
const ChangeEndpointBody = UpdateCatalogEndpointRequest;

/** The body read by its definition; a broken rule is 400 naming the field (the one mapping, checkRules). */
function parse<T extends z.ZodType>(schema: T, body: unknown): z.output<T> {
  return checkRules(() => validate(schema, body));
}

const SLUG = /^[a-z0-9][a-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._:-]*$/;

/** A canonical slug from a path (`<author>/<model>`); anything else names no model. */
export function checkSlug(slug: string): string {
  if (!SLUG.test(slug)) throw invalidArgument("slug", "slug must be a canonical slug <author>/<model>, such as acme/llama-3-70b");
  return slug;
}

export interface OverrideContext {
  /** The built-in catalog with the operator file merged over it. */
  base: CatalogFile;
  /** Every stored row. */
  rows: readonly OverrideRow[];
  serves: ServesProvider;
}

/**
 * Adds a model, or replaces the slug's model whole: `body` is a model in the catalog file's format (a new
 * model's rules: `name`, at least one endpoint, each with `model_id`, `pricing` and a context length).
 */
export function addOrReplaceModel(ctx: OverrideContext, slug: string, body: unknown): OverrideRow {
  checkSlug(slug);
  const model = parse(AddModelBody, body);
  if (model.slug !== undefined && model.slug !== slug) throw invalidArgument("slug", "slug must be the model's slug of the path, or left out");
  if (model.name === undefined) throw invalidArgument("name", "name is required");
  if (!model.endpoints?.length) throw invalidArgument("endpoints", "endpoints must list at least one endpoint");
  const seen = new Set<string>();
  for (const [i, e] of model.endpoints.entries()) {
    const at = `endpoints[${i}]`;
    if (e.remove) throw invalidArgument(`${at}.remove`, `${at}.remove is not accepted here: leave the endpoint out`);
    if (seen.has(e.provider)) throw invalidArgument(`${at}.provider`, `${at}.provider names a provider listed twice (one endpoint per provider)`);
    seen.add(e.provider);
    if (!ctx.serves(e.provider)) throw invalidArgument(`${at}.provider`, `${at}.${UNSERVED_PROVIDER}`);
    if (e.model_id === undefined) throw invalidArgument(`${at}.model_id`, `${at}.model_id is required (the provider's own model id)`);
    if (e.pricing === undefined) throw invalidArgument(`${at}.pricing`, `${at}.pricing is required (prompt and completion per token)`);
    if (e.context_length === undefined && model.context_length === undefined) {
      throw invalidArgument(`${at}.context_length`, `${at}.context_length is required (or the model's context_length)`);
    }
  }
  const row: OverrideRow = { slug, kind: "replace", entry: { ...model, slug } };
  checkWith(ctx.base, ctx.rows, row, slug);
  return row;
}

/**
 * Changes one endpoint of a model (its prices, status, context, terms …), or adds the provider's endpoint
 * when the model has none (then `model_id` and `pricing` are required). `body`: the endpoint's fields in the
 * catalog file's format, without `provider` (the path's).
 */
export function changeEndpoint(ctx: OverrideContext, slug: string, provider: string, body: unknown): OverrideRow {
  checkSlug(slug);
  const patch = parse(ChangeEndpointBody, body);
  if (patch.provider !== undefined && patch.provider !== provider) throw invalidArgument("provider", "provider must be the path's provider, or left out");
  const current = ctx.rows.find((r) => r.slug === slug);
  const model = effectiveModel(ctx.base, ctx.rows, slug);
  if (!model) throw notFound(`No model ${slug} in the catalog`);
  const existing = model.endpoints.find((e) => e.provider === provider);
  if (!existing) {
    if (!ctx.serves(provider)) throw invalidArgument("provider", UNSERVED_PROVIDER);
    if (patch.model_id === undefined) throw invalidArgument("model_id", "model_id is required to add an endpoint (the provider's own model id)");
    if (patch.pricing === undefined) throw invalidArgument("pricing", "pricing is required to add an endpoint (prompt and completion per token)");
  }
  if (Object.keys(patch).filter((k) => k !== "provider").length === 0) throw invalidArgument("body", "body must name at least one field to change");
  const { provider: _p, ...fields } = patch;
  let row: OverrideRow;
  if (current?.kind === "replace") {
    const endpoints = [...(current.entry.endpoints ?? [])];
    const j = endpoints.findIndex((e) => e.provider === provider);
    const merged = { ...(j >= 0 ? endpoints[j] : {}), ...fields, provider };
    if (j >= 0) endpoints[j] = merged;
    else endpoints.push(merged);
    row = { slug, kind: "replace", entry: { ...current.entry, endpoints } };
  } else {
    const endpoints = [...(current?.kind === "patch" ? (current.entry.endpoints ?? []) : [])];
    const j = endpoints.findIndex((e) => e.provider === provider);
    const { remove: _r, ...before } = j >= 0 ? endpoints[j]! : { provider };
    const merged = { ...before, ...fields, provider };
    if (j >= 0) endpoints[j] = merged;
    else endpoints.push(merged);
    row = { slug, kind: "patch", entry: { slug, endpoints } };
  }
  checkWith(ctx.base, ctx.rows, row, slug);
  return row;
}

/** Removes a model's endpoint; the model's last one cannot be removed (remove the model). Null: no row is left. */
export function removeEndpoint(ctx: OverrideContext, slug: string, provider: string): OverrideRow | null {
  checkSlug(slug);
  const current = ctx.rows.find((r) => r.slug === slug);
  const model = effectiveModel(ctx.base, ctx.rows, slug);
  if (!model || !model.endpoints.some((e) => e.provider === provider)) throw notFound(`No endpoint of provider ${provider} for ${slug} in the catalog`);
  if (model.endpoints.length === 1) throw invalidArgument("provider", `${provider} serves ${slug}'s last endpoint: remove the model instead`);
  let row: OverrideRow | null;
  if (current?.kind === "replace") {
    row = { slug, kind: "replace", entry: { ...current.entry, endpoints: (current.entry.endpoints ?? []).filter((e) => e.provider !== provider) } };
  } else {
    const endpoints = (current?.kind === "patch" ? (current.entry.endpoints ?? []) : []).filter((e) => e.provider !== provider);
    const lower = ctx.base.models.find((m) => m.slug === slug);
    // An endpoint of the lower layers is removed by an entry; one this row added is simply dropped.
    if (lower?.endpoints.some((e) => e.provider === provider)) endpoints.push({ provider, remove: true });
    row = endpoints.length ? { slug, kind: "patch", entry: { slug, endpoints } } : null;
  }
  checkWith(ctx.base, ctx.rows, row ?? undefined, slug);
  return row;
}

/** Removes a model. Null: the model was only in the database (its row goes). */
export function removeModel(ctx: OverrideContext, slug: string): OverrideRow | null {
  checkSlug(slug);
  if (!effectiveModel(ctx.base, ctx.rows, slug)) throw notFound(`No model ${slug} in the catalog`);
  if (!ctx.base.models.some((m) => m.slug === slug)) return null;
  return { slug, kind: "remove", entry: { slug, remove: true } };
}
