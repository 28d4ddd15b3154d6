/**
 * `portico admin …`: operator tasks run directly against the configured database, so multi-tenant,
 * non-programme, deleted-default-workspace and departed-creator situations can be set up from a script.
 * Plaintext keys are printed only when they are created.
 */
import { registerRoutingAdminCommands } from "./admin-routing.js";
import type { Command } from "commander";
import type { Config } from "../config.js";
import { bootstrap } from "../core/identity/bootstrap.js";
import { createIdentityRepository } from "../core/identity/identity-repository.js";
import { bootstrapExtensions } from "./bootstrap-extensions.js";
import { registerInternAdminCommands } from "./admin-interns.js";
import { CliError, printJson, withDatabase, withServices } from "./shared.js";
import { cliActor, recordAudit } from "../core/audit/audit-log.js";
import type { Db } from "../db/client.js";
import { registerByokAdminCommands } from "./admin-byok.js";
import { registerProviderKeyAdminCommands } from "./admin-provider-keys.js";
import { femtoOfUsd } from "../contract/money.js";
import type { KeysService } from "../core/keys/keys-service.js";
import type { WorkspacesService } from "../core/workspaces/workspaces-service.js";
import { registerCatalogAdminCommands } from "./admin-catalog.js";

export type AdminCommandRegistrar = (admin: Command, config: () => Config) => void;

/** Other domains (interns, BYOK) add their admin subcommands here. */
export const adminRegistrars: AdminCommandRegistrar[] = [
  registerInternAdminCommands,
  registerByokAdminCommands,
  registerProviderKeyAdminCommands,
  registerCatalogAdminCommands,
  registerRoutingAdminCommands,
];

function out(json: boolean | undefined, value: Record<string, unknown>, text: string): void {
  if (json) printJson(value);
  else process.stdout.write(`${text}\n`);
}

/** A live (not revoked) key by id or hash, for the commands that accept either. */
async function findKey(db: Db, idOrHash: string) {
  const k = await db.apiKey.findFirst({ where: { OR: [{ id: idOrHash }, { hash: idOrHash }], revokedAt: null } });
  if (!k) throw new CliError("no active key with that id or hash");
  return k;
}

