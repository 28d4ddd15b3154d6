/**
 * Writes a Portico catalog file (the PORTICO_CATALOG_FILE format, docs/catalog.md) from the price data set of
 * `@pydantic/genai-prices` (a devDependency), for an operator or a maintainer to REVIEW: the file is merged over
 * the built-in catalog only when someone puts it in PORTICO_CATALOG_FILE (or copies figures from it into
 * src/core/catalog/builtin-catalog.ts). Portico never reads the package at request time.
 *
 *   node bin/run-ts.mjs scripts/import-genai-prices.ts [--out FILE] [--as-of YYYY-MM-DD]
 *
 * What it does, per provider that has a Portico adapter (PROVIDERS below; the data set's other providers are
 * skipped and counted):
 * - every built-in endpoint of that provider is priced as genai-prices would price a request for its model id
 *   (the data set's first model whose `match` rule accepts the id, then its aliases): the output replaces that
 *   endpoint's `pricing` with the data set's, and names the source (the provider's price page the data set
 *   cites) and `as_of`;
 * - a chat model of a first-party provider (OpenAI, Anthropic, Google's Gemini/Gemma, DeepSeek, Mistral, xAI)
 *   that no built-in endpoint matches becomes a new model `<author>/<its id>` with its context window and the
 *   provider's data policy as the built-in endpoints state it; models of hosts (Groq, Together, Fireworks) that
 *   match no built-in endpoint are listed, not imported (their canonical author is not in the data);
 * - prices: `input_mtok` → `prompt`, `output_mtok` → `completion`, `cache_read_mtok` → `input_cache_read`,
 *   `cache_write_mtok` → `input_cache_write` (USD per million tokens → per token), `requests_kcount` →
 *   `request` (per thousand → per request); long-context tiers (`{base, tiers: [{start, price}]}`, which
 *   reprice the whole request) → `tiers` with `above_prompt_tokens`; prices that start later than `as_of` and
 *   time-of-day discount windows are left out (a time-of-day set covering most of the day is the standard
 *   price and is taken); units Portico does not bill (audio, 1-hour cache writes, web
 *   searches, …) are listed in the report.
 * - No floating point touches a price: each figure is the decimal the data set wrote (JavaScript's shortest
 *   round-trip form of the number, which is that literal) shifted by 6 (or 3) decimal places as text.
 *
 * The output is checked with the catalog loader (mergeCatalogs over the built-in catalog) before it is
 * written; the report (stderr) says what was updated, added, skipped and why.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { BUILTIN_CATALOG } from "../src/core/catalog/builtin-catalog.js";
import { mergeCatalogs } from "../src/core/catalog/catalog.js";
import type { CatalogFile, DataPolicy, Pricing, PriceTier } from "../src/core/catalog/types.js";

/** The data set's shapes (the package's own types, kept here so this file type-checks without it). */
type MatchLogic =
  | { and: MatchLogic[] }
  | { or: MatchLogic[] }
  | { contains: string }
  | { ends_with: string }
  | { equals: string }
  | { regex: string }
  | { starts_with: string };
type Tiered = { base: number; tiers: Array<{ start: number; price: number }> };
type ModelPrice = Record<string, number | Tiered | undefined>;
interface ConditionalPrice {
  constraint?: { type: "start_date"; start_date: string } | { type: "time_of_date"; start_time: string; end_time: string } | null;
  prices: ModelPrice;
}
export interface GenaiModel {
  id: string;
  name?: string;
  context_window?: number;
  deprecated?: boolean;
  match: MatchLogic;
  prices: ModelPrice | ConditionalPrice[];
}
export interface GenaiProvider {
  id: string;
  name: string;
  pricing_urls?: string[];
  models: GenaiModel[];
}

/** genai-prices provider id → Portico provider slug, and the canonical author of a new model of it (none: a host). */
export const PROVIDERS: Record<string, { slug: string; author?: (id: string) => string | undefined }> = {
  openai: { slug: "openai", author: () => "openai" },
  anthropic: { slug: "anthropic", author: () => "anthropic" },
  google: { slug: "google-ai-studio", author: (id) => (/^(gemini|gemma|learnlm)/.test(id) ? "google" : undefined) },
  deepseek: { slug: "deepseek", author: () => "deepseek" },
  mistral: { slug: "mistral", author: () => "mistralai" },
  "x-ai": { slug: "xai", author: () => "x-ai" },
  groq: { slug: "groq" },
  together: { slug: "together" },
  fireworks: { slug: "fireworks" },
};

