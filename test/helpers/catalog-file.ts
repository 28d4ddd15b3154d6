/**
 * A model catalog file for a test (PORTICO_CATALOG_FILE): `{version: 1, models}` written to a fresh temporary
 * folder; returns its path.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Endpoint } from "../../src/core/catalog/types.js";

export function writeCatalogFile(models: readonly object[]): string {
  const file = join(mkdtempSync(join(tmpdir(), "portico-catalog-")), "catalog.json");
  writeFileSync(file, JSON.stringify({ version: 1, models }));
  return file;
}

/** A catalog endpoint for unit tests: priced, 8,192 tokens of context, 1,000 of output; `over` replaces fields. */
export function testEndpoint(over: Partial<Endpoint> = {}): Endpoint {
  return {
    provider: "p",
    model_id: "m",
    pricing: { prompt: "0.000001", completion: "0.000002" },
    context_length: 8192,
    max_completion_tokens: 1000,
    quantization: "unknown",
    data_policy: { training: false, retains_prompts: true },
    zdr: false,
    status: "active",
    source: { url: "x", as_of: "2025-10-01" },
    ...over,
  };
}
