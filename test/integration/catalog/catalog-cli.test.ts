/**
 * `portico admin catalog …` (the compiled CLI, `npm run build`) on the database a running core serves: the
 * same rules as the management API (a broken rule exits 1 naming the field, nothing written), audited with
 * actor `cli`, and served by the running core without Redis after its own re-read (PORTICO_CATALOG_REFRESH_MS,
 * 1 s). SQLite and PostgreSQL.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runPortico } from "../../helpers/cli.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { waitFor } from "../../helpers/wait.js";

const LLAMA = "meta-llama/llama-3.3-70b-instruct";

// Each test starts the CLI four or five times (a few seconds each on a loaded 2-core machine).
describe.each(["sqlite", "postgresql"] as const)("portico admin catalog (%s)", { timeout: 120_000 }, (provider) => {
  let h: Harness;
  let env: Record<string, string>;
  beforeAll(async () => {
    h = await startHarness({ provider, env: { PORTICO_OPENAI_COMPATIBLE_PROVIDERS: "ollama=http://127.0.0.1:9/v1", PORTICO_KEYLESS_PROVIDERS: "ollama" } });
    env = { PORTICO_DATA_DIR: h.config.dataDir, DATABASE_URL: h.database.url, PORTICO_LOG_LEVEL: "error", PORTICO_OPENAI_COMPATIBLE_PROVIDERS: "ollama=http://127.0.0.1:9/v1", PORTICO_KEYLESS_PROVIDERS: "ollama" };
  });
  afterAll(async () => h?.close());
  const admin = (args: string[]) => runPortico(["admin", "catalog", ...args], env);
  const endpointsOf = async (slug: string) => (await api(h, "GET", `/models/${slug}/endpoints`, { key: h.tenant.apiKey })).json?.data?.endpoints ?? [];

  it("changes an endpoint's price (the other prices kept) and status; the running core serves it after its re-read", async () => {
    const before = (await api(h, "GET", `/catalog/models/${LLAMA}`, { key: h.tenant.managementKey })).json.data.endpoints.find((e: { provider: string }) => e.provider === "groq");
    expect(before.pricing.completion).toBeDefined();
    const res = await admin(["endpoint", LLAMA, "groq", "--prompt", "0.0000001", "--json"]);
    expect(res.code, res.stderr).toBe(0);
    const groq = JSON.parse(res.stdout).endpoints.find((e: { provider: string }) => e.provider === "groq");
    expect(groq.pricing).toEqual({ ...before.pricing, prompt: "0.0000001" });
    await waitFor("the core to serve the CLI's price", async () => (await endpointsOf(LLAMA)).find((e: { provider: string }) => e.provider === "groq")?.pricing.prompt === "0.0000001");

    expect((await admin(["endpoint", LLAMA, "fireworks", "--status", "disabled"])).code).toBe(0);
    await waitFor("the core to drop the disabled endpoint", async () => !(await endpointsOf(LLAMA)).some((e: { provider: string }) => e.provider === "fireworks"));
    const listed = JSON.parse((await admin(["list", "--json"])).stdout).data;
    expect(listed.find((m: { slug: string }) => m.slug === LLAMA)).toMatchObject({ overridden: true });

    const audit = await api(h, "GET", "/audit?action_prefix=catalog.", { key: h.tenant.managementKey });
    expect(audit.json.data.map((e: { action: string; actor: { type: string } }) => [e.action, e.actor.type])).toEqual([
      ["catalog.endpoint.update", "cli"],
      ["catalog.endpoint.update", "cli"],
    ]);
  });

  it("adds a model from a file, refuses a broken one naming the field, removes it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "portico-catalog-cli-"));
    const good = join(dir, "good.json");
    const bad = join(dir, "bad.json");
    writeFileSync(good, JSON.stringify({ name: "Local", endpoints: [{ provider: "ollama", model_id: "local", context_length: 4096, pricing: { prompt: "0", completion: "0" } }] }));
    writeFileSync(bad, JSON.stringify({ name: "Local", endpoints: [{ provider: "ollama", model_id: "local", context_length: 4096, pricing: { prompt: "free", completion: "0" } }] }));
    const refused = await admin(["put", "acme/local", "--file", bad]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("endpoints[0].pricing.prompt must be a decimal string");
    expect(refused.stderr).toContain("(endpoints[0].pricing.prompt)");
    expect((await api(h, "GET", "/catalog/models/acme/local", { key: h.tenant.managementKey })).status).toBe(404);

    expect((await admin(["put", "acme/local", "--file", good])).code).toBe(0);
    await waitFor("the core to serve acme/local", async () => (await endpointsOf("acme/local")).length === 1);
    expect((await admin(["remove", "acme/local"])).code).toBe(0);
    await waitFor("the core to drop acme/local", async () => (await api(h, "GET", "/models/acme/local/endpoints", { key: h.tenant.apiKey })).status === 404);
    const gone = await admin(["remove", "acme/local"]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain("No model acme/local");
  });
});
