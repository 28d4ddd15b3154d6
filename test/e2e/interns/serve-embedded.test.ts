/**
 * Two `portico serve` processes on one PostgreSQL database each attach their embedded host to the
 * built-in intern without rotating its stored host token: both answer prompts, neither locks the
 * other out, and the token the bootstrap printed still authenticates an outside host.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { hashSecret } from "../../../src/core/identity/keys.js";
import { runPortico, startPortico } from "../../helpers/cli.js";
import { createTestPgDatabase } from "../../helpers/db.js";

describe("portico serve ×2 on one database: the embedded hosts share the built-in intern", () => {
  const dirs: string[] = [];
  const children: Array<import("node:child_process").ChildProcess> = [];
  let db: Awaited<ReturnType<typeof createTestPgDatabase>> | undefined;
  afterAll(async () => {
    for (const c of children) {
      if (c.exitCode === null && c.signalCode === null) {
        const gone = new Promise((r) => c.once("exit", r));
        c.kill("SIGTERM");
        await gone;
      }
    }
    await db?.drop().catch(() => undefined);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  it("both serves answer prompts; the stored token is not rotated", async () => {
    db = await createTestPgDatabase();
    const base = { DATABASE_URL: db.url, PORT: "0", PORTICO_GRPC_PORT: "0", PORTICO_LOG_LEVEL: "info" };
    const dataDir = () => {
      const d = mkdtempSync(join(tmpdir(), "portico-serve2-"));
      dirs.push(d);
      return d;
    };
    const first = dataDir();
    const boot = JSON.parse((await runPortico(["admin", "bootstrap", "--json"], { ...base, PORTICO_DATA_DIR: first }, 120_000)).stdout);
    expect(boot.intern_host_token).toMatch(/^pht-v1-/);
    // Both serves share the master key (one database, one key), but not their data folders.
    const masterKey = randomBytes(32).toString("hex");

    const serve = async (dir: string) => {
      const p = await startPortico(["serve"], { ...base, PORTICO_DATA_DIR: dir, PORTICO_MASTER_KEY: masterKey }, (out) =>
        /"msg":"serving/.test(out) ? /"url":"(http:\/\/127\.0\.0\.1:\d+\/api\/v1)","msg":"gateway listening/.exec(out)?.[1] : undefined,
      );
      children.push(p.child);
      return p.value;
    };
    const one = await serve(first);
    const two = await serve(dataDir());

    // Each serve is ready once its embedded host can be reached: the first prompt is answered.
    const prompt = async (apiBase: string, word: string) => {
      const res = await fetch(`${apiBase}/interns/${boot.intern_id}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${boot.api_key}`, "content-type": "application/json" },
        body: JSON.stringify({ stream: true, messages: [{ role: "user", content: `$ echo ${word}` }] }),
      });
      expect(res.status).toBe(200);
      return res.text();
    };
    expect(await prompt(two, "from-two")).toContain("from-two\\n");
    expect(await prompt(one, "from-one")).toContain("from-one\\n");

    const sql = new pg.Client({ connectionString: db.url });
    await sql.connect();
    try {
      const row = await sql.query(`SELECT "hostTokenHash" FROM "Intern" WHERE id = $1`, [boot.intern_id]);
      expect(row.rows[0].hostTokenHash).toBe(hashSecret(boot.intern_host_token));
    } finally {
      await sql.end();
    }
  }, 180_000);
});
