/**
 * `portico admin catalog …`: the model catalog as the servers on this database serve it, and changes to it
 * through the same domain service as the management API (src/core/catalog/catalog-management.ts): the same
 * rules, audited with actor `cli` in the organization `--org` (default: the first organization).
 *
 * - `list [--json]`, `show <slug>`;
 * - `put <slug> [--file <model.json>]` adds or replaces a model (the catalog file's format; standard input without --file);
 * - `endpoint <slug> <provider> [--prompt <usd>] [--completion <usd>] [--status <s>] [--set <json>]` changes (or adds) an endpoint;
 * - `remove-endpoint <slug> <provider>`, `remove <slug>`.
 *
 * Running servers see a change at once when Redis is configured, otherwise within PORTICO_CATALOG_REFRESH_MS (1 s).
 */
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { ConnectError } from "@connectrpc/connect";
import type { Config } from "../config.js";
import { cliActor, type Actor } from "../core/audit/audit-log.js";
import { loadCatalogFile, type CatalogModel } from "../core/catalog/catalog.js";
import { createCatalogManagement, type CatalogManagement } from "../core/catalog/catalog-management.js";
import { createLiveCatalog } from "../core/catalog/live-catalog.js";
import { servedBy } from "../core/catalog/providers.js";
import { ProviderRegistry } from "../core/chat/providers/index.js";
import { createInvalidationBus } from "../lib/invalidation.js";
import { errorDetailOf } from "../lib/service-error.js";
import type { AdminCommandRegistrar } from "./admin.js";
import { CliError, printJson, withDatabase } from "./shared.js";

async function withCatalog<T>(cfg: Config, org: string | undefined, fn: (m: CatalogManagement, actor: Actor) => Promise<T>): Promise<T> {
  const base = loadCatalogFile(cfg.catalogFile);
  return withDatabase(cfg, async (h) => {
    const organization = org ?? (await h.db.organization.findFirst({ orderBy: { createdAt: "asc" }, select: { id: true } }))?.id;
    if (!organization) throw new CliError("no organization yet: run `portico admin bootstrap` first");
    const bus = createInvalidationBus(cfg);
    const catalog = createLiveCatalog({ base, db: h.db, refreshMs: 0 });
    try {
      await catalog.refresh();
      return await fn(createCatalogManagement({ db: h.db, catalog, serves: servedBy(new ProviderRegistry(cfg.providers)), bus }), cliActor(organization));
    } catch (err) {
      if (err instanceof ConnectError) {
        const field = errorDetailOf(err)?.field;
        throw new CliError(field ? `${err.rawMessage} (${field})` : err.rawMessage);
      }
      throw err;
    } finally {
      catalog.close();
      await bus.close();
    }
  });
}

function line(m: CatalogModel, overridden: boolean): string {
  const eps = m.endpoints.map((e) => `${e.provider}:${e.model_id} ${e.pricing.prompt}/${e.pricing.completion}${e.status !== "active" ? ` (${e.status})` : ""}`);
  return `${m.slug}${overridden ? " *" : ""}  ${m.name}  [${eps.join(", ")}]`;
}

