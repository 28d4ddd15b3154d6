/**
 * The catalog a process serves from (docs/catalog.md, "Changing the catalog while it serves"): an immutable
 * snapshot of built-in < operator file < database overrides, swapped whole when the overrides change.
 *
 * - A change committed in this process swaps the snapshot before the write answers (`refresh()`).
 * - A change made by another process (another core, `portico admin catalog`) is announced on the invalidation
 *   bus (`CATALOG_TOPIC`); every process re-reads the overrides at once.
 * - Pub/sub can lose a message, so every process also re-reads them every `refreshMs`
 *   (PORTICO_CATALOG_REFRESH_MS, default 1000): a lost message heals within that bound.
 *
 * Reads are synchronous map lookups on the current snapshot; a re-read that finds the same rows builds nothing.
 */
import type { Db } from "../../db/client.js";
import type { InvalidationBus } from "../../lib/invalidation.js";
import { createCatalog, type Catalog, type CatalogFile } from "./catalog.js";
import { applyOverrides, type OverrideKind, type OverrideRow } from "./overrides.js";

/** The bus topic on which catalog changes are announced (key: the changed slug). */
export const CATALOG_TOPIC = "catalog";

export interface LiveCatalog extends Catalog {
  /** The built-in catalog with the operator file merged over it (the overrides' base). */
  readonly base: CatalogFile;
  /** The stored overrides the current snapshot was built from. */
  rows(): readonly OverrideRow[];
  /** Re-reads the overrides and swaps the snapshot if they changed. */
  refresh(): Promise<void>;
  close(): void;
}

/** Every stored override, by slug. */
export async function readOverrides(db: Db): Promise<OverrideRow[]> {
  const rows = await db.catalogOverride.findMany({ orderBy: { slug: "asc" } });
  return rows.map((r) => ({ slug: r.slug, kind: r.kind as OverrideKind, entry: r.entry as unknown as OverrideRow["entry"] }));
}

export function createLiveCatalog(deps: {
  base: CatalogFile;
  db: Db;
  bus?: InvalidationBus;
  refreshMs: number;
  logger?: { warn(obj: object, msg: string): void };
}): LiveCatalog {
  const build = (rows: readonly OverrideRow[]) =>
    createCatalog(applyOverrides(deps.base, rows, (slug, problem) => deps.logger?.warn({ slug, problem }, "a catalog override no longer applies; it is skipped")));
  let snapshot = { rows: [] as readonly OverrideRow[], fingerprint: "[]", catalog: createCatalog(deps.base) };
  // Reads started later win: a slow read never replaces a newer snapshot.
  let started = 0;
  let applied = 0;

  const refresh = async (): Promise<void> => {
    const mine = ++started;
    const rows = await readOverrides(deps.db);
    if (mine < applied) return;
    applied = mine;
    const fingerprint = JSON.stringify(rows);
    if (fingerprint === snapshot.fingerprint) return;
    snapshot = { rows, fingerprint, catalog: build(rows) };
  };
  const quietly = () =>
    void refresh().catch((err: unknown) => deps.logger?.warn({ err: (err as Error).message }, "the catalog overrides cannot be read; the catalog is kept as it was"));

  const unsubscribe = deps.bus?.subscribe(CATALOG_TOPIC, quietly);
  const timer = deps.refreshMs > 0 ? setInterval(quietly, deps.refreshMs) : undefined;
  timer?.unref();

  // Every read method of the snapshot's catalog, delegated to whichever snapshot is current.
  const live = {} as Record<string, unknown>;
  for (const [name, fn] of Object.entries(snapshot.catalog)) {
    if (typeof fn === "function") live[name] = (...args: unknown[]) => (snapshot.catalog as unknown as Record<string, (...a: unknown[]) => unknown>)[name]!(...args);
  }
  return Object.assign(live as unknown as Catalog, {
    base: deps.base,
    rows: () => snapshot.rows,
    refresh,
    close() {
      unsubscribe?.();
      if (timer) clearInterval(timer);
    },
  });
}
