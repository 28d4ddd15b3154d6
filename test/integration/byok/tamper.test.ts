/**
 * Tamper: a stored ciphertext with flipped bits, moved to another row, truncated, or pointing at an
 * unknown master key makes that credential report "unusable" explicitly (a typed error from the one
 * decrypt function, and the operator's verify command), never an empty key. Public reads, which never
 * decrypt, are unaffected.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { runPortico } from "../../helpers/cli.js";
import { CredentialUnusableError, decryptCredentialKey } from "../../../src/core/byok/credential-crypto.js";
import { createCredentialKeyAccess } from "../../../src/core/byok/credential-use.js";
import { canaryKey, harnessKeyring } from "./byok-helpers.js";

describe.each(["sqlite", "postgresql"] as const)("BYOK tamper detection (%s)", (provider) => {
  let h: Harness;
  const ids: Record<string, string> = {};
  const keys: Record<string, string> = {};

  beforeAll(async () => {
    h = await startHarness({ provider });
    for (const name of ["flipped", "source", "target", "truncated", "unknownKey", "intact"]) {
      keys[name] = canaryKey();
      const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { key: keys[name], provider: "openai" } });
      ids[name] = res.json.data.id;
    }
    const db = h.database.db;
    const row = (id: string) => db.byokCredential.findUniqueOrThrow({ where: { id } });
    const flipped = Buffer.from((await row(ids.flipped!)).ciphertext!);
    flipped[flipped.length - 3]! ^= 0x04;
    await db.byokCredential.update({ where: { id: ids.flipped! }, data: { ciphertext: new Uint8Array(flipped) } });
    const source = await row(ids.source!);
    await db.byokCredential.update({ where: { id: ids.target! }, data: { ciphertext: source.ciphertext, keyId: source.keyId } });
    const truncated = Buffer.from((await row(ids.truncated!)).ciphertext!).subarray(0, 10);
    await db.byokCredential.update({ where: { id: ids.truncated! }, data: { ciphertext: new Uint8Array(truncated) } });
    await db.byokCredential.update({ where: { id: ids.unknownKey! }, data: { keyId: "k-nowhere" } });
  });
  afterAll(async () => {
    await h?.close();
  });

  it.each([
    ["flipped", "authentication_failed"],
    ["target", "authentication_failed"],
    ["truncated", "malformed"],
    ["unknownKey", "unknown_key"],
  ])("%s credential is reported unusable (%s), never empty", async (name, reason) => {
    const keyring = harnessKeyring(h);
    const row = await h.database.db.byokCredential.findUniqueOrThrow({ where: { id: ids[name]! } });
    let error: unknown;
    let value: unknown = "not called";
    try {
      value = decryptCredentialKey(keyring, row);
    } catch (err) {
      error = err;
    }
    expect(value).toBe("not called");
    expect(error).toBeInstanceOf(CredentialUnusableError);
    expect((error as CredentialUnusableError).reason).toBe(reason);
    expect((error as Error).message).toContain(`BYOK credential ${ids[name]} is unusable`);
    const access = createCredentialKeyAccess({ db: h.database.db, keyring });
    let used = false;
    await expect(access.withProviderKey(h.tenant.organizationId, ids[name]!, async () => (used = true))).rejects.toThrow(/unusable/);
    expect(used).toBe(false);
  });

  it("leaves the untouched credentials usable, the moved-from one included", async () => {
    const keyring = harnessKeyring(h);
    const access = createCredentialKeyAccess({ db: h.database.db, keyring });
    expect(await access.withProviderKey(h.tenant.organizationId, ids.intact!, async (k) => k)).toBe(keys.intact);
    expect(await access.withProviderKey(h.tenant.organizationId, ids.source!, async (k) => k)).toBe(keys.source);
    expect(await access.withProviderKey(h.tenant.organizationId, "no-such-id", async (k) => k)).toBeNull();
  });

  it("public reads do not decrypt and keep working", async () => {
    const res = await api(h, "GET", `/byok/${ids.flipped}`, { key: h.tenant.managementKey });
    expect(res.status).toBe(200);
    expect(res.json.data.label).toBe(`sk-proj-...${keys.flipped!.slice(-4)}`);
  });

  it("`portico admin byok verify` lists exactly the tampered credentials (exit code 3)", async () => {
    const env: Record<string, string> = { PORTICO_DATA_DIR: h.config.dataDir, DATABASE_URL: h.database.url };
    const res = await runPortico(["admin", "byok", "verify", "--json"], env);
    expect(res.code).toBe(3);
    const report = JSON.parse(res.stdout);
    expect(report.usable).toBe(2);
    expect(Object.fromEntries(report.unusable.map((u: any) => [u.id, u.reason]))).toEqual({
      [ids.flipped!]: "authentication_failed",
      [ids.target!]: "authentication_failed",
      [ids.truncated!]: "malformed",
      [ids.unknownKey!]: "unknown_key",
    });
    for (const k of Object.values(keys)) expect(res.stdout + res.stderr).not.toContain(k);
  });
});
