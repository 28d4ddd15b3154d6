/**
 * A model catalog file for a test (PORTICO_CATALOG_FILE): `{version: 1, models}` written to a fresh temporary
 * folder; returns its path.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export function writeCatalogFile(models: readonly object[]): string {
  const file = join(mkdtempSync(join(tmpdir(), "portico-catalog-")), "catalog.json");
  writeFileSync(file, JSON.stringify({ version: 1, models }));
  return file;
}
