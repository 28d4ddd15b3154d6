/**
 * Changing the catalog while it serves (docs/catalog.md): the domain service that the management API
 * (CatalogService, `/api/v1/catalog/…`) and `portico admin catalog` share. Each change writes its override
 * row and the audit event in one transaction, then swaps this process's snapshot and announces the slug on
 * the invalidation bus so every other process re-reads (they also re-read on their own every second).
 *
 * Two changes to one model at the same time: the second to commit finds the row changed under it and is
 * refused with 409 (try again), never a lost update.
 */
import type { Db } from "../../db/client.js";
import { isUniqueViolation } from "../../db/client.js";
import { Prisma } from "../../db/prisma.js";
import type { InvalidationBus } from "../../lib/invalidation.js";
import { recordAudit, type Actor } from "../audit/audit-log.js";
import { conflict } from "../errors.js";
import type { CatalogModel } from "./catalog.js";
import { CATALOG_TOPIC, type LiveCatalog } from "./live-catalog.js";
import { addOrReplaceModel, changeEndpoint, removeEndpoint, removeModel, type OverrideContext, type OverrideKind, type OverrideRow } from "./overrides.js";
import type { ServesProvider } from "./providers.js";

export interface CatalogEntryView {
  model: CatalogModel;
  /** Whether a management change (a database override) shapes this model. */
  overridden: boolean;
}

export interface CatalogManagement {
  /** Every model of the catalog as served (every endpoint status), sorted by slug. */
  list(): CatalogEntryView[];
  get(slug: string): CatalogEntryView | undefined;
  putModel(actor: Actor, slug: string, body: unknown): Promise<CatalogEntryView>;
  changeEndpoint(actor: Actor, slug: string, provider: string, body: unknown): Promise<CatalogEntryView>;
  removeEndpoint(actor: Actor, slug: string, provider: string): Promise<CatalogEntryView>;
  removeModel(actor: Actor, slug: string): Promise<void>;
}

const RACED = "The catalog entry changed while this change was being made; try again";

export function createCatalogManagement(deps: { db: Db; catalog: LiveCatalog; serves: ServesProvider; bus?: InvalidationBus }): CatalogManagement {
  const { db, catalog } = deps;
  const view = (slug: string): CatalogEntryView | undefined => {
    const model = catalog.model(slug);
    return model && { model, overridden: catalog.rows().some((r) => r.slug === slug && r.kind !== "remove") };
  };

  /**
   * Reads the stored rows, computes the slug's new row with `change`, writes it (or deletes the slug's row
   * for null) only if the row is still as read, with its audit event; then refreshes and announces.
   */
  async function commit(
    actor: Actor,
    slug: string,
    action: string,
    change: (ctx: OverrideContext) => OverrideRow | null,
    details: Record<string, unknown>,
  ): Promise<void> {
    const stored = await db.catalogOverride.findMany({ orderBy: { slug: "asc" } });
    const rows = stored.map((r) => ({ slug: r.slug, kind: r.kind as OverrideKind, entry: r.entry as unknown as OverrideRow["entry"] }));
    const next = change({ base: catalog.base, rows, serves: deps.serves });
    const before = stored.find((r) => r.slug === slug);
    try {
      await db.$transaction(async (tx) => {
        if (before) {
          const where = { slug, updatedAt: before.updatedAt };
          const n = next
            ? await tx.catalogOverride.updateMany({ where, data: { kind: next.kind, entry: next.entry as Prisma.InputJsonValue, updatedAt: new Date(Math.max(Date.now(), before.updatedAt.getTime() + 1)) } })
            : await tx.catalogOverride.deleteMany({ where });
          if (n.count !== 1) throw conflict(RACED);
        } else if (next) {
          await tx.catalogOverride.create({ data: { slug, kind: next.kind, entry: next.entry as Prisma.InputJsonValue } });
        }
        await recordAudit(tx, actor, { action, targetType: "catalog_model", targetId: slug, details });
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict(RACED);
      throw err;
    }
    await catalog.refresh();
    await deps.bus?.publish(CATALOG_TOPIC, slug);
  }

  const mustView = (slug: string): CatalogEntryView => {
    const v = view(slug);
    if (!v) throw new Error(`catalog model ${slug} missing right after its change`);
    return v;
  };

  return {
    list: () => catalog.models().map((m) => ({ model: m, overridden: catalog.rows().some((r) => r.slug === m.slug && r.kind !== "remove") })),
    get: view,
    async putModel(actor, slug, body) {
      const existed = catalog.model(slug) !== undefined;
      await commit(actor, slug, existed ? "catalog.model.replace" : "catalog.model.add", (ctx) => addOrReplaceModel(ctx, slug, body), { model: body });
      return mustView(slug);
    },
    async changeEndpoint(actor, slug, provider, body) {
      await commit(actor, slug, "catalog.endpoint.update", (ctx) => changeEndpoint(ctx, slug, provider, body), { provider, changes: body });
      return mustView(slug);
    },
    async removeEndpoint(actor, slug, provider) {
      await commit(actor, slug, "catalog.endpoint.remove", (ctx) => removeEndpoint(ctx, slug, provider), { provider });
      return mustView(slug);
    },
    async removeModel(actor, slug) {
      await commit(actor, slug, "catalog.model.remove", (ctx) => removeModel(ctx, slug), {});
    },
  };
}
