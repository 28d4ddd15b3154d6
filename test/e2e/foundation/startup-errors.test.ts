/**
 * Every start-up failure ends the process at once with one line naming the setting at fault, and a
 * PostgreSQL database that does not exist yet is created when the role may.
 */
import { createServer, type Server } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { runPortico, startPortico } from "../../helpers/cli.js";
import { testPgAdminUrl } from "../../helpers/db.js";

const dirs: string[] = [];
function dataDir(): string {
  const d = mkdtempSync(join(tmpdir(), "portico-start-"));
  dirs.push(d);
  return d;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function occupy(): Promise<{ server: Server; port: number }> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve({ server, port: (server.address() as { port: number }).port }));
  });
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: testPgAdminUrl() });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

function pgUrl(user: string, database: string, port?: number): string {
  const u = new URL(testPgAdminUrl());
  u.username = user;
  u.pathname = `/${database}`;
  if (port) u.port = String(port);
  return u.toString();
}

const base = { PORT: "0", PORTICO_GRPC_PORT: "0", PORTICO_EMBEDDED_HOST: "false" };

describe("start-up errors name the setting at fault", () => {
  it("a data folder that cannot be created (/proc) fails at once naming PORTICO_DATA_DIR", async () => {
    const r = await runPortico(["serve"], { ...base, PORTICO_DATA_DIR: "/proc/portico-data" }, 30_000);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("PORTICO_DATA_DIR");
    expect(r.stderr).toContain("/proc/portico-data");
  });

  it("a data folder path through a file fails naming the path", async () => {
    const file = join(dataDir(), "file");
    await import("node:fs").then((fs) => fs.writeFileSync(file, "x"));
    const r = await runPortico(["serve"], { ...base, PORTICO_DATA_DIR: join(file, "data") }, 30_000);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("PORTICO_DATA_DIR");
    expect(r.stderr).toContain("not a folder");
  });

  for (const setting of ["PORT", "PORTICO_GRPC_PORT"] as const) {
    it(`a port in use names ${setting}`, async () => {
      const { server, port } = await occupy();
      try {
        const r = await runPortico(["serve"], { ...base, PORTICO_DATA_DIR: dataDir(), [setting]: String(port) }, 60_000);
        expect(r.code).not.toBe(0);
        expect(r.stderr).toContain(`${setting}=${port}`);
        expect(r.stderr).toContain("already in use");
      } finally {
        server.close();
      }
    });
  }

  it("a refused database connection names DATABASE_URL without its password", async () => {
    const { server, port } = await occupy();
    server.close(); // a port nothing listens on
    const url = pgUrl("postgres", "portico", port).replace("postgres@", "postgres:hunter2secret@");
    const r = await runPortico(["serve"], { ...base, PORTICO_DATA_DIR: dataDir(), DATABASE_URL: url }, 60_000);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("DATABASE_URL");
    expect(r.stderr).toContain("connection refused");
    expect(r.stderr + r.stdout).not.toContain("hunter2secret");
  });

  it("a database that does not exist is created, and serving starts", async () => {
    const name = `portico_created_${randomBytes(5).toString("hex")}`;
    try {
      const { child, value } = await startPortico(["serve"], { ...base, PORTICO_DATA_DIR: dataDir(), DATABASE_URL: pgUrl("postgres", name) }, (out) =>
        /API base URL:\s+(\S+)/.exec(out)?.[1],
      );
      try {
        await expect.poll(async () => (await fetch(value.replace(/\/api\/v1$/, "/readyz"))).status, { timeout: 20_000 }).toBe(200);
        const exists = await admin((c) => c.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]));
        expect(exists.rowCount).toBe(1);
      } finally {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        await exited;
      }
    } finally {
      await admin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
    }
  });

  it("a role that may not create it is told how", async () => {
    const role = `portico_nocreate_${randomBytes(4).toString("hex")}`;
    const name = `portico_missing_${randomBytes(5).toString("hex")}`;
    await admin((c) => c.query(`CREATE ROLE "${role}" LOGIN NOCREATEDB`));
    try {
      const r = await runPortico(["serve"], { ...base, PORTICO_DATA_DIR: dataDir(), DATABASE_URL: pgUrl(role, name) }, 60_000);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain("DATABASE_URL");
      expect(r.stderr).toContain(`CREATE DATABASE "${name}"`);
    } finally {
      await admin((c) => c.query(`DROP ROLE IF EXISTS "${role}"`));
    }
  });
});
