/**
 * The operator's shared provider keys (`portico admin provider-key …`) and the BYOK flags that govern
 * them, end to end: keys added through the real CLI (standard input, never argv), used by every
 * workspace after its own non-fallback credentials, removed by `is_required` (every model of the
 * provider) and `is_byok_only` (the models the credential applies to), tried before `is_fallback`
 * credentials, disabled, reordered, removed, and re-encrypted by key rotation. A running server sees
 * each CLI change as soon as Redis delivers it (the change is published on the invalidation bus); the
 * CLI exits when it has published, not when every server has read it, so the tests wait for the switch.
 *
 * Which credential served a request is read from the fake upstream: the key it was called with.
 */
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes, randomUUID } from "node:crypto";
import OpenAI from "openai";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { PORTICO_BIN, runPortico } from "../../helpers/cli.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { writeKeyringFile } from "../../../src/core/byok/keyring.js";
import { waitFor } from "../../helpers/wait.js";

const REDIS_URL = process.env.PORTICO_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const secret = (tag: string) => `gsk_${tag}_${randomBytes(16).toString("hex")}`;

/** `portico admin …` with `input` on standard input. */
function cli(args: string[], env: Record<string, string>, input = ""): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [PORTICO_BIN, "admin", ...args], { env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

describe.each(["sqlite", "postgresql"] as const)("shared provider keys and the BYOK flags (%s)", (provider) => {
  let h: Harness;
  let up: FakeUpstream;
  let client: OpenAI;
  let env: Record<string, string>;
  const sharedA = secret("sharedA");
  const sharedB = secret("sharedB");
  let sharedAId = "";
  let sharedBId = "";
  const byokIds: string[] = [];

  /** The keys the upstream was called with since `from` (request index). */
  const keysSince = (from: number) => up.requests.slice(from).map((r) => String(r.headers.authorization).replace(/^Bearer /, ""));
  const chat = async (model: string, key = h.tenant.apiKey) =>
    api(h, "POST", "/chat/completions", { key, body: { model, messages: [{ role: "user", content: "hi" }] } });
  /**
   * Waits until a chat request is served by `expected` after a CLI change (the bus delivers it in
   * milliseconds; the cache's own 1 s lifetime bounds it otherwise), then checks that the requests
   * before the switch used only the key the change replaced, and that the next request stays on it.
   */
  const switchesTo = async (expected: string, before: string) => {
    const from = up.requests.length;
    await waitFor(`a request served by the key the change selected`, async () => {
      expect((await chat("groq/llama")).status).toBe(200);
      return keysSince(from).at(-1) === expected;
    });
    expect(keysSince(from).filter((k) => k !== expected && k !== before)).toEqual([]);
    const next = up.requests.length;
    expect((await chat("groq/llama")).status).toBe(200);
    expect(keysSince(next)).toEqual([expected]);
  };
  const addByok = async (body: Record<string, unknown>) => {
    const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "groq", ...body } });
    expect(res.status, res.text).toBe(200);
    byokIds.push(res.json.data.id);
    return res.json.data.id as string;
  };

  beforeAll(async () => {
    up = await startFakeOpenAI();
    const keyFile = join(mkdtempSync(join(tmpdir(), "portico-pk-")), "keyring.json");
    writeKeyringFile(keyFile, { primaryId: "k1", keys: new Map([["k1", randomBytes(32)]]) });
    const shared = { REDIS_URL, PORTICO_REDIS_PREFIX: `test-${randomUUID()}:`, PORTICO_MASTER_KEY_FILE: keyFile };
    // The strict order these tests check (the default draws credentials of one tier by weight: docs/routing.md).
    h = await startHarness({ provider, env: { ...shared, PORTICO_CREDENTIAL_ORDER: "ordered", PORTICO_PROVIDER_GROQ_BASE_URL: `${up.url}/v1` } });
    env = { ...shared, PORTICO_DATA_DIR: h.config.dataDir, DATABASE_URL: h.database.url, PORTICO_LOG_LEVEL: "error" };
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterEach(async () => {
    up.knobs.rejectKeys = [];
    while (byokIds.length) expect((await api(h, "DELETE", `/byok/${byokIds.pop()}`, { key: h.tenant.managementKey })).status).toBe(200);
  });
  afterAll(async () => {
    await h?.close();
    await up?.close();
  });

  it("add reads the key from standard input; list shows a masked label only; the next request uses it", async () => {
    const refused = await chat("groq/llama");
    expect(refused.status).toBe(400);
    expect(refused.text).toContain("no_credential");

    const added = await cli(["provider-key", "add", "--provider", "groq", "--sort-order", "5", "--json"], env, `${sharedA}\n`);
    expect(added.code, added.stderr).toBe(0);
    const row = JSON.parse(added.stdout);
    sharedAId = row.id;
    expect(row).toMatchObject({ provider: "groq", sort_order: 5, disabled: false, key_id: "k1" });
    expect(row.label).toBe(`gsk_...${sharedA.slice(-4)}`);

    const listed = await cli(["provider-key", "list", "--json"], env);
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout).data.map((r: { id: string }) => r.id)).toEqual([sharedAId]);
    for (const out of [added.stdout, added.stderr, listed.stdout, listed.stderr, h.logs.join("")]) expect(out).not.toContain(sharedA.slice(4));

    // The cache held "no credential" for groq; the CLI's change reaches it through Redis.
    await waitFor("the added shared key in use", async () => (await chat("groq/llama")).status === 200);
    const from = up.requests.length;
    const res = await client.chat.completions.create({ model: "groq/llama", messages: [{ role: "user", content: "hi" }] });
    expect(res.choices[0]!.message.content).toBe("Hello, world");
    expect(keysSince(from)).toEqual([sharedA]);

    // Every workspace may use it.
    const other = await h.createTenant();
    const from2 = up.requests.length;
    expect((await chat("groq/llama", other.apiKey)).status).toBe(200);
    expect(keysSince(from2)).toEqual([sharedA]);
  });

  it("a bad provider or an empty key is refused with a clear message, and nothing is stored", async () => {
    const bad = await cli(["provider-key", "add", "--provider", "no-such-provider"], env, secret("x"));
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain("provider");
    const empty = await cli(["provider-key", "add", "--provider", "groq"], env, "");
    expect(empty.code).not.toBe(0);
    expect(empty.stderr).toContain("key");
    const listed = JSON.parse((await cli(["provider-key", "list", "--json"], env)).stdout).data;
    expect(listed).toHaveLength(1);
  });

  it("order: the workspace's own non-fallback credentials, then shared keys by sort_order, then is_fallback credentials", async () => {
    const added = await cli(["provider-key", "add", "--provider", "groq", "--sort-order", "1", "--key-env", "SHARED_B", "--json"], { ...env, SHARED_B: sharedB });
    expect(added.code, added.stderr).toBe(0);
    sharedBId = JSON.parse(added.stdout).id;
    const own = secret("own");
    const fallback = secret("fallback");
    await addByok({ key: own, sort_order: 1 });
    await addByok({ key: fallback, is_fallback: true, sort_order: 0 });

    let from = up.requests.length;
    expect((await chat("groq/llama")).status).toBe(200);
    expect(keysSince(from)).toEqual([own]);
    // The new shared key comes next once the bus has delivered its addition.
    up.knobs.rejectKeys = [own];
    await waitFor("the added shared key second in order", async () => {
      const at = up.requests.length;
      expect((await chat("groq/llama")).status).toBe(200);
      return keysSince(at)[1] === sharedB;
    });

    // Every key but the last refuses (401 before the first byte): the whole order shows.
    up.knobs.rejectKeys = [own, sharedB, sharedA];
    from = up.requests.length;
    expect((await chat("groq/llama")).status).toBe(200);
    expect(keysSince(from)).toEqual([own, sharedB, sharedA, fallback]);
  });

  it("is_required removes the shared keys for every model of the provider, also outside its allowed_models", async () => {
    const required = secret("required");
    await addByok({ key: required, is_required: true, allowed_models: ["groq/model-a"] });
    up.knobs.rejectKeys = [required];
    let from = up.requests.length;
    const a = await chat("groq/model-a");
    expect(a.status).toBe(502);
    expect(keysSince(from)).toEqual([required]);

    from = up.requests.length;
    const b = await chat("groq/model-b");
    expect(b.status).toBe(400);
    expect(b.text).toContain("no_credential");
    expect(keysSince(from)).toEqual([]);
  });

  it("is_byok_only removes the shared keys only for the models the credential applies to", async () => {
    const only = secret("only");
    await addByok({ key: only, is_byok_only: true, allowed_models: ["groq/model-a"] });
    up.knobs.rejectKeys = [only];
    let from = up.requests.length;
    expect((await chat("groq/model-a")).status).toBe(502);
    expect(keysSince(from)).toEqual([only]);

    from = up.requests.length;
    expect((await chat("groq/model-b")).status).toBe(200);
    expect(keysSince(from)).toEqual([sharedB]);
  });

  it("combinations: a flag on a credential the caller is not granted (another key, a disabled one) leaves the shared keys", async () => {
    await addByok({ key: secret("notmine"), is_required: true, allowed_api_key_hashes: [h.tenant.managementKeyHash] });
    const offId = await addByok({ key: secret("off"), is_byok_only: true });
    expect((await api(h, "PATCH", `/byok/${offId}`, { key: h.tenant.managementKey, body: { disabled: true } })).status).toBe(200);
    let from = up.requests.length;
    expect((await chat("groq/llama")).status).toBe(200);
    expect(keysSince(from)).toEqual([sharedB]);

    // is_required and a fallback together: the fallback stays, the shared keys go.
    const req = secret("req");
    const fb = secret("fb");
    await addByok({ key: req, is_required: true });
    await addByok({ key: fb, is_fallback: true });
    up.knobs.rejectKeys = [req];
    from = up.requests.length;
    expect((await chat("groq/llama")).status).toBe(200);
    expect(keysSince(from)).toEqual([req, fb]);
  });

  it("disable, enable and remove take effect once the change is delivered", async () => {
    expect((await cli(["provider-key", "disable", sharedBId], env)).code).toBe(0);
    await switchesTo(sharedA, sharedB);

    expect((await cli(["provider-key", "enable", sharedBId], env)).code).toBe(0);
    await switchesTo(sharedB, sharedA);

    const removed = await cli(["provider-key", "remove", sharedBId, "--json"], env);
    expect(removed.code, removed.stderr).toBe(0);
    await switchesTo(sharedA, sharedB);
    const again = await cli(["provider-key", "remove", sharedBId], env);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain("No provider key");
  });

  it("GET /models lists the provider of a shared key", async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toContain("groq/*");
  });

  it("key rotation re-encrypts shared keys; verify opens them; requests keep working", async () => {
    const rotated = await runPortico(["admin", "byok", "rotate-keys", "--new-key-id", "k2", "--grace-ms", "0", "--json"], env);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(JSON.parse(rotated.stdout)).toMatchObject({ primary: "k2", remaining: 0, unusable: [], retired: ["k1"] });
    const listed = JSON.parse((await cli(["provider-key", "list", "--json"], env)).stdout).data;
    expect(listed.map((r: { key_id: string }) => r.key_id)).toEqual(["k2"]);
    const verified = await runPortico(["admin", "byok", "verify", "--json"], env);
    expect(verified.code, verified.stderr).toBe(0);
    expect(JSON.parse(verified.stdout).unusable).toEqual([]);
    const from = up.requests.length;
    expect((await chat("groq/llama")).status).toBe(200);
    expect(keysSince(from)).toEqual([sharedA]);
  });
});
