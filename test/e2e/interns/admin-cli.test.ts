/**
 * `portico admin intern create|list|revoke-token` and the bootstrap's built-in intern, run as the
 * real command line against a fresh SQLite data folder. Host tokens are printed once, stored hashed.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../../../src/db/client.js";
import { hashSecret } from "../../../src/core/identity/keys.js";
import { runPortico } from "../../helpers/cli.js";

describe("portico admin intern", () => {
  let dir: string;
  let env: Record<string, string>;
  let boot: any;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "portico-intern-cli-"));
    env = { PORTICO_DATA_DIR: join(dir, "data"), DATABASE_URL: "", PORTICO_LOG_LEVEL: "warn" };
    const r = await runPortico(["admin", "bootstrap", "--json"], env);
    expect(r.code).toBe(0);
    boot = JSON.parse(r.stdout);
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("bootstrap creates the built-in intern once and returns its host token only when created", async () => {
    expect(boot.intern_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(boot.intern_host_token).toMatch(/^pht-v1-[0-9a-f]{64}$/);
    const again = JSON.parse((await runPortico(["admin", "bootstrap", "--json"], env)).stdout);
    expect(again.intern_id).toBe(boot.intern_id);
    expect(again.intern_host_token).toBeUndefined();
  }, 60_000);

  it("create prints the id and a host token once; list shows status without secrets; revoke-token revokes", async () => {
    const created = await runPortico(["admin", "intern", "create", "--workspace", boot.workspace_id, "--name", "helper-bot", "--json"], env);
    expect(created.code).toBe(0);
    const c = JSON.parse(created.stdout);
    expect(c.host_token).toMatch(/^pht-v1-[0-9a-f]{64}$/);
    const dup = await runPortico(["admin", "intern", "create", "--workspace", boot.workspace_id, "--name", "helper-bot"], env);
    expect(dup.code).not.toBe(0);
    expect(dup.stderr).toContain("already exists");

    const list = JSON.parse((await runPortico(["admin", "intern", "list", "--json"], env)).stdout);
    const row = list.data.find((r: any) => r.id === c.intern_id);
    expect(row).toMatchObject({ name: "helper-bot", status: "detached", has_host_token: true, workspace_id: boot.workspace_id });
    expect(JSON.stringify(list)).not.toContain(c.host_token);
    expect(JSON.stringify(list)).not.toContain(hashSecret(c.host_token));

    const handle = await openDatabase({ dataDir: env.PORTICO_DATA_DIR!, migrate: false });
    try {
      const stored = await handle.db.intern.findUniqueOrThrow({ where: { id: c.intern_id } });
      expect(stored.hostTokenHash).toBe(hashSecret(c.host_token));
    } finally {
      await handle.close();
    }

    const revoked = JSON.parse((await runPortico(["admin", "intern", "revoke-token", c.intern_id, "--json"], env)).stdout);
    expect(revoked).toEqual({ intern_id: c.intern_id, revoked: true });
    const issued = JSON.parse((await runPortico(["admin", "intern", "revoke-token", c.intern_id, "--issue", "--json"], env)).stdout);
    expect(issued.host_token).toMatch(/^pht-v1-/);
    expect(issued.host_token).not.toBe(c.host_token);
  }, 120_000);
});
