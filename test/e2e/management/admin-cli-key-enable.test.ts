/**
 * `portico admin key enable`: the way back when the only management key was disabled (for example from
 * the console while signed in with it). The key is disabled through the API by itself, is refused, and
 * `key enable` on the server's database makes it work again (audited as actor cli); `key list` shows
 * hash and state, which is what an operator needs to find it.
 */
import { dirname } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runPortico } from "../../helpers/cli.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";

describe.each(["sqlite", "postgresql"] as const)("portico admin key enable (%s)", (provider) => {
  let h: Harness;
  let env: Record<string, string>;
  beforeAll(async () => {
    h = await startHarness({ provider, env: { PORTICO_AUTH_CACHE_TTL_MS: "0" } });
    const url = h.database.url;
    env = url.startsWith("file:") ? { PORTICO_DATA_DIR: dirname(url.slice(5)) } : { DATABASE_URL: url };
  });
  afterAll(async () => {
    await h?.close();
  });

  it("enables a disabled management key again, so its organization can be managed", async () => {
    const t = h.tenant;
    const disabled = await api(h, "PATCH", `/keys/${t.managementKeyHash}`, { key: t.managementKey, body: { disabled: true } });
    expect(disabled.status).toBe(200);
    expect((await api(h, "GET", "/key", { key: t.managementKey })).status).toBe(401);

    const list = await runPortico(["admin", "key", "list", "--org", t.organizationId], env);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`${t.managementKeyHash} \\S+ .* \\(management\\) \\(disabled\\)`));

    const enabled = await runPortico(["admin", "key", "enable", t.managementKeyHash, "--json"], env);
    expect(enabled.code, enabled.stderr).toBe(0);
    expect(JSON.parse(enabled.stdout)).toMatchObject({ disabled: false, hash: t.managementKeyHash });
    expect(enabled.stdout).not.toContain(t.managementKey);
    const me = await api(h, "GET", "/key", { key: t.managementKey });
    expect(me.status).toBe(200);
    expect(me.json.data.is_management_key).toBe(true);

    const audit = await api(h, "GET", "/audit?action=key.update", { key: t.managementKey });
    expect(audit.json.data[0]).toMatchObject({ action: "key.update", actor: { type: "cli" } });

    // `key disable --enable` still works; an unknown key is an error naming the problem.
    expect((await runPortico(["admin", "key", "disable", t.apiKeyHash], env)).code).toBe(0);
    expect((await api(h, "GET", "/key", { key: t.apiKey })).status).toBe(401);
    expect((await runPortico(["admin", "key", "disable", t.apiKeyHash, "--enable"], env)).code).toBe(0);
    expect((await api(h, "GET", "/key", { key: t.apiKey })).status).toBe(200);
    const unknown = await runPortico(["admin", "key", "enable", "0".repeat(64)], env);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/no active key with that id or hash/);
  }, 120_000);
});
