/**
 * Start-up checks of the master keyring against the database: a wrong key (check value mismatch) is
 * always refused; credentials sealed under keys missing from the keyring stop production start-up
 * and only warn in development; production refuses a missing or short key.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { Writable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config.js";
import { createByokDomain } from "../../../src/core/byok/byok-module.js";
import { createCore } from "../../../src/core/core.js";
import type { DatabaseHandle } from "../../../src/db/client.js";
import { createLogger } from "../../../src/log.js";
import { createMetrics } from "../../../src/lib/metrics.js";
import { dbProviders } from "../../helpers/db.js";

const keyringJson = (id: string, key = randomBytes(32)) => JSON.stringify({ primary: id, keys: { [id]: key.toString("base64") } });

describe.each(dbProviders)("BYOK keyring start-up checks (%s)", (_provider, fresh) => {
  let database: DatabaseHandle | undefined;
  const lines: string[] = [];
  const logger = createLogger({ destination: new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) }) });
  const dataDir = () => mkdtempSync(join(tmpdir(), "portico-ks-"));
  const config = (env: Record<string, string>) => loadConfig({ PORTICO_DATA_DIR: dataDir(), ...env });

  afterEach(async () => {
    await database?.close();
    database = undefined;
  });

  it("records a check value on first start and refuses a different key under the same id", async () => {
    database = await fresh();
    await createByokDomain({ database, config: config({ PORTICO_MASTER_KEY: keyringJson("k1") }), logger });
    const row = await database.db.keyringKey.findUniqueOrThrow({ where: { id: "k1" } });
    expect(row.checkValue).toMatch(/^[0-9a-f]{64}$/);
    for (const production of ["false", "true"]) {
      await expect(
        createByokDomain({ database, config: config({ PORTICO_MASTER_KEY: keyringJson("k1"), PORTICO_PRODUCTION: production }), logger }),
      ).rejects.toThrow(/does not match the check value stored in the database: wrong master key/);
    }
  });

  it("refuses production start-up when credentials are sealed under a key missing from the keyring; development warns", async () => {
    database = await fresh();
    const oldKey = randomBytes(32);
    const first = await createByokDomain({ database, config: config({ PORTICO_MASTER_KEY: oldKey.toString("hex") }), logger });
    const org = await database.db.organization.create({ data: { name: "o" } });
    const ws = await database.db.workspace.create({ data: { organizationId: org.id, name: "d", slug: "d", isDefault: true } });
    const sealed = first.keyring.seal(Buffer.from("x"), Buffer.alloc(0));
    await database.db.byokCredential.create({
      data: { organizationId: org.id, workspaceId: ws.id, provider: "openai", label: "***", keyId: sealed.keyId, ciphertext: new Uint8Array(sealed.blob) },
    });
    const other = randomBytes(32).toString("hex");
    await expect(createByokDomain({ database, config: config({ PORTICO_MASTER_KEY: other, PORTICO_PRODUCTION: "true" }), logger })).rejects.toThrow(
      new RegExp(`sealed under master keys missing from the keyring: ${first.keyring.primaryId}`),
    );
    lines.length = 0;
    await createByokDomain({ database, config: config({ PORTICO_MASTER_KEY: other }), logger });
    expect(lines.join("\n")).toMatch(/missing from the keyring/);
    expect(lines.join("\n")).not.toContain(other);
    expect(lines.join("\n")).not.toContain(oldKey.toString("hex"));
  });

  it("createCore refuses to start in production without a key or with a short one", async () => {
    database = await fresh();
    const base = { logger, metrics: createMetrics(), database };
    await expect(createCore({ ...base, config: config({ PORTICO_PRODUCTION: "true" }) })).rejects.toThrow(/production mode needs a master key/);
    await expect(
      createCore({ ...base, config: config({ PORTICO_PRODUCTION: "true", PORTICO_MASTER_KEY: randomBytes(16).toString("base64") }) }),
    ).rejects.toThrow(/must be 32 bytes/);
    const core = await createCore({ ...base, config: config({ PORTICO_PRODUCTION: "true", PORTICO_MASTER_KEY: randomBytes(32).toString("base64") }) });
    await core.close();
  });
});
