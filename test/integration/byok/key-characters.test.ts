/**
 * A provider key that cannot travel in an HTTP header (the README's `sk-proj-…` pasted literally, with
 * U+2026; a line break; a space) used to be stored with 200, and every completion then failed 502. It is
 * refused when it is stored: BYOK create and update (HTTP and gRPC) and `portico admin provider-key add`,
 * with a 400 naming `key` whose message never repeats the key.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { bearer, grpc, grpcClient, unary } from "../../helpers/grpc.js";
import { PORTICO_BIN } from "../../helpers/cli.js";

const secret = () => `sk-proj-${randomBytes(12).toString("hex")}`;

/** Keys a header cannot carry, each built around a fresh secret so an echo would show. */
const unsendable: Array<[string, (s: string) => string]> = [
  ["an ellipsis (U+2026), as in the README's sk-proj-… pasted literally", (s) => `${s}\u2026`],
  ["a typographic quote", (s) => `\u201c${s}\u201d`],
  ["a line break inside", (s) => `${s.slice(0, 10)}\n${s.slice(10)}`],
  ["a trailing line break", (s) => `${s}\r\n`],
  ["a space inside", (s) => `${s.slice(0, 10)} ${s.slice(10)}`],
  ["a Latin-1 letter", (s) => `${s}\u00e9`],
  ["a tab", (s) => `${s}\t`],
];

function cli(args: string[], env: Record<string, string>, input: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
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

describe("provider keys a header cannot carry are refused when stored", () => {
  let h: Harness;
  let grpcByok: any;

  beforeAll(async () => {
    h = await startHarness();
    grpcByok = grpcClient("portico/byok/v1/byok_service.proto", "portico.byok.v1.ByokService", h.coreUrl);
  });
  afterAll(async () => {
    grpcByok?.close();
    await h?.close();
  });

  it.each(unsendable)("HTTP create and update: 400 on key for %s, never echoing it", async (_name, make) => {
    const s = secret();
    const before = await h.database.db.byokCredential.count();
    const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "openai", key: make(s) } });
    expect(res.status).toBe(400);
    expect(res.json.error.metadata).toMatchObject({ reason: "bad_request", field: "key" });
    expect(res.json.error.message).toMatch(/^key /);
    expect(res.json.error.message).toContain("HTTP header");
    expect(res.text).not.toContain(s.slice(8));
    expect(await h.database.db.byokCredential.count()).toBe(before);

    const good = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "openai", key: s } });
    expect(good.status, good.text).toBe(200);
    const patched = await api(h, "PATCH", `/byok/${good.json.data.id}`, { key: h.tenant.managementKey, body: { key: make(secret()) } });
    expect(patched.status).toBe(400);
    expect(patched.json.error.metadata).toMatchObject({ reason: "bad_request", field: "key" });
    const row = await h.database.db.byokCredential.findUniqueOrThrow({ where: { id: good.json.data.id } });
    expect(row.label).toBe(good.json.data.label);
  });

  it("gRPC create and update: INVALID_ARGUMENT naming key", async () => {
    const md = bearer(h.tenant.managementKey);
    const s = secret();
    const created = await unary(grpcByok, "CreateByokCredential", { key: `${s}\u2026`, provider: "openai" }, md);
    expect(created.error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(created.error?.details).toMatch(/^key .*HTTP header/);
    expect(created.error?.details).not.toContain(s.slice(8));
    const ok = await unary(grpcByok, "CreateByokCredential", { key: s, provider: "openai" }, md);
    expect(ok.error).toBeUndefined();
    const updated = await unary(grpcByok, "UpdateByokCredential", { id: ok.response.credential.id, key: `${s} x`, update_mask: { paths: ["key"] } }, md);
    expect(updated.error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(updated.error?.details).toMatch(/^key /);
  });

  it("portico admin provider-key add refuses it too, and stores nothing", async () => {
    const env = { PORTICO_DATA_DIR: h.config.dataDir, DATABASE_URL: h.database.url, PORTICO_LOG_LEVEL: "error" };
    const s = secret();
    const bad = await cli(["provider-key", "add", "--provider", "openai"], env, `${s}\u2026\n`);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain("key");
    expect(bad.stderr).toContain("HTTP header");
    expect(bad.stderr + bad.stdout).not.toContain(s.slice(8));
    expect(await h.database.db.providerKey.count()).toBe(0);
    // A key followed by the usual line break from `echo` is still fine.
    const good = await cli(["provider-key", "add", "--provider", "openai", "--json"], env, `${s}\n`);
    expect(good.code, good.stderr).toBe(0);
    expect(await h.database.db.providerKey.count()).toBe(1);
  });
});
