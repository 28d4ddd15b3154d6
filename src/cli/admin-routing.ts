/**
 * `portico admin routing …`: an organization's or workspace's account-wide routing settings
 * (docs/routing.md#account-wide-settings), through the same domain service as the API (audited as actor cli).
 *
 * - `show --org <id> [--workspace <id>]`;
 * - `set --org <id> [--workspace <id>] [--allowed-providers a,b|none] [--ignored-providers a,b|none]
 *   [--allowed-quantizations fp8,bf16|none] [--data-collection allow|deny] [--zdr true|false]` (options not given
 *   stay unchanged; `none` clears a list).
 * Running servers see a change at once when Redis is configured, otherwise within one second.
 */
import type { Command } from "commander";
import { ConnectError } from "@connectrpc/connect";
import type { Config } from "../config.js";
import { cliActor } from "../core/audit/audit-log.js";
import { ProviderRegistry } from "../core/chat/providers/index.js";
import {
  createRoutingSettingsService,
  ROUTING_SETTINGS_TOPIC,
  type RoutingSettingsPatch,
  type RoutingSettingsService,
  type StoredRoutingSettings,
} from "../core/routing-settings/routing-settings.js";
import { createInvalidationBus } from "../lib/invalidation.js";
import type { AdminCommandRegistrar } from "./admin.js";
import { CliError, printJson, withDatabase } from "./shared.js";

async function withRouting<T>(cfg: Config, fn: (s: RoutingSettingsService) => Promise<T>): Promise<T> {
  return withDatabase(cfg, async (h) => {
    const bus = createInvalidationBus(cfg);
    try {
      const names = new Map<string, string>();
      for (const p of new ProviderRegistry(cfg.providers).list()) {
        names.set(p.slug.toLowerCase(), p.slug);
        names.set(p.name.toLowerCase(), p.slug);
      }
      const service = createRoutingSettingsService({ db: h.db, providerSlug: (n) => names.get(n), onChanged: (org) => bus.publish(ROUTING_SETTINGS_TOPIC, org) });
      return await fn(service);
    } catch (err) {
      if (err instanceof ConnectError) throw new CliError(err.rawMessage);
      throw err;
    } finally {
      await bus.close();
    }
  });
}

const json = (s: StoredRoutingSettings) => ({
  organization_id: s.organizationId,
  workspace_id: s.workspaceId === "" ? null : s.workspaceId,
  allowed_providers: s.allowedProviders,
  ignored_providers: s.ignoredProviders,
  allowed_quantizations: s.allowedQuantizations,
  data_collection: s.dataCollection,
  zdr: s.zdr,
  updated_at: s.updatedAt?.toISOString() ?? null,
});

const text = (s: StoredRoutingSettings) =>
  [
    `${s.workspaceId === "" ? `organization ${s.organizationId}` : `workspace ${s.workspaceId}`}`,
    `  allowed_providers: ${s.allowedProviders?.join(", ") ?? "any"}`,
    `  ignored_providers: ${s.ignoredProviders?.join(", ") ?? "none"}`,
    `  allowed_quantizations: ${s.allowedQuantizations?.join(", ") ?? "any"}`,
    `  data_collection: ${s.dataCollection}`,
    `  zdr: ${s.zdr}`,
  ].join("\n");

const listOption = (v: string | undefined): string[] | null | undefined => {
  if (v === undefined) return undefined;
  if (v === "none") return null;
  return v.split(",").map((x) => x.trim()).filter((x) => x !== "");
};

export const registerRoutingAdminCommands: AdminCommandRegistrar = (admin: Command, config: () => Config) => {
  const routing = admin.command("routing").description("account-wide routing settings of an organization or a workspace");

  routing
    .command("show")
    .requiredOption("--org <id>", "organization id")
    .option("--workspace <id>", "a workspace of the organization (default: the organization's own settings)")
    .option("--json", "print JSON")
    .action(async (opts: { org: string; workspace?: string; json?: boolean }) => {
      const s = await withRouting(config(), (r) => r.get(opts.org, opts.workspace ?? ""));
      if (opts.json) printJson(json(s));
      else process.stdout.write(`${text(s)}\n`);
    });

  routing
    .command("set")
    .description("change the settings; options not given stay unchanged, `none` clears a list (audited)")
    .requiredOption("--org <id>", "organization id")
    .option("--workspace <id>", "a workspace of the organization (default: the organization's own settings)")
    .option("--allowed-providers <list>", "comma-separated provider slugs that alone may serve, or none")
    .option("--ignored-providers <list>", "comma-separated provider slugs that never serve, or none")
    .option("--allowed-quantizations <list>", "comma-separated quantizations that alone may serve, or none")
    .option("--data-collection <policy>", "allow or deny")
    .option("--zdr <bool>", "true or false")
    .option("--json", "print JSON")
    .action(
      async (opts: {
        org: string;
        workspace?: string;
        allowedProviders?: string;
        ignoredProviders?: string;
        allowedQuantizations?: string;
        dataCollection?: string;
        zdr?: string;
        json?: boolean;
      }) => {
        const patch: RoutingSettingsPatch = {};
        const allowed = listOption(opts.allowedProviders);
        const ignored = listOption(opts.ignoredProviders);
        const quant = listOption(opts.allowedQuantizations);
        if (allowed !== undefined) patch.allowedProviders = allowed;
        if (ignored !== undefined) patch.ignoredProviders = ignored;
        if (quant !== undefined) patch.allowedQuantizations = quant;
        if (opts.dataCollection !== undefined) patch.dataCollection = opts.dataCollection;
        if (opts.zdr !== undefined) {
          if (opts.zdr !== "true" && opts.zdr !== "false") throw new CliError("--zdr must be true or false");
          patch.zdr = opts.zdr === "true";
        }
        if (Object.keys(patch).length === 0) throw new CliError("nothing to change: give at least one setting");
        const s = await withRouting(config(), (r) => r.update(cliActor(opts.org), opts.org, opts.workspace ?? "", patch));
        if (opts.json) printJson(json(s));
        else process.stdout.write(`${text(s)}\n`);
      },
    );
};
