import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAuditLog } from "../../../src/core/audit/audit-log.js";
import { openDatabase } from "../../../src/db/client.js";
import { runPortico } from "../../helpers/cli.js";

const dir = mkdtempSync(join(tmpdir(), "portico-cli-audit-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("portico admin writes through the management services", () => {
  it("audits workspace and key changes made on the command line as actor cli, and applies the same rules", async () => {
    const env = { PORTICO_DATA_DIR: dir };
    const run = async (...args: string[]) => {
      const r = await runPortico(["admin", ...args, "--json"], env);
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout);
    };
    const org = await run("org", "create", "--name", "audited");
    const ws = await run("workspace", "create", "--org", org.organization_id, "--name", "Ops Team");
    expect(ws.slug).toBe("ops-team");
    const key = await run("key", "create", "--org", org.organization_id, "--workspace", ws.workspace_id, "--user", org.user_id, "--name", "deploy");
    await run("key", "disable", key.hash);
    const intern = await run("intern", "create", "--workspace", org.workspace_id, "--name", "cli-bot", "--instructions", "be brief");
    await run("intern", "suspend", intern.intern_id);
    const badName = await runPortico(["admin", "intern", "create", "--workspace", org.workspace_id, "--name", "Bad_Name"], env);
    expect(badName.code).not.toBe(0);
    expect(badName.stderr).toMatch(/name must be 2 to 17/);

    // The same rules as the API: a workspace still holding keys is not deleted without --force.
    const refused = await runPortico(["admin", "workspace", "delete", ws.workspace_id], env);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/active API key/);
    await run("workspace", "delete", ws.workspace_id, "--force");

    const db = await openDatabase({ dataDir: dir, migrate: false });
    try {
      const { items } = await createAuditLog(db.db).list(org.organization_id, { offset: 0, limit: 100 });
      const actions = items.map((e) => e.action);
      expect(actions).toEqual(
        expect.arrayContaining(["organization.create", "workspace.create", "key.create", "key.update", "workspace.delete", "intern.create", "intern.suspend"]),
      );
      for (const e of items) {
        expect(e.actorType).toBe("cli");
        expect(e.actorKeyHash).toBeNull();
      }
      expect(JSON.stringify(items)).not.toContain(key.key);
      expect(JSON.stringify(items)).not.toContain(org.management_key);
      expect(JSON.stringify(items)).not.toContain(intern.host_token);
      expect(JSON.stringify(items)).not.toContain("be brief");
    } finally {
      await db.close();
    }
  }, 180_000);
});
