/**
 * `portico admin intern …`: register interns and manage their host tokens. A host token is printed
 * only when it is issued (create, or revoke-token --issue); only its SHA-256 is stored.
 */
import type { Command } from "commander";
import type { Config } from "../config.js";
import { createInternRepository, InternRegistryError } from "../core/interns/intern-repository.js";
import type { AdminCommandRegistrar } from "./admin.js";
import { CliError, printJson, withDatabase } from "./shared.js";

function fail(err: unknown): never {
  if (err instanceof InternRegistryError) throw new CliError(err.message);
  throw err;
}

export const registerInternAdminCommands: AdminCommandRegistrar = (admin: Command, config: () => Config) => {
  const intern = admin.command("intern").description("interns (coding agents reached through an intern host)");

  intern
    .command("create")
    .description("register an intern; prints its id and a host token (shown once)")
    .requiredOption("--workspace <id>", "workspace id")
    .requiredOption("--name <name>", "intern name (lowercase letters, digits, dashes)")
    .option("--json", "print JSON")
    .action(async (opts: { workspace: string; name: string; json?: boolean }) => {
      const { intern: row, hostToken } = await withDatabase(config(), (h) =>
        createInternRepository(h.db).createIntern({ workspaceId: opts.workspace, name: opts.name }).catch(fail),
      );
      const out = { intern_id: row.id, name: row.name, workspace_id: row.workspaceId, host_token: hostToken };
      if (opts.json) printJson(out);
      else process.stdout.write(`intern ${row.id} created\nhost token (shown once): ${hostToken}\n`);
    });

  intern
    .command("list")
    .description("list interns and whether a host is attached")
    .option("--workspace <id>", "only this workspace")
    .option("--json", "print JSON")
    .action(async (opts: { workspace?: string; json?: boolean }) => {
      const rows = await withDatabase(config(), (h) => createInternRepository(h.db).listInterns(opts.workspace));
      const data = rows.map((r) => ({
        id: r.id,
        name: r.name,
        workspace_id: r.workspaceId,
        organization_id: r.organizationId,
        status: r.status,
        model: r.model,
        has_host_token: r.hostTokenHash !== null,
        host_instance: r.hostInstance,
        created_at: r.createdAt.toISOString(),
        updated_at: r.updatedAt.toISOString(),
      }));
      if (opts.json) printJson({ data });
      else for (const r of data) process.stdout.write(`${r.id} ${r.name} ${r.status}${r.has_host_token ? "" : " (no token)"}\n`);
    });

  intern
    .command("revoke-token")
    .description("revoke an intern's host token (new attaches are refused); --issue prints a replacement once")
    .argument("<id>", "intern id")
    .option("--issue", "issue a new host token", false)
    .option("--json", "print JSON")
    .action(async (id: string, opts: { issue: boolean; json?: boolean }) => {
      const token = await withDatabase(config(), (h) => createInternRepository(h.db).revokeHostToken(id, opts.issue).catch(fail));
      const out: Record<string, unknown> = { intern_id: id, revoked: true };
      if (token) out.host_token = token;
      if (opts.json) printJson(out);
      else process.stdout.write(token ? `token revoked; new host token (shown once): ${token}\n` : "token revoked\n");
    });
};
