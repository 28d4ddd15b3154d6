/** runInternHostCommand: profile file + agent command after `--`, env limits, logs without secrets. */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { pino } from "pino";
import { runInternHostCommand } from "../../../src/host/cli.js";
import type { InternHost } from "../../../src/host/link.js";
import { scriptedAgentCommand } from "../../fixtures/scripted-agent.js";
import { contentOf, FakeCore, startRun } from "./fake-core.js";
import { REPO_ROOT } from "./helpers.js";

describe("runInternHostCommand", () => {
  it("runs a host from argv options until its signal aborts, never logging the token or prompt", async () => {
    const token = "pht-v1-0123456789abcdef0123";
    const core = await new FakeCore({ token, pingIntervalMs: 300, livenessTimeoutMs: 3000 }).listen();
    const dir = mkdtempSync(join(tmpdir(), "portico-cli-"));
    chmodSync(dir, 0o755); // agents run as an unprivileged user when tests run as root
    const profileFile = join(dir, "profile.json");
    writeFileSync(profileFile, JSON.stringify({ command: "ignored-by-argv", name: "scripted", env: { SECRET_VALUE: "s3cr3t-env" } }));
    const lines: string[] = [];
    const logger = pino(
      { level: "debug" },
      new Writable({
        write(chunk, _enc, cb) {
          lines.push(String(chunk));
          cb();
        },
      }),
    );
    const ac = new AbortController();
    let host: InternHost | undefined;
    const { command, args } = scriptedAgentCommand(REPO_ROOT);
    const done = runInternHostCommand({
      core: core.url,
      token,
      profile: profileFile,
      agent: [command, ...args],
      workRoot: join(dir, "work"),
      logger,
      env: { PORTICO_HOST_MAX_CONCURRENT_RUNS: "2" },
      signal: ac.signal,
      onStarted: (h) => (host = h),
    });
    const link = await core.nextLink(0);
    await link.waitFor((l) => l.hello);
    expect(link.hello).toMatchObject({ agentName: "scripted", maxConcurrentRuns: 2 });
    startRun(link, { runId: "r1", sessionId: "s1", prompt: "top secret prompt" });
    await link.waitForEvent("r1", "turnEnded", 20_000);
    expect(contentOf(link, "r1")).toBe("echo: top secret prompt");
    const pid = host!.sessions()[0]!.agentPid!;
    ac.abort();
    expect(await done).toBe(0);
    expect(() => process.kill(-pid, 0)).toThrow();
    const log = lines.join("");
    expect(log).toContain("link established");
    expect(log).not.toContain(token);
    expect(log).not.toContain("s3cr3t-env");
    expect(log).not.toContain("top secret prompt");
    await core.close();
    rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  it("rejects missing options before connecting", async () => {
    await expect(runInternHostCommand({ env: {}, agent: ["x"] })).rejects.toThrow(/--core/);
    await expect(runInternHostCommand({ env: {}, core: "http://x", agent: ["x"] })).rejects.toThrow(/--token/);
    await expect(runInternHostCommand({ env: {}, core: "http://x", token: "t" })).rejects.toThrow(/agent command/);
  });
});