export function registerAdminCommands(program: Command, config: () => Config): void {
  const admin = program.command("admin").description("operator tasks on the configured database");

  admin
    .command("bootstrap")
    .description("create (idempotently) an organization, admin user, default workspace and keys")
    .option("--json", "print JSON")
    .action(async (opts: { json?: boolean }) => {
      const cfg = config();
      const result = await withDatabase(cfg, (h) => bootstrap(h.db, bootstrapExtensions(cfg)));
      out(opts.json, result, Object.entries(result).map(([k, v]) => `${k}: ${v}`).join("\n"));
    });

  const org = admin.command("org").description("organizations");
  org
    .command("create")
    .description("create an organization with an admin user, a default workspace and a management key")
    .requiredOption("--name <name>", "organization name")
    .option("--interns", "member of the interns programme", false)
    .option("--admin-email <email>", "email of the admin user (default: admin@<random>.invalid)")
    .option("--json", "print JSON")
    .action(async (opts: { name: string; interns: boolean; adminEmail?: string; json?: boolean }) => {
      const result = await withServices(config(), async ({ db, workspaces, keys }) => {
        const organization = await createIdentityRepository(db).createOrganization({ name: opts.name, internsProgramme: opts.interns });
        const actor = cliActor(organization.id);
        await recordAudit(db, actor, {
          action: "organization.create",
          targetType: "organization",
          targetId: organization.id,
          details: { name: organization.name, interns_programme: organization.internsProgramme },
        });
        const user = await workspaces.addOrganizationMember(actor, opts.adminEmail ?? `admin@${organization.id}.invalid`, "admin");
        const workspace = await workspaces.create(actor, { name: "Default", slug: "default", isDefault: true, createdBy: user.id });
        const mgmt = await keys.create(actor, { name: "management", workspaceId: workspace.id, isManagement: true, creatorUserId: user.id });
        return {
          organization_id: organization.id,
          workspace_id: workspace.id,
          user_id: user.id,
          interns_programme: organization.internsProgramme,
          management_key: mgmt.plaintext,
          management_key_hash: mgmt.record.hash,
        };
      });
      out(opts.json, result, `organization ${result.organization_id} created; management key: ${result.management_key}`);
    });

  const ws = admin.command("workspace").description("workspaces");
  ws.command("create")
    .requiredOption("--org <id>", "organization id")
    .requiredOption("--name <name>", "workspace name")
    .option("--slug <slug>", "workspace slug")
    .option("--description <text>", "workspace description")
    .option("--json", "print JSON")
    .action(async (opts: { org: string; name: string; slug?: string; description?: string; json?: boolean }) => {
      const w = await withServices(config(), ({ workspaces }) =>
        workspaces.create(cliActor(opts.org), { name: opts.name, slug: opts.slug, description: opts.description, createdBy: null }),
      );
      out(opts.json, { workspace_id: w.id, organization_id: w.organizationId, slug: w.slug }, `workspace ${w.id}`);
    });
  ws.command("delete")
    .argument("<id>", "workspace id")
    .option("--force", "delete even while the workspace holds active keys", false)
    .option("--json", "print JSON")
    .action(async (id: string, opts: { force: boolean; json?: boolean }) => {
      await withServices(config(), async ({ db, workspaces }) => {
        const w = await db.workspace.findUnique({ where: { id } });
        if (!w) throw new CliError("workspace not found or already deleted");
        await workspaces.delete(cliActor(w.organizationId), id, { force: opts.force });
      });
      out(opts.json, { deleted: true, workspace_id: id }, `workspace ${id} deleted`);
    });

  const key = admin.command("key").description("API keys");
  key
    .command("create")
    .requiredOption("--org <id>", "organization id")
    .requiredOption("--workspace <id>", "workspace id")
    .requiredOption("--user <id>", "creator user id")
    .option("--name <name>", "key name", "key")
    .option("--management", "management key", false)
    .option("--json", "print JSON")
    .action(
      async (opts: { org: string; workspace: string; user: string; name: string; management: boolean; json?: boolean }) => {
        const { record, plaintext } = await withServices(config(), ({ keys }) =>
          keys.create(cliActor(opts.org), {
            name: opts.name,
            workspaceId: opts.workspace,
            isManagement: opts.management,
            creatorUserId: opts.user,
          }),
        );
        out(
          opts.json,
          { id: record.id, key: plaintext, hash: record.hash, label: record.label, is_management_key: record.isManagement },
          `key ${record.label} created: ${plaintext}`,
        );
      },
    );
  key
    .command("list")
    .option("--org <id>", "organization id")
    .option("--json", "print JSON")
    .action(async (opts: { org?: string; json?: boolean }) => {
      const keys = await withDatabase(config(), (h) => createIdentityRepository(h.db).listApiKeys(opts.org));
      const rows = keys.map((k) => ({
        id: k.id,
        hash: k.hash,
        label: k.label,
        name: k.name,
        is_management_key: k.isManagement,
        organization_id: k.organizationId,
        workspace_id: k.workspaceId,
        creator_user_id: k.creatorUserId,
        disabled: k.disabled,
        revoked: k.revokedAt !== null,
      }));
      if (opts.json) printJson({ data: rows });
      else for (const r of rows) process.stdout.write(`${r.id} ${r.hash} ${r.label} ${r.name}${r.is_management_key ? " (management)" : ""}${r.disabled ? " (disabled)" : ""}${r.revoked ? " (revoked)" : ""}\n`);
    });
  key
    .command("revoke")
    .argument("<idOrHash>", "key id or hash")
    .option("--json", "print JSON")
    .action(async (idOrHash: string, opts: { json?: boolean }) => {
      await withServices(config(), async ({ db, keys }) => {
        const k = await findKey(db, idOrHash);
        await keys.revoke(cliActor(k.organizationId), k.hash);
      });
      out(opts.json, { revoked: true }, "key revoked");
    });
  const setDisabled = async (idOrHash: string, disabled: boolean, json: boolean | undefined) => {
    const k = await withServices(config(), async ({ db, keys }) => {
      const found = await findKey(db, idOrHash);
      await keys.update(cliActor(found.organizationId), found.hash, { disabled });
      return found;
    });
    out(json, { disabled, hash: k.hash, label: k.label }, `key ${k.label} ${disabled ? "disabled" : "enabled"}`);
  };
  key
    .command("disable")
    .description("refuse the key from the next request on (reversible with `key enable`)")
    .argument("<idOrHash>", "key id or hash")
    .option("--enable", "enable instead (same as `key enable`)", false)
    .option("--json", "print JSON")
    .action((idOrHash: string, opts: { enable: boolean; json?: boolean }) => setDisabled(idOrHash, !opts.enable, opts.json));
  key
    .command("enable")
    .description("accept a disabled key again, for example the management key disabled from the console")
    .argument("<idOrHash>", "key id or hash (`key list` shows both)")
    .option("--json", "print JSON")
    .action((idOrHash: string, opts: { json?: boolean }) => setDisabled(idOrHash, false, opts.json));

  /** `none` / `never` clear a bound; a USD figure, a count or an ISO time set it. */
  const usdOpt = (v: string | undefined) => {
    if (v === undefined) return undefined;
    if (v === "none") return null;
    const f = femtoOfUsd(Number(v));
    if (f === undefined || !/^\d+(\.\d+)?$/.test(v)) throw new CliError(`not an amount of US dollars: ${v}`);
    return f;
  };
  const countOpt = (v: string | undefined) => (v === undefined ? undefined : v === "none" ? null : /^\d+$/.test(v) ? Number(v) : Number.NaN);
  const timeOpt = (v: string | undefined) => (v === undefined ? undefined : v === "never" ? null : new Date(v));
  key
    .command("limits")
    .description("set a key's spend limit, its reset window, its expiry and its request/token rates (docs/limits.md)")
    .argument("<idOrHash>", "key id or hash")
    .option("--limit <usd>", "spend limit in US dollars, or `none`")
    .option("--reset <window>", "daily, weekly, monthly or none")
    .option("--expires <time>", "ISO 8601 time the key stops working, or `never`")
    .option("--rpm <n>", "chat requests per minute, or `none`")
    .option("--tpm <n>", "tokens per minute, or `none`")
    .option("--json", "print JSON")
    .action(async (idOrHash: string, opts: { limit?: string; reset?: string; expires?: string; rpm?: string; tpm?: string; json?: boolean }) => {
      const changes: Parameters<KeysService["update"]>[2] = {};
      const limit = usdOpt(opts.limit);
      if (limit !== undefined) changes.limitFemtoUsd = limit;
      if (opts.reset !== undefined) changes.limitReset = opts.reset;
      const expires = timeOpt(opts.expires);
      if (expires !== undefined) changes.expiresAt = expires;
      const rpm = countOpt(opts.rpm);
      if (rpm !== undefined) changes.rateLimitRpm = rpm;
      const tpm = countOpt(opts.tpm);
      if (tpm !== undefined) changes.rateLimitTpm = tpm;
      const k = await withServices(config(), async ({ db, keys }) => {
        const found = await findKey(db, idOrHash);
        return keys.update(cliActor(found.organizationId), found.hash, changes);
      });
      const row = {
        hash: k.hash,
        limit: k.limitFemtoUsd === null ? null : Number(k.limitFemtoUsd) / 1e15,
        limit_reset: k.limitReset,
        expires_at: k.expiresAt?.toISOString() ?? null,
        rate_limit_rpm: k.rateLimitRpm,
        rate_limit_tpm: k.rateLimitTpm,
      };
      out(opts.json, row, `key ${k.label}: limit ${row.limit ?? "none"} (${row.limit_reset}), expires ${row.expires_at ?? "never"}, rpm ${row.rate_limit_rpm ?? "none"}, tpm ${row.rate_limit_tpm ?? "none"}`);
    });
  ws
    .command("limits")
    .description("set a workspace's spend budget, its reset window and its request/token rates (docs/limits.md)")
    .argument("<id>", "workspace id")
    .option("--budget <usd>", "spend budget in US dollars, or `none`")
    .option("--reset <window>", "daily, weekly, monthly or none")
    .option("--rpm <n>", "chat requests per minute, or `none`")
    .option("--tpm <n>", "tokens per minute, or `none`")
    .option("--cache-ttl <seconds>", "the response cache's time to live for requests without `cache` (docs/operations.md), or `none` (off)")
    .option("--content-log-days <days>", "keep request and response bodies encrypted this many days (docs/operations.md, \"Content logging\"), or `none` (off)")
    .option("--json", "print JSON")
    .action(async (id: string, opts: { budget?: string; reset?: string; rpm?: string; tpm?: string; cacheTtl?: string; contentLogDays?: string; json?: boolean }) => {
      const changes: Parameters<WorkspacesService["update"]>[2] = {};
      const budget = usdOpt(opts.budget);
      if (budget !== undefined) changes.budgetFemtoUsd = budget;
      if (opts.reset !== undefined) changes.budgetReset = opts.reset;
      const rpm = countOpt(opts.rpm);
      if (rpm !== undefined) changes.rateLimitRpm = rpm;
      const tpm = countOpt(opts.tpm);
      if (tpm !== undefined) changes.rateLimitTpm = tpm;
      const cacheTtl = countOpt(opts.cacheTtl);
      if (cacheTtl !== undefined) changes.responseCacheTtlSeconds = cacheTtl;
      const contentDays = countOpt(opts.contentLogDays);
      if (contentDays !== undefined) changes.contentLogRetentionDays = contentDays;
      const w = await withServices(config(), async ({ db, workspaces }) => {
        const found = await db.workspace.findFirst({ where: { id, deletedAt: null } });
        if (!found) throw new CliError("workspace not found");
        return workspaces.update(cliActor(found.organizationId), id, changes);
      });
      const row = {
        id: w.id,
        budget: w.budgetFemtoUsd === null ? null : Number(w.budgetFemtoUsd) / 1e15,
        budget_reset: w.budgetReset,
        rate_limit_rpm: w.rateLimitRpm,
        rate_limit_tpm: w.rateLimitTpm,
        response_cache_ttl_seconds: w.responseCacheTtlSeconds,
        content_log_retention_days: w.contentLogRetentionDays,
      };
      out(
        opts.json,
        row,
        `workspace ${w.id}: budget ${row.budget ?? "none"} (${row.budget_reset}), rpm ${row.rate_limit_rpm ?? "none"}, tpm ${row.rate_limit_tpm ?? "none"}, cache ttl ${row.response_cache_ttl_seconds ?? "none"}, content log days ${row.content_log_retention_days ?? "none"}`,
      );
    });

  const member = admin.command("member").description("organization memberships");
  member
    .command("add")
    .requiredOption("--org <id>", "organization id")
    .requiredOption("--email <email>", "user email")
    .option("--json", "print JSON")
    .action(async (opts: { org: string; email: string; json?: boolean }) => {
      const user = await withServices(config(), ({ workspaces }) => workspaces.addOrganizationMember(cliActor(opts.org), opts.email));
      const result = { user_id: user.id, organization_id: opts.org };
      out(opts.json, result, `user ${result.user_id} added`);
    });
  member
    .command("remove")
    .requiredOption("--org <id>", "organization id")
    .requiredOption("--user <id>", "user id")
    .option("--json", "print JSON")
    .action(async (opts: { org: string; user: string; json?: boolean }) => {
      await withServices(config(), ({ workspaces }) => workspaces.removeOrganizationMember(cliActor(opts.org), opts.user));
      out(opts.json, { removed: true }, "member removed");
    });

  for (const register of adminRegistrars) register(admin, config);
}