/** Price keys Portico bills, per token (÷ 1e6) or per request (÷ 1e3). */
const PRICE_KEYS: Record<string, { field: "prompt" | "completion" | "input_cache_read" | "input_cache_write" | "request"; shift: number }> = {
  input_mtok: { field: "prompt", shift: 6 },
  output_mtok: { field: "completion", shift: 6 },
  cache_read_mtok: { field: "input_cache_read", shift: 6 },
  cache_write_mtok: { field: "input_cache_write", shift: 6 },
  requests_kcount: { field: "request", shift: 3 },
};

/** A number as the decimal literal it was written as (JavaScript's shortest round-trip form), without exponent. */
export function decimalOf(n: number): string {
  if (!Number.isFinite(n) || n < 0) throw new Error(`not a price: ${n}`);
  const s = String(n);
  const m = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(s);
  if (!m) throw new Error(`not a price: ${s}`);
  return shiftDecimal(`${m[1]}${m[2] ? `.${m[2]}` : ""}`, -Number(m[3] ?? 0));
}

/** `dec` ÷ 10^places, as exact decimal text (`shiftDecimal("2.5", 6)` = `"0.0000025"`; negative places multiply). */
export function shiftDecimal(dec: string, places: number): string {
  const m = /^(\d+)(?:\.(\d+))?$/.exec(dec);
  if (!m) throw new Error(`not a decimal: ${dec}`);
  let digits = m[1]! + (m[2] ?? "");
  let scale = (m[2]?.length ?? 0) + places;
  if (scale < 0) {
    digits += "0".repeat(-scale);
    scale = 0;
  }
  const padded = digits.padStart(scale + 1, "0");
  const int = padded.slice(0, padded.length - scale).replace(/^0+(?=\d)/, "");
  const frac = padded.slice(padded.length - scale).replace(/0+$/, "");
  return frac ? `${int}.${frac}` : int;
}

export function matches(logic: MatchLogic, id: string): boolean {
  if ("and" in logic) return logic.and.every((l) => matches(l, id));
  if ("or" in logic) return logic.or.some((l) => matches(l, id));
  if ("equals" in logic) return id === logic.equals;
  if ("starts_with" in logic) return id.startsWith(logic.starts_with);
  if ("ends_with" in logic) return id.endsWith(logic.ends_with);
  if ("contains" in logic) return id.includes(logic.contains);
  if ("regex" in logic) return new RegExp(logic.regex).test(id);
  return false;
}

/** Hours a time-of-day window covers (`"16:30:00Z"`–`"00:30:00Z"` is 8). */
function windowHours(start: string, end: string): number {
  const h = (t: string) => Number(t.slice(0, 2)) + Number(t.slice(3, 5)) / 60;
  return (h(end) - h(start) + 24) % 24 || 24;
}

/**
 * The prices in effect on `asOf`: the unconstrained ones, replaced by the latest `start_date` set not after it.
 * A time-of-day set that covers most of the day (more than 12 hours) is the standard price and replaces those
 * (the data set writes DeepSeek's off-peak discount as the unconstrained set); a shorter one is a discount
 * window, left out (Portico has no time-of-day prices) and noted.
 */
function pricesOn(model: GenaiModel, asOf: string, notes: string[]): ModelPrice {
  if (!Array.isArray(model.prices)) return model.prices;
  let chosen: ModelPrice | undefined;
  let chosenStart = "";
  let standard: ModelPrice | undefined;
  for (const c of model.prices) {
    if (!c.constraint) {
      if (chosenStart === "") chosen = c.prices;
    } else if (c.constraint.type === "start_date") {
      if (c.constraint.start_date <= asOf && c.constraint.start_date >= chosenStart) {
        chosen = c.prices;
        chosenStart = c.constraint.start_date;
      } else if (c.constraint.start_date > asOf) notes.push(`prices from ${c.constraint.start_date} not applied (after ${asOf})`);
    } else if (windowHours(c.constraint.start_time, c.constraint.end_time) > 12) {
      standard = c.prices;
      notes.push(`prices outside ${c.constraint.start_time}–${c.constraint.end_time} (a discount window) not modelled`);
    } else notes.push(`time-of-day prices ${c.constraint.start_time}–${c.constraint.end_time} not modelled`);
  }
  chosen = standard ?? chosen;
  if (!chosen) throw new Error(`${model.id}: no prices in effect on ${asOf}`);
  return chosen;
}

