import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runPortico, startPortico } from "../../helpers/cli.js";

const dirs: string[] = [];
function dataDir(): string {
  const d = mkdtempSync(join(tmpdir(), "portico-cli-"));
  dirs.push(d);
  return d;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

// Every test starts real processes (each opens the database, migrates, and some serve): on a loaded 2-core
// machine a start takes seconds, so the file allows 2 minutes a test.
describe("portico CLI", { timeout: 120_000 }, () => {
  it("bootstraps idempotently and prints plaintext keys only once", async () => {
    const env = { PORTICO_DATA_DIR: dataDir() };
    const first = await runPortico(["admin", "bootstrap", "--json"], env);
    expect(first.code, first.stderr).toBe(0);
    const a = JSON.parse(first.stdout);
    expect(a.management_key).toMatch(/^pk-v1-[0-9a-f]{64}$/);
    expect(a.api_key).toMatch(/^pk-v1-[0-9a-f]{64}$/);
    for (const k of ["organization_id", "workspace_id", "user_id"]) expect(a[k]).toMatch(/^[0-9a-f-]{36}$/);

    const second = await runPortico(["admin", "bootstrap", "--json"], env);
    const b = JSON.parse(second.stdout);
    expect(b.organization_id).toBe(a.organization_id);
    expect(b.workspace_id).toBe(a.workspace_id);
    expect(b.management_key).toBeNull();
    expect(b.api_key).toBeNull();
  });

  it("creates organizations, workspaces and keys, and removes members from a script", async () => {
    const env = { PORTICO_DATA_DIR: dataDir() };
    const org = JSON.parse((await runPortico(["admin", "org", "create", "--name", "acme", "--json"], env)).stdout);
    expect(org.interns_programme).toBe(false);
    expect(org.management_key).toMatch(/^pk-v1-/);
    const ws = JSON.parse(
      (await runPortico(["admin", "workspace", "create", "--org", org.organization_id, "--name", "Research", "--json"], env)).stdout,
    );
    expect(ws.slug).toBe("research");
    const key = JSON.parse(
      (
        await runPortico(
          ["admin", "key", "create", "--org", org.organization_id, "--workspace", ws.workspace_id, "--user", org.user_id, "--json"],
          env,
        )
      ).stdout,
    );
    expect(key.key).toMatch(/^pk-v1-/);
    expect(key.is_management_key).toBe(false);
    const list = JSON.parse((await runPortico(["admin", "key", "list", "--org", org.organization_id, "--json"], env)).stdout);
    expect(list.data).toHaveLength(2);
    expect(JSON.stringify(list)).not.toContain(key.key);
    const revoke = await runPortico(["admin", "key", "revoke", key.hash], env);
    expect(revoke.code).toBe(0);
    const removed = await runPortico(["admin", "member", "remove", "--org", org.organization_id, "--user", org.user_id], env);
    expect(removed.code).toBe(0);
    const again = await runPortico(["admin", "member", "remove", "--org", org.organization_id, "--user", org.user_id], env);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain("no active membership");
    const del = await runPortico(["admin", "workspace", "delete", ws.workspace_id], env);
    expect(del.code).toBe(0);
  });

  it("serves on an empty data folder, prints keys once, answers intern prompts out of the box, stops on SIGTERM", async () => {
    const env = { PORTICO_DATA_DIR: dataDir(), PORT: "0", PORTICO_GRPC_PORT: "0" };
    const { child, value } = await startPortico(["serve"], env, (out) => {
      const base = /API base URL:\s+(\S+)/.exec(out)?.[1];
      const key = /management key:\s+(pk-v1-[0-9a-f]{64})/.exec(out)?.[1];
      const intern = /intern id:\s+([0-9a-f-]{36})/.exec(out)?.[1];
      // Ready: one process logs "serving", the primary of several "serving with worker processes".
      const ready = /"msg":"serving/.test(out);
      return base && key && intern && ready ? { base, key, intern } : undefined;
    });
    try {
      const health = await fetch(value.base.replace(/\/api\/v1$/, "/healthz"));
      expect(health.status).toBe(200);
      const me = await fetch(`${value.base}/key`, { headers: { authorization: `Bearer ${value.key}` } });
      expect(me.status).toBe(200);
      expect(((await me.json()) as any).data.is_management_key).toBe(true);
      // The built-in intern runs `$ <command>` lines through the embedded host, attached before "serving".
      const res = await fetch(`${value.base}/interns/${value.intern}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${value.key}`, "content-type": "application/json" },
        body: JSON.stringify({ stream: true, messages: [{ role: "user", content: "$ echo out-of-the-box" }] }),
      });
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toContain("out-of-the-box\\n");
      expect(text).toContain('"finish_reason":"stop"');
      expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    } finally {
      const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    }
  });

  it("runs split: a core process and a gateway process joined over gRPC; the core's metrics on a port of their own", async () => {
    const env = { PORTICO_DATA_DIR: dataDir(), PORTICO_EMBEDDED_HOST: "false" };
    const boot = JSON.parse((await runPortico(["admin", "bootstrap", "--json"], env)).stdout);
    const metricsToken = "core-metrics-token-0123456789";
    const started = await startPortico(["core"], { ...env, PORTICO_GRPC_PORT: "0", PORTICO_METRICS_PORT: "0", PORTICO_METRICS_TOKEN: metricsToken }, (out) => {
      const grpc = /"url":"(http:\/\/127\.0\.0\.1:\d+)","msg":"core listening/.exec(out)?.[1];
      const metrics = /"url":"(http:\/\/127\.0\.0\.1:\d+\/metrics)","msg":"metrics listening/.exec(out)?.[1];
      return grpc && metrics ? { grpc, metrics } : undefined;
    });
    const core = { child: started.child, value: started.value.grpc };
    try {
      const gw = await startPortico(["gateway", "--core", core.value], { ...env, PORT: "0" }, (out) =>
        /"url":"(http:\/\/127\.0\.0\.1:\d+\/api\/v1)","msg":"gateway listening/.exec(out)?.[1],
      );
      try {
        const ready = await fetch(gw.value.replace(/\/api\/v1$/, "/readyz"));
        expect(ready.status).toBe(200);
        const me = await fetch(`${gw.value}/key`, { headers: { authorization: `Bearer ${boot.api_key}` } });
        expect(me.status).toBe(200);
        expect(((await me.json()) as any).data.organization_id).toBe(boot.organization_id);
        const bad = await fetch(`${gw.value}/key`, { headers: { authorization: "Bearer pk-v1-nope" } });
        expect(bad.status).toBe(401);

        // The core's own metrics count the RPCs the gateway made; the port needs the token and serves nothing else.
        const scrape = await fetch(started.value.metrics, { headers: { authorization: `Bearer ${metricsToken}` } });
        expect(scrape.status).toBe(200);
        const text = await scrape.text();
        const calls = (code: string) =>
          Number(new RegExp(`^portico_core_rpc_duration_seconds_count\\{procedure="portico\\.identity\\.v1\\.IdentityService/GetCaller",code="${code}"\\} (\\d+)$`, "m").exec(text)?.[1] ?? 0);
        expect(calls("ok")).toBe(1);
        expect(calls("unauthenticated")).toBe(1);
        const refused = await fetch(started.value.metrics);
        expect(refused.status).toBe(401);
        expect(await refused.json()).toEqual({ error: { code: 401, message: "Metrics need the bearer token configured in PORTICO_METRICS_TOKEN" } });
        const elsewhere = await fetch(started.value.metrics.replace(/\/metrics$/, "/healthz"));
        expect(elsewhere.status).toBe(404);
        expect(((await elsewhere.json()) as any).error.code).toBe(404);
        expect(started.output()).not.toContain(metricsToken);
      } finally {
        gw.child.kill("SIGTERM");
      }
    } finally {
      core.child.kill("SIGTERM");
    }
  });

  it("bootstraps exactly once when two processes start together on one empty PostgreSQL database", async () => {
    const { createTestPgDatabase } = await import("../../helpers/db.js");
    const pg = await createTestPgDatabase();
    const { randomBytes } = await import("node:crypto");
    const env = {
      DATABASE_URL: pg.url,
      PORT: "0",
      PORTICO_GRPC_PORT: "0",
      PORTICO_EMBEDDED_HOST: "false",
      // Processes sharing a database share the BYOK master key.
      PORTICO_MASTER_KEY: randomBytes(32).toString("base64"),
    };
    const started: Array<Awaited<ReturnType<typeof startPortico<boolean>>>> = [];
    try {
      // A serve logs "serving" ("serving with worker processes" with workers) only after its first-run
      // check (bootstrap or not) has finished, in every worker.
      const ready = (out: string) => (out.includes('"msg":"serving') ? true : undefined);
      started.push(
        ...(await Promise.all([
          startPortico(["serve"], { ...env, PORTICO_DATA_DIR: dataDir() }, ready),
          startPortico(["serve"], { ...env, PORTICO_DATA_DIR: dataDir() }, ready),
        ])),
      );
      const banners = started.filter((p) => p.output().includes("management key:")).length;
      expect(banners).toBe(1);
      const { default: pgLib } = await import("pg");
      const client = new pgLib.Client({ connectionString: pg.url });
      await client.connect();
      const orgs = await client.query('SELECT count(*)::int AS n FROM "Organization"');
      await client.end();
      expect(orgs.rows[0].n).toBe(1);
    } finally {
      await Promise.all(
        started.map(
          (p) =>
            new Promise<void>((r) => {
              p.child.on("exit", () => r());
              p.child.kill("SIGTERM");
            }),
        ),
      );
      await pg.drop();
    }
  }, 120_000);
});
