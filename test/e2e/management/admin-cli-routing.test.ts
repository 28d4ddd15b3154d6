/**
 * `portico admin routing show|set`: an operator changes an organization's or a workspace's account-wide routing
 * settings on the server's database (docs/routing.md#account-wide-settings); the change is audited as actor cli,
 * reads back over the API, and the running server routes under it (within its cache bound: no shared bus here).
 */
import { dirname } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runPortico } from "../../helpers/cli.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { waitFor } from "../../helpers/wait.js";

describe.each(["sqlite", "postgresql"] as const)("portico admin routing (%s)", (provider) => {
  let h: Harness;
  let env: Record<string, string>;
  const fakes: FakeUpstream[] = [];
  beforeAll(async () => {
    const groq = await startFakeOpenAI({ text: ["groq"], finish: "stop", usage: { input: 1, output: 1 } });
    const together = await startFakeOpenAI({ text: ["together"], finish: "stop", usage: { input: 1, output: 1 } });
    fakes.push(groq, together);
    h = await startHarness({ provider, env: { PORTICO_PROVIDER_GROQ_BASE_URL: `${groq.url}/v1`, PORTICO_PROVIDER_TOGETHER_BASE_URL: `${together.url}/v1` } });
    for (const p of ["groq", "together"]) expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: p, key: `sk-${p}` } })).status).toBe(200);
    const url = h.database.url;
    env = url.startsWith("file:") ? { PORTICO_DATA_DIR: dirname(url.slice(5)) } : { DATABASE_URL: url };
  });
  afterAll(async () => {
    await h?.close();
    await Promise.all(fakes.map((f) => f.close()));
  });

  it("set and show the organization's and a workspace's settings; audited; the server routes under them; bad values are refused", async () => {
    const t = h.tenant;
    const client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: t.apiKey, maxRetries: 0 });
    const ask = async () => ((await client.chat.completions.create({ model: "meta-llama/llama-3.3-70b-instruct", messages: [{ role: "user", content: "hi" }], provider: { sort: "price" } } as never)) as unknown as { provider: string }).provider;
    expect(await ask()).toBe("groq");

    const set = await runPortico(["admin", "routing", "set", "--org", t.organizationId, "--ignored-providers", "groq", "--data-collection", "deny", "--json"], env);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ organization_id: t.organizationId, workspace_id: null, ignored_providers: ["groq"], data_collection: "deny", zdr: false });
    const ws = await runPortico(["admin", "routing", "set", "--org", t.organizationId, "--workspace", t.workspaceId, "--allowed-quantizations", "fp8"], env);
    expect(ws.code, ws.stderr).toBe(0);
    expect(ws.stdout).toContain("allowed_quantizations: fp8");
    const show = await runPortico(["admin", "routing", "show", "--org", t.organizationId], env);
    expect(show.stdout).toContain("ignored_providers: groq");

    const read = await api(h, "GET", `/routing-settings?workspace_id=${t.workspaceId}`, { key: t.managementKey });
    expect(read.json.data).toMatchObject({ workspace_id: t.workspaceId, allowed_quantizations: ["fp8"] });
    const audit = await api(h, "GET", "/audit?action=routing_settings.update", { key: t.managementKey });
    expect(audit.json.data[0]).toMatchObject({ action: "routing_settings.update", actor: { type: "cli" } });
    await waitFor("the server to route under the CLI's settings", async () => (await ask()) === "together");

    const bad = await runPortico(["admin", "routing", "set", "--org", t.organizationId, "--allowed-providers", "nobody-serves-this"], env);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/allowed_providers\[0\]: no provider "nobody-serves-this"/);
    const noOrg = await runPortico(["admin", "routing", "set", "--org", "00000000-0000-4000-8000-000000000000", "--zdr", "true"], env);
    expect(noOrg.code).not.toBe(0);
    expect(noOrg.stderr).toMatch(/Organization not found/);
  }, 120_000);
});