/** The data set's prices → Portico's pricing; undefined when prompt or completion is missing (not a chat model). */
export function pricingOf(model: GenaiModel, asOf: string, notes: string[]): Pricing | undefined {
  const prices = pricesOn(model, asOf, notes);
  const out: Record<string, string> = {};
  const tiers = new Map<number, PriceTier>();
  for (const [key, value] of Object.entries(prices)) {
    if (value === undefined) continue;
    const target = PRICE_KEYS[key];
    if (!target) {
      notes.push(`${key} not billed by Portico`);
      continue;
    }
    if (typeof value === "number") {
      out[target.field] = shiftDecimal(decimalOf(value), target.shift);
      continue;
    }
    out[target.field] = shiftDecimal(decimalOf(value.base), target.shift);
    if (target.field === "request") throw new Error(`${model.id}: tiered per-request price`);
    for (const t of value.tiers) {
      const tier = tiers.get(t.start) ?? { above_prompt_tokens: t.start };
      tier[target.field] = shiftDecimal(decimalOf(t.price), target.shift);
      tiers.set(t.start, tier);
    }
  }
  if (out["prompt"] === undefined || out["completion"] === undefined) return undefined;
  const pricing: Pricing = { prompt: out["prompt"], completion: out["completion"] };
  for (const f of ["input_cache_read", "input_cache_write", "request"] as const) if (out[f] !== undefined) pricing[f] = out[f];
  if (tiers.size) pricing.tiers = [...tiers.values()].sort((a, b) => a.above_prompt_tokens - b.above_prompt_tokens);
  return pricing;
}

export interface ImportReport {
  updated: string[];
  added: string[];
  skipped: string[];
  notes: string[];
}

