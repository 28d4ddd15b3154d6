/**
 * TLS host link: the core serves TLS with a certificate from a CA generated here (openssl, nothing
 * committed); a host given that CA attaches and streams a run through the gateway; a host given
 * another CA (or the system CAs) is refused; the CLI takes the token from the environment or a file,
 * never needing argv.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pino } from "pino";
import { startCoreServer, type CoreServer } from "../../../src/core/server.js";
import { runInternHostCommand } from "../../../src/host/cli.js";
import { createInternHost, type InternHost } from "../../../src/host/link.js";
import { scriptedAgentLauncher } from "../../fixtures/scripted-agent.js";
import { startHarness, type Harness } from "../../helpers/harness.js";
import { chat, chatBody, contentOf, createTestIntern } from "../../integration/interns/sse-client.js";
import { waitFor } from "../../helpers/wait.js";

function openssl(args: string[], cwd: string): void {
  execFileSync("openssl", args, { cwd, stdio: "ignore" });
}

/** A CA and a server certificate for 127.0.0.1/localhost signed by it; a second, unrelated CA. */
function makePki(dir: string): void {
  openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=Portico Test CA", "-keyout", "ca.key", "-out", "ca.pem"], dir);
  openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=Other CA", "-keyout", "other.key", "-out", "other.pem"], dir);
  openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr"], dir);
  writeFileSync(join(dir, "ext.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n");
  openssl(["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "server.pem"], dir);
}

describe("TLS host link", () => {
  let h: Harness;
  let dir: string;
  let tlsCore: CoreServer;
  let internId: string;
  let token: string;
  const hosts: InternHost[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "portico-tls-"));
    chmodSync(dir, 0o755);
    makePki(dir);
    h = await startHarness({ provider: "sqlite", env: { PORTICO_INTERN_START_TIMEOUT_MS: "15000", PORTICO_INTERN_RATE_LIMIT: "10000" } });
    ({ internId, token } = await createTestIntern(h));
    tlsCore = await startCoreServer(h.core, {
      host: "127.0.0.1",
      port: 0,
      logger: pino({ level: "silent" }),
      tls: { cert: readFileSync(join(dir, "server.pem")), key: readFileSync(join(dir, "server.key")) },
    });
  }, 60_000);
  afterAll(async () => {
    for (const host of hosts) await host.close();
    await tlsCore?.close();
    await h?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function host(ca: string | undefined, logs?: string[], pin?: string): InternHost {
    const created = createInternHost({
      coreUrl: tlsCore.url,
      token,
      ...(ca ? { tls: { ca: readFileSync(join(dir, ca)) } } : {}),
      ...(pin ? { tls: { pinnedCert: readFileSync(join(dir, pin)) } } : {}),
      profile: { command: "scripted", name: "scripted" },
      workRoot: mkdtempSync(join(dir, "work-")),
      runAs: null,
      bwrapPath: null,
      launcher: scriptedAgentLauncher(),
      limits: { reconnectInitialMs: 50, reconnectMaxMs: 200 },
      logger: pino({ level: "debug" }, { write: (line: string) => void logs?.push(line) }),
    });
    hosts.push(created);
    return created;
  }

  it("serves TLS: a host trusting the test CA attaches and a run streams through the gateway", async () => {
    expect(tlsCore.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const ok = host("ca.pem");
    expect(await ok.ready).toBe(internId);
    const r = await chat(h, internId, chatBody(JSON.stringify({ steps: [{ content: "over TLS" }] })), { key: h.tenant.apiKey });
    expect(r.status).toBe(200);
    expect(contentOf(r.chunks)).toBe("over TLS");
    await ok.close();
  }, 30_000);

  it("refuses a core whose certificate the host cannot verify (wrong CA, or system CAs)", async () => {
    for (const ca of ["other.pem", undefined]) {
      const logs: string[] = [];
      const bad = host(ca, logs);
      const outcome = await Promise.race([bad.ready.then(() => "attached", () => "failed"), waitForLog(logs, /certificate|self.signed|issuer/i)]);
      expect(outcome).not.toBe("attached");
      expect(logs.join("\n")).toMatch(/certificate|self.signed|issuer/i);
      await bad.close();
    }
  }, 30_000);

  it("the embedded host pins the core's own certificate: that one attaches, another is refused", async () => {
    const logs: string[] = [];
    const wrong = host(undefined, logs, "other.pem");
    await waitForLog(logs, /pinned|certificate/i);
    await wrong.close();
    const pinned = host(undefined, [], "server.pem");
    expect(await pinned.ready).toBe(internId);
    await pinned.close();
  }, 30_000);

  it("the CLI reads the token from a file or PORTICO_HOST_TOKEN; --token still works with a warning", async () => {
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    for (const variant of ["file", "env", "argv"] as const) {
      const logs: string[] = [];
      const ac = new AbortController();
      let started: InternHost | undefined;
      const done = runInternHostCommand({
        core: tlsCore.url,
        coreCa: join(dir, "ca.pem"),
        ...(variant === "file" ? { tokenFile } : variant === "argv" ? { token } : {}),
        env: variant === "env" ? { PORTICO_HOST_TOKEN: token } : {},
        agent: [process.execPath, "-e", "0"],
        workRoot: mkdtempSync(join(dir, "cli-")),
        logger: pino({ level: "info" }, { write: (line: string) => void logs.push(line) }),
        signal: ac.signal,
        onStarted: (x) => (started = x),
      });
      await expect(started!.ready).resolves.toBe(internId);
      ac.abort();
      expect(await done).toBe(0);
      expect(logs.some((l) => l.includes("--token puts the host token"))).toBe(variant === "argv");
      expect(logs.join("\n")).not.toContain(token);
    }
    await expect(runInternHostCommand({ core: tlsCore.url, env: {}, agent: ["x"] })).rejects.toThrow(/PORTICO_HOST_TOKEN/);
  }, 60_000);
});

const waitForLog = (logs: string[], re: RegExp): Promise<string> =>
  waitFor(`a log line matching ${re}`, () => logs.some((l) => re.test(l)) && "logged", { timeoutMs: 20_000 });
