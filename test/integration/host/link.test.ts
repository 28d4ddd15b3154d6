/**
 * The link and process lifecycle with the scripted agent as a real subprocess: silent and dropped
 * links, reconnect with held paused runs, Welcome cancelling held runs, agent death without orphans.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Question } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { scriptedAgentCommand, scriptedAgentLauncher, type Script } from "../../fixtures/scripted-agent.js";
import { answer, contentOf, startRun, type FakeLink } from "./fake-core.js";
import { REPO_ROOT, groupAlive, startHarness, waitUntil, type Harness } from "./helpers.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

const script = (s: Script): string => JSON.stringify(s);
const subprocess = () => ({ profile: { ...scriptedAgentCommand(REPO_ROOT), name: "scripted" } });

async function pausedRun(link: FakeLink, runId: string, sessionId: string): Promise<Question> {
  startRun(link, { runId, sessionId, manual: true, prompt: script({ steps: [{ content: "before " }, { question: { kind: "execute" } }, { content: "after" }] }) });
  return (await link.waitForEvent(runId, "question", 15_000)).event.value as Question;
}

describe("link and process lifecycle (scripted agent subprocess)", () => {
  it("a silent link is noticed (the liveness timeout); the paused run is held, re-announced and still answerable", async () => {
    h = await startHarness(subprocess());
    const link = await h.core.nextLink(0);
    expect(link.hello?.agentName).toBe("scripted");
    const q = await pausedRun(link, "r1", "s1");
    link.silence();
    // The silent link stays open: only the host's liveness timeout makes it connect again.
    const link2 = await h.core.nextLink(1, 30_000);
    await link2.waitFor((l) => l.hello);
    expect(link2.hello!.heldRuns).toHaveLength(1);
    expect(link2.hello!.heldRuns[0]).toMatchObject({ runId: "r1", pendingInteractionId: q.interactionId });
    expect(link2.hello!.heldRuns[0]!.lastSeq).toBeGreaterThanOrEqual(3n);
    answer(link2, "r1", q.interactionId, "allow_once");
    const ended = await link2.waitForEvent("r1", "turnEnded");
    // seq continues where the first link left off
    expect(ended.seq).toBeGreaterThan(link2.hello!.heldRuns[0]!.lastSeq);
    expect(contentOf(link2, "r1")).toBe("[answer allow]after");
    const pid = h.host.sessions()[0]!.agentPid!;
    expect(groupAlive(pid)).toBe(true);
    await h.dispose();
    h = undefined;
    await waitUntil(() => !groupAlive(pid), 3000, "process group gone");
  }, 30_000);

  it("a dropped connection reconnects; streaming runs are cancelled on the agent, not reported", async () => {
    const seen: string[] = [];
    h = await startHarness({ launcher: scriptedAgentLauncher({}, { observe: (e) => seen.push(e.type) }) });
    const link = await h.core.nextLink(0);
    startRun(link, { runId: "r1", sessionId: "s1", prompt: script({ steps: [{ content: "a" }, { sleep: 30_000 }] }) });
    await link.waitForEvent("r1", "content");
    h.core.dropConnections();
    const link2 = await h.core.nextLink(1, 5000);
    await link2.waitFor((l) => l.hello);
    expect(link2.hello!.heldRuns).toHaveLength(0);
    await waitUntil(() => seen.includes("cancel"), 3000, "agent cancel");
    await waitUntil(() => h!.host.capacity().runningRuns === 0, 3000, "run released");
    expect(link2.runEvents("r1")).toHaveLength(0);
    // the session works again
    startRun(link2, { runId: "r2", sessionId: "s1", prompt: "again" });
    await link2.waitForEvent("r2", "turnEnded");
    expect(contentOf(link2, "r2")).toBe("echo: again");
  });

  it("Welcome.cancel_run_ids cancels a held run; the grace period cancels an unclaimed one", async () => {
    h = await startHarness({ launcher: scriptedAgentLauncher(), limits: { heldRunGraceMs: 60_000 } });
    const link = await h.core.nextLink(0);
    const q = await pausedRun(link, "r1", "s1");
    h.core.cancelOnWelcome = ["r1"];
    h.core.dropConnections();
    const link2 = await h.core.nextLink(1, 5000);
    await link2.waitFor((l) => l.hello);
    expect(link2.hello!.heldRuns.map((r) => r.runId)).toEqual(["r1"]);
    await waitUntil(() => h!.host.capacity().runningRuns === 0, 3000, "held run cancelled");
    answer(link2, "r1", q.interactionId, "allow_once");
    await link2.waitFor((l) => l.received.find((r) => r.message.case === "answerResult"));
    expect(link2.runEvents("r1")).toHaveLength(0);
    await h.dispose();

    h = await startHarness({ launcher: scriptedAgentLauncher(), limits: { heldRunGraceMs: 200 }, core: { livenessTimeoutMs: 60_000 } });
    const l3 = await h.core.nextLink(0);
    await pausedRun(l3, "r2", "s1");
    // keep the host disconnected longer than the grace period: refuse the next attach
    h.core.opts.token = "other";
    h.core.dropConnections();
    await waitUntil(() => h!.host.capacity().runningRuns === 0, 5000, "grace expiry");
  });

  it("agent death fails the run with a clear reason and leaves no process behind", async () => {
    h = await startHarness(subprocess());
    const link = await h.core.nextLink(0);
    startRun(link, {
      runId: "r1",
      sessionId: "s1",
      prompt: script({ steps: [{ spawn: "sleep 300" }, { stderr: "secret-ish diagnostics" }, { content: "x" }, { sleep: 300 }, { exit: 3 }] }),
    });
    await link.waitForEvent("r1", "content", 15_000);
    const pid = h.host.sessions()[0]!.agentPid!;
    expect(pid).toBeGreaterThan(0);
    const failed = await link.waitForEvent("r1", "turnFailed", 10_000);
    expect(failed.event.value).toMatchObject({ code: 502, reason: "turn_failed" });
    expect((failed.event.value as { message: string }).message).toContain("exited with code 3");
    expect((failed.event.value as { message: string }).message).not.toContain("secret-ish");
    await waitUntil(() => !groupAlive(pid), 3000, "process group gone");
    // the next run starts a fresh agent
    startRun(link, { runId: "r2", sessionId: "s1", prompt: "back" });
    await link.waitForEvent("r2", "turnEnded", 15_000);
    expect(contentOf(link, "r2")).toBe("echo: back");
  }, 40_000);

  it("an agent that ignores session/cancel is killed after the cancel grace", async () => {
    h = await startHarness({ ...subprocess(), limits: { cancelGraceMs: 300 } });
    const link = await h.core.nextLink(0);
    startRun(link, { runId: "r1", sessionId: "s1", prompt: script({ steps: [{ content: "x" }, { hang: { ignoreCancel: true } }] }) });
    await link.waitForEvent("r1", "content", 15_000);
    const pid = h.host.sessions()[0]!.agentPid!;
    link.send({ message: { case: "cancelRun", value: { runId: "r1", reason: 4 } } });
    const ended = await link.waitForEvent("r1", "runEnded", 5000);
    expect(ended.event.value).toMatchObject({ cancelled: true });
    await waitUntil(() => !groupAlive(pid), 5000, "process group gone");
  }, 30_000);
});
