/**
 * `portico admin intern …`: register interns and manage their host tokens. A host token is printed
 * only when it is issued (create, or revoke-token --issue); only its SHA-256 is stored.
 */
import type { Command } from "commander";
import type { Config } from "../config.js";
import { createInternRepository } from "../core/interns/intern-repository.js";
import type { AdminCommandRegistrar } from "./admin.js";
import { CliError, printJson, withDatabase, withServices } from "./shared.js";
import { cliActor } from "../core/audit/audit-log.js";

export const registerInternAdminCommands: AdminCommandRegistrar = (admin: Command, config: () => Config) => {
  const intern = admin.command("intern").description("interns (coding agents reached through an intern host)");

  intern
    .command("create")
    .description("register an intern; prints its id and a host token (shown once)")
    .requiredOption("--workspace <id>", "workspace id")
    .requiredOption("--name <name>", "intern name (2 to 17 lowercase letters, digits and dashes)")
    .option("--description <text>", "description")
    .option("--instructions <text>", "instructions handed to the agent at the start of every session")
    .option("--model <author/slug>", "model for the intern")
    .option("--json", "print JSON")
    .action(async (opts: { workspace: string; name: string; description?: string; instructions?: string; model?: string; json?: boolean }) => {
      const { view, hostToken } = await withServices(config(), async ({ db, interns }) => {
        const ws = await db.workspace.findFirst({ where: { id: opts.workspace, deletedAt: null } });
        if (!ws) throw new CliError("workspace not found");
        return interns.create(cliActor(ws.organizationId), ws.id, {
          name: opts.name,
          ...(opts.description !== undefined ? { description: opts.description } : {}),
          ...(opts.instructions !== undefined ? { instructions: opts.instructions } : {}),
          ...(opts.model !== undefined ? { model: opts.model } : {}),
        });
      });
      const row = view.intern;
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
      const token = await withServices(config(), async ({ db, interns }) => {
        const row = await db.intern.findUnique({ where: { id } });
        if (!row) throw new CliError("no intern with that id");
        const actor = cliActor(row.organizationId);
        if (opts.issue) return (await interns.issueHostToken(actor, row.workspaceId, id)).hostToken;
        await interns.revokeHostToken(actor, row.workspaceId, id);
        return null;
      });
      const out: Record<string, unknown> = { intern_id: id, revoked: true };
      if (token) out.host_token = token;
      if (opts.json) printJson(out);
      else process.stdout.write(token ? `token revoked; new host token (shown once): ${token}\n` : "token revoked\n");
    });

  for (const [name, description] of [
    ["suspend", "suspend an intern: hosts cannot attach and prompts are refused until provisioned"],
    ["provision", "resume a suspended intern"],
  ] as const) {
    intern
      .command(name)
      .description(description)
      .argument("<id>", "intern id")
      .option("--json", "print JSON")
      .action(async (id: string, opts: { json?: boolean }) => {
        await withServices(config(), async ({ db, interns }) => {
          const row = await db.intern.findUnique({ where: { id } });
          if (!row) throw new CliError("no intern with that id");
          await interns[name](cliActor(row.organizationId), row.workspaceId, id);
        });
        const done = name === "suspend" ? { suspended: true } : { provisioning: true };
        if (opts.json) printJson({ intern_id: id, ...done });
        else process.stdout.write(`intern ${id} ${name === "suspend" ? "suspended" : "resumed"}\n`);
      });
  }
};