function readJson(file: string | undefined): unknown {
  let text: string;
  try {
    text = readFileSync(file ?? 0, "utf8");
  } catch (err) {
    throw new CliError(`cannot read ${file ?? "standard input"}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CliError(`${file ?? "standard input"} is not JSON: ${(err as Error).message}`);
  }
}

export const registerCatalogAdminCommands: AdminCommandRegistrar = (admin: Command, config: () => Config) => {
  const cat = admin.command("catalog").description("the model catalog: list it, add, change and remove models and endpoints (audited; servers follow within a second)");
  const orgOption = ["--org <id>", "organization the change is audited in (default: the first organization)"] as const;

  cat.command("list")
    .description("every model as served (* = changed through the API or this command)")
    .option("--json", "print JSON")
    .action(async (opts: { json?: boolean }) => {
      const rows = await withCatalog(config(), undefined, async (m) => m.list());
      if (opts.json) printJson({ data: rows.map((r) => ({ ...r.model, overridden: r.overridden })) });
      else for (const r of rows) process.stdout.write(`${line(r.model, r.overridden)}\n`);
    });

  cat.command("show")
    .argument("<slug>", "canonical slug <author>/<model>")
    .action(async (slug: string) => {
      const v = await withCatalog(config(), undefined, async (m) => m.get(slug));
      if (!v) throw new CliError(`no model ${slug} in the catalog`);
      printJson({ ...v.model, overridden: v.overridden });
    });

  cat.command("put")
    .description("add a model, or replace it whole (the catalog file's format; standard input without --file)")
    .argument("<slug>", "canonical slug <author>/<model>")
    .option("--file <path>", "the model as JSON")
    .option(...orgOption)
    .option("--json", "print JSON")
    .action(async (slug: string, opts: { file?: string; org?: string; json?: boolean }) => {
      const body = readJson(opts.file);
      const v = await withCatalog(config(), opts.org, (m, actor) => m.putModel(actor, slug, body));
      if (opts.json) printJson({ ...v.model, overridden: v.overridden });
      else process.stdout.write(`${line(v.model, v.overridden)}\n`);
    });

  cat.command("endpoint")
    .description("change a model's endpoint (or add the provider's endpoint)")
    .argument("<slug>", "canonical slug <author>/<model>")
    .argument("<provider>", "provider slug")
    .option("--prompt <usd>", "prompt price, USD per token (the other prices are kept)")
    .option("--completion <usd>", "completion price, USD per token (the other prices are kept)")
    .option("--status <status>", "active, deprecated or disabled")
    .option("--set <json>", 'other fields in the catalog file\'s endpoint format, e.g. \'{"context_length": 65536}\'')
    .option(...orgOption)
    .option("--json", "print JSON")
    .action(async (slug: string, provider: string, opts: { prompt?: string; completion?: string; status?: string; set?: string; org?: string; json?: boolean }) => {
      let changes: Record<string, unknown> = {};
      if (opts.set !== undefined) {
        try {
          changes = JSON.parse(opts.set) as Record<string, unknown>;
        } catch (err) {
          throw new CliError(`--set is not JSON: ${(err as Error).message}`);
        }
      }
      if (opts.status !== undefined) changes.status = opts.status;
      const v = await withCatalog(config(), opts.org, async (m, actor) => {
        if (opts.prompt !== undefined || opts.completion !== undefined) {
          const current = m.get(slug)?.model.endpoints.find((e) => e.provider === provider)?.pricing;
          changes.pricing = { ...(current ?? {}), ...(changes.pricing as object | undefined), ...(opts.prompt !== undefined ? { prompt: opts.prompt } : {}), ...(opts.completion !== undefined ? { completion: opts.completion } : {}) };
        }
        return m.changeEndpoint(actor, slug, provider, changes);
      });
      if (opts.json) printJson({ ...v.model, overridden: v.overridden });
      else process.stdout.write(`${line(v.model, v.overridden)}\n`);
    });

  cat.command("remove-endpoint")
    .argument("<slug>", "canonical slug <author>/<model>")
    .argument("<provider>", "provider slug")
    .option(...orgOption)
    .action(async (slug: string, provider: string, opts: { org?: string }) => {
      const v = await withCatalog(config(), opts.org, (m, actor) => m.removeEndpoint(actor, slug, provider));
      process.stdout.write(`${line(v.model, v.overridden)}\n`);
    });

  cat.command("remove")
    .argument("<slug>", "canonical slug <author>/<model>")
    .option(...orgOption)
    .action(async (slug: string, opts: { org?: string }) => {
      await withCatalog(config(), opts.org, (m, actor) => m.removeModel(actor, slug));
      process.stdout.write(`model ${slug} removed from the catalog\n`);
    });
};
