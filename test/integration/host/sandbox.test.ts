/**
 * Manual mode sandbox: commands the agent runs through client terminals cannot write outside the
 * working folder or reach the network unless an allow answer approved that very command; without
 * bubblewrap manual mode refuses shell commands; self-drive runs them unsandboxed.
 */
import { chmodSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Question } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { findOnPath } from "../../../src/host/sandbox.js";
import { scriptedAgentLauncher, type Script } from "../../fixtures/scripted-agent.js";
import { answer, contentOf, startRun } from "./fake-core.js";
import { startHarness, type Harness } from "./helpers.js";

const hasBwrap = findOnPath("bwrap") !== undefined;

let h: Harness | undefined;
let outside: string;
let server: net.Server;
let port = 0;
let connections = 0;

beforeAll(async () => {
  // Not under /tmp: the sandbox gives commands a private /tmp, so this checks the read-only root.
  outside = mkdtempSync(join("/var/tmp", "portico-outside-"));
  chmodSync(outside, 0o777); // writable by anyone: only the sandbox can stop a write
  server = net.createServer((s) => {
    connections++;
    s.end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as net.AddressInfo).port;
});
afterAll(async () => {
  rmSync(outside, { recursive: true, force: true });
  await new Promise<void>((r) => server.close(() => r()));
});
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

const connectCmd = (): string =>
  `${process.execPath} -e "require('net').connect(${port},'127.0.0.1').on('connect',()=>{console.log('CONNECTED');process.exit(0)}).on('error',e=>{console.log('NOCONN',e.code);process.exit(3)})"`;

describe.skipIf(!hasBwrap)("manual mode sandbox (bubblewrap)", () => {
  it("a sandboxed command cannot write outside its folder or connect; after allow the escalated one can", async () => {
    h = await startHarness({ launcher: scriptedAgentLauncher() });
    const link = await h.core.nextLink(0);
    connections = 0;
    const script: Script = {
      steps: [
        { terminal: { command: `touch ${outside}/sandboxed.txt` } },
        { terminal: { command: connectCmd() } },
        { terminal: { command: "touch inside.txt && echo INSIDE-OK" } },
        { question: { kind: "execute", title: "escalate", rawInput: { command: `touch ${outside}/escalated.txt && ${connectCmd()}` } } },
        { terminal: { command: `touch ${outside}/unapproved.txt` } },
        { terminal: { command: `touch ${outside}/escalated.txt && ${connectCmd()}` } },
        { terminal: { command: `touch ${outside}/escalated.txt && ${connectCmd()}`.replace("escalated", "again") } },
      ],
    };
    startRun(link, { runId: "r1", sessionId: "s1", manual: true, prompt: JSON.stringify(script) });
    const q = (await link.waitForEvent("r1", "question", 15_000)).event.value as Question;
    expect(q.operation).toBe("shell");
    answer(link, "r1", q.interactionId, "allow_once");
    await link.waitForEvent("r1", "turnEnded", 15_000);
    const text = contentOf(link, "r1");
    const cwd = h.host.sessions()[0]!.cwd;
    expect(existsSync(join(outside, "sandboxed.txt"))).toBe(false);
    expect(text).toMatch(/Read-only file system/);
    expect(text).toContain("NOCONN");
    expect(text).toContain("INSIDE-OK");
    expect(existsSync(join(cwd, "inside.txt"))).toBe(true);
    expect(existsSync(join(outside, "escalated.txt"))).toBe(true);
    expect(text).toContain("CONNECTED");
    expect(connections).toBe(1);
    // allow_once escalated only the approved command, once: neither another command nor a variant of it
    expect(existsSync(join(outside, "unapproved.txt"))).toBe(false);
    expect(existsSync(join(outside, "again.txt"))).toBe(false);
  }, 30_000);

  it("allow_always escalates the approved command for the rest of the run; self-drive runs unsandboxed", async () => {
    h = await startHarness({ launcher: scriptedAgentLauncher() });
    const link = await h.core.nextLink(0);
    const approved = `touch ${outside}/always1.txt ${outside}/always2.txt`;
    const steps: Script["steps"] = [
      { question: { kind: "execute", rawInput: { command: approved } } },
      { terminal: { command: approved } },
      { terminal: { command: `touch ${outside}/other.txt` } },
    ];
    startRun(link, { runId: "r1", sessionId: "s1", manual: true, prompt: JSON.stringify({ steps }) });
    const q = (await link.waitForEvent("r1", "question", 15_000)).event.value as Question;
    answer(link, "r1", q.interactionId, "allow_always");
    await link.waitForEvent("r1", "turnEnded", 15_000);
    expect(existsSync(join(outside, "always1.txt"))).toBe(true);
    expect(existsSync(join(outside, "always2.txt"))).toBe(true);
    expect(existsSync(join(outside, "other.txt"))).toBe(false);
    // the next manual run is sandboxed again
    startRun(link, { runId: "r2", sessionId: "s1", manual: true, prompt: JSON.stringify({ steps: [{ terminal: { command: `touch ${outside}/next-run.txt` } }] }) });
    await link.waitForEvent("r2", "turnEnded", 15_000);
    expect(existsSync(join(outside, "next-run.txt"))).toBe(false);
    // self-drive: unsandboxed
    startRun(link, { runId: "r3", sessionId: "s1", prompt: JSON.stringify({ steps: [{ terminal: { command: `touch ${outside}/self-drive.txt` } }] }) });
    await link.waitForEvent("r3", "turnEnded", 15_000);
    expect(existsSync(join(outside, "self-drive.txt"))).toBe(true);
  }, 30_000);
});

describe("manual mode without bubblewrap", () => {
  it("refuses shell commands instead of running them unsandboxed", async () => {
    h = await startHarness({ launcher: scriptedAgentLauncher(), bwrapPath: null });
    const link = await h.core.nextLink(0);
    startRun(link, { runId: "r1", sessionId: "s1", manual: true, prompt: JSON.stringify({ steps: [{ terminal: { command: `touch ${outside}/nobwrap.txt` } }] }) });
    const failed = await link.waitForEvent("r1", "turnFailed", 10_000);
    expect((failed.event.value as { message: string }).message).toContain("bubblewrap");
    expect(existsSync(join(outside, "nobwrap.txt"))).toBe(false);
  });
});

describe.skipIf(!hasBwrap)("process sandbox strategy", () => {
  it("runs the whole agent under bubblewrap: it can write its working folder only, and still talks ACP", async () => {
    const { scriptedAgentCommand } = await import("../../fixtures/scripted-agent.js");
    const { REPO_ROOT } = await import("./helpers.js");
    h = await startHarness({ profile: { ...scriptedAgentCommand(REPO_ROOT), sandbox: "process" } });
    const link = await h.core.nextLink(0);
    const steps: Script["steps"] = [{ spawn: `touch ${outside}/from-agent.txt; touch agent-inside.txt` }, { sleep: 500 }, { content: "ok" }];
    startRun(link, { runId: "r1", sessionId: "s1", prompt: JSON.stringify({ steps }) });
    await link.waitForEvent("r1", "turnEnded", 20_000);
    expect(contentOf(link, "r1")).toBe("ok");
    expect(existsSync(join(h.host.sessions()[0]!.cwd, "agent-inside.txt"))).toBe(true);
    expect(existsSync(join(outside, "from-agent.txt"))).toBe(false);
  }, 30_000);
});