/** The catalog file for review, from the data set's providers; `builtin` is the catalog the file will be merged over. */
export function importGenaiPrices(providers: GenaiProvider[], opts: { asOf: string; builtin?: CatalogFile }): { file: CatalogFile; report: ImportReport } {
  const builtin = opts.builtin ?? BUILTIN_CATALOG;
  const report: ImportReport = { updated: [], added: [], skipped: [], notes: [] };
  const patches = new Map<string, { slug: string; name?: string; context_length?: number; endpoints: any[] }>();
  for (const p of providers) {
    const target = PROVIDERS[p.id];
    if (!target) {
      report.skipped.push(`provider ${p.id} (${p.models.length} models): no Portico adapter`);
      continue;
    }
    const source = { url: p.pricing_urls?.[0] ?? `genai-prices provider ${p.id}`, as_of: opts.asOf };
    const taken = new Set<string>();
    const claimed = new Set<string>();
    let policy: DataPolicy | undefined;
    // Built-in endpoints of this provider, priced as genai-prices would price a request for their id.
    for (const m of builtin.models) {
      for (const e of m.endpoints) {
        if (e.provider !== target.slug) continue;
        policy ??= e.data_policy;
        const ids = [e.model_id, ...(e.aliases ?? [])];
        ids.forEach((id) => claimed.add(id));
        const bare = (id: string) => id.replace(/^accounts\/fireworks\/models\//, "");
        const found = ids.map(bare).map((id) => p.models.find((g) => matches(g.match, id))).find((g) => g !== undefined);
        if (!found) {
          report.skipped.push(`${m.slug} on ${target.slug} (${e.model_id}): not in the data set`);
          continue;
        }
        const notes: string[] = [];
        const pricing = pricingOf(found, opts.asOf, notes);
        if (!pricing) {
          report.skipped.push(`${m.slug} on ${target.slug}: ${found.id} has no prompt and completion prices`);
          continue;
        }
        taken.add(found.id);
        const patch = patches.get(m.slug) ?? { slug: m.slug, endpoints: [] };
        patch.endpoints.push({ provider: target.slug, pricing, source });
        patches.set(m.slug, patch);
        report.updated.push(`${m.slug} on ${target.slug} ← ${p.id}/${found.id}`);
        for (const n of new Set(notes)) report.notes.push(`${p.id}/${found.id}: ${n}`);
      }
    }
    // The data set's other chat models of a first-party provider: new models.
    for (const g of p.models) {
      if (taken.has(g.id)) continue;
      const author = target.author?.(g.id);
      const why =
        !target.author ? "a host's model that matches no built-in endpoint (canonical author unknown)" :
        author === undefined ? "not this provider's own model" :
        g.deprecated ? "deprecated" :
        claimed.has(g.id) ? "its id is a built-in model's id or alias" :
        g.context_window === undefined ? "no context window in the data set" :
        !/^[A-Za-z0-9][A-Za-z0-9._:-]*$/.test(g.id) ? "its id cannot be a slug" : undefined;
      if (why) {
        report.skipped.push(`${p.id}/${g.id}: ${why}`);
        continue;
      }
      const notes: string[] = [];
      const pricing = pricingOf(g, opts.asOf, notes);
      if (!pricing) {
        report.skipped.push(`${p.id}/${g.id}: no prompt and completion prices (not a chat model)`);
        continue;
      }
      const slug = `${author}/${g.id.toLowerCase()}`;
      if (patches.has(slug) || builtin.models.some((m) => m.slug === slug)) {
        report.skipped.push(`${p.id}/${g.id}: slug ${slug} already taken`);
        continue;
      }
      patches.set(slug, {
        slug,
        name: g.name ?? g.id,
        context_length: g.context_window,
        endpoints: [{ provider: target.slug, model_id: g.id, pricing, context_length: g.context_window, ...(policy ? { data_policy: policy } : {}), source }],
      });
      report.added.push(`${slug} on ${target.slug}`);
      for (const n of new Set(notes)) report.notes.push(`${p.id}/${g.id}: ${n}`);
    }
  }
  const file: CatalogFile = { version: 1, models: [...patches.values()].sort((a, b) => (a.slug < b.slug ? -1 : 1)) as any };
  // The loader's own rules: a file it would refuse is never written.
  mergeCatalogs(builtin, file, "genai-prices import");
  return { file, report };
}

async function main(argv: string[]): Promise<void> {
  const arg = (name: string) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const asOf = arg("--as-of") ?? new Date().toISOString().slice(0, 10);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(asOf)) throw new Error("--as-of must be YYYY-MM-DD");
  const out = arg("--out");
  // The package's exports map hides package.json: find it beside its entry point.
  const entry = createRequire(import.meta.url).resolve("@pydantic/genai-prices");
  const version = (JSON.parse(readFileSync(new URL("../package.json", pathToFileURL(entry)), "utf8")) as { version: string }).version;
  const genai = (await import("@pydantic/genai-prices")) as unknown as { findProvider(o: { providerId: string }): GenaiProvider | undefined };
  const providers = Object.keys(PROVIDERS).map((id) => genai.findProvider({ providerId: id })).filter((p): p is GenaiProvider => p !== undefined && Object.hasOwn(PROVIDERS, p.id));
  const { file, report } = importGenaiPrices(providers, { asOf });
  const text = `${JSON.stringify(file, null, 2)}\n`;
  if (out) writeFileSync(out, text);
  else process.stdout.write(text);
  const lines = [
    `@pydantic/genai-prices ${version}, prices as of ${asOf}: ${report.updated.length} built-in endpoints updated, ${report.added.length} models added, ${report.skipped.length} skipped`,
    ...report.updated.map((s) => `updated  ${s}`),
    ...report.added.map((s) => `added    ${s}`),
    ...report.skipped.map((s) => `skipped  ${s}`),
    ...report.notes.map((s) => `note     ${s}`),
  ];
  process.stderr.write(`${lines.join("\n")}\n`);
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`import-genai-prices: ${(err as Error).message}\n`);
    process.exit(1);
  });
}
