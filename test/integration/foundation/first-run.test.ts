import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { firstRunBootstrap } from "../../../src/cli/first-run.js";
import { loadConfig } from "../../../src/config.js";
import { openDatabase } from "../../../src/db/client.js";
import { createLogger } from "../../../src/log.js";
import type { RunningProcess } from "../../../src/server.js";
import { createTestPgDatabase } from "../../helpers/db.js";

describe("first run on PostgreSQL", () => {
  it("bootstraps exactly once when two processes find the same empty database at the same moment", async () => {
    const pg = await createTestPgDatabase();
    const dataDir = mkdtempSync(join(tmpdir(), "portico-first-run-"));
    const a = await openDatabase({ databaseUrl: pg.url, dataDir });
    const b = await openDatabase({ databaseUrl: pg.url, dataDir, migrate: false });
    const cfg = loadConfig({ PORTICO_DATA_DIR: dataDir, DATABASE_URL: pg.url, PORTICO_EMBEDDED_HOST: "false" });
    const logger = createLogger({ level: "silent" });
    const proc = (database: typeof a) => ({ database, onClose: [], close: async () => undefined }) as unknown as RunningProcess;
    const banner = process.stderr.write.bind(process.stderr);
    let banners = 0;
    process.stderr.write = ((chunk: string | Uint8Array) => {
      if (String(chunk).includes("management key:")) banners += 1;
      return true;
    }) as typeof process.stderr.write;
    try {
      await Promise.all([firstRunBootstrap(proc(a), cfg, logger), firstRunBootstrap(proc(b), cfg, logger)]);
    } finally {
      process.stderr.write = banner;
    }
    try {
      expect(await a.db.organization.count()).toBe(1);
      expect(banners).toBe(1);
    } finally {
      await b.close();
      await a.close();
      await pg.drop();
    }
  });
});
