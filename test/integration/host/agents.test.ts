/**
 * The host against real peers: the built-in agent (as the embedded host runs it, a subprocess)
 * and the SDK 1.9.0 example agent (an independent implementation of the protocol).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { Question } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { startEmbeddedHost } from "../../../src/host/embedded.js";
import type { InternHost } from "../../../src/host/link.js";
import { answer, contentOf, FakeCore, startRun } from "./fake-core.js";
import { REPO_ROOT, startHarness, type Harness } from "./helpers.js";

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

async function embedded(): Promise<{ core: FakeCore; host: InternHost; dataDir: string }> {
  const core = await new FakeCore({ token: "pht-builtin", pingIntervalMs: 300, livenessTimeoutMs: 3000 }).listen();
  const dataDir = mkdtempSync(join(tmpdir(), "portico-data-"));
  const host = startEmbeddedHost({ coreUrl: core.url, token: "pht-builtin", dataDir, internId: "intern-b" });
  cleanup.push(async () => {
    await host.close();
    await core.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  await host.ready;
  return { core, host, dataDir };
}

describe("built-in agent through the embedded host", () => {
  it("self-drive: runs $ commands, streams output, describes its plan, reports usage", async () => {
    const { core, host, dataDir } = await embedded();
    const link = await core.nextLink(0);
    expect(link.hello?.agentName).toBe("portico-builtin");
    startRun(link, { runId: "r1", sessionId: "sess-1", prompt: "please\n$ echo hello-from-builtin\n$ pwd" });
    await link.waitForEvent("r1", "turnEnded", 20_000);
    const text = contentOf(link, "r1");
    const cwd = join(dataDir, "interns", "intern-b", "sessions", "sess-1");
    expect(host.sessions()[0]!.cwd).toBe(cwd);
    expect(text).toContain("hello-from-builtin");
    expect(text).toContain(cwd);
    expect(text).toContain("[exit 0]");
    expect(contentOf(link, "r1", "reasoning")).toMatch(/^Plan: run 2 commands/);
    // self-drive does not claim to ask, and only the output of `pwd` (asked for) names the folder
    expect(contentOf(link, "r1", "reasoning")).not.toMatch(/ask/i);
    expect(contentOf(link, "r1", "reasoning")).not.toContain(dataDir);
    expect(text.split(cwd).length - 1).toBe(1);
    const usage = link.runEvents("r1").find((e) => e.event.case === "usage")!.event.value as { promptTokens: bigint; totalTokens: bigint };
    expect(usage.promptTokens).toBe(6n);
    expect(usage.totalTokens).toBeGreaterThan(6n);
  }, 30_000);

  it("manual: pauses before each command; allow runs it, reject skips it; other prompts get help", async () => {
    const { core, dataDir } = await embedded();
    const link = await core.nextLink(0);
    startRun(link, { runId: "r1", sessionId: "s", manual: true, prompt: "$ echo one > one.txt\n$ echo two > two.txt" });
    const q1 = (await link.waitForEvent("r1", "question", 20_000)).event.value as Question;
    expect(q1).toMatchObject({ kind: "permission", operation: "shell", options: ["allow_once", "allow_always", "reject_once"] });
    answer(link, "r1", q1.interactionId, "allow_once");
    const q2 = (await link.waitFor((l) => l.runEvents("r1").filter((e) => e.event.case === "question")[1], 10_000)).event.value as Question;
    answer(link, "r1", q2.interactionId, "reject_once");
    await link.waitForEvent("r1", "turnEnded", 10_000);
    const cwd = join(dataDir, "interns", "intern-b", "sessions", "s");
    expect(readFileSync(join(cwd, "one.txt"), "utf8")).toBe("one\n");
    expect(existsSync(join(cwd, "two.txt"))).toBe(false);
    expect(contentOf(link, "r1")).toContain("Skipped `echo two > two.txt`");
    startRun(link, { runId: "r2", sessionId: "s", manual: true, prompt: "what can you do?" });
    await link.waitForEvent("r2", "turnEnded", 10_000);
    expect(contentOf(link, "r2")).toContain("$ ls -la");
  }, 30_000);

  it("cancel while a command runs ends the run", async () => {
    const { core } = await embedded();
    const link = await core.nextLink(0);
    startRun(link, { runId: "r1", sessionId: "s", prompt: "$ echo started; sleep 30" });
    await link.waitFor((l) => contentOf(l, "r1").includes("started"), 20_000, "command output");
    link.send({ message: { case: "cancelRun", value: { runId: "r1", reason: 1 } } });
    const ended = await link.waitForEvent("r1", "runEnded", 5000);
    expect(ended.event.value).toMatchObject({ cancelled: true });
  }, 30_000);
});

describe("SDK 1.9.0 example agent (acp-legacy)", () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.dispose();
    h = undefined;
  });

  it("drives a turn with an edit permission in manual mode", async () => {
    h = await startHarness({
      profile: { command: process.execPath, args: [join(REPO_ROOT, "node_modules/acp-legacy/dist/examples/agent.js")], name: "legacy" },
    });
    const link = await h.core.nextLink(0);
    startRun(link, { runId: "r1", sessionId: "s1", manual: true, prompt: "hello" });
    const q = (await link.waitForEvent("r1", "question", 20_000)).event.value as Question;
    expect(q.operation).toBe("edit");
    expect(q.options).toEqual(["allow_once", "reject_once"]);
    answer(link, "r1", q.interactionId, "allow_once");
    const ended = await link.waitForEvent("r1", "turnEnded", 20_000);
    expect((ended.event.value as { stopReason: string }).stopReason).toBe("end_turn");
    expect(contentOf(link, "r1").length).toBeGreaterThan(20);
  }, 40_000);
});
