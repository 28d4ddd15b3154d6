/**
 * The host against the scripted agent running in-process, through a real link to a fake core:
 * event mapping, approval modes, answers, cancellation, failures and limits.
 */
import { afterEach, describe, expect, it } from "vitest";
import { AnswerOutcome, type Question } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { scriptedAgentLauncher, type Script, type ScriptedAgentConfig } from "../../fixtures/scripted-agent.js";
import { answer, contentOf, seqsOf, startRun, type FakeLink } from "./fake-core.js";
import { startHarness, type Harness } from "./helpers.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

const observed: Array<{ type: string; sessionId: string; detail?: string }> = [];

async function setup(config: ScriptedAgentConfig = {}, extra: Parameters<typeof startHarness>[0] = {}): Promise<FakeLink> {
  observed.length = 0;
  h = await startHarness({ launcher: scriptedAgentLauncher(config, { observe: (e) => observed.push(e) }), ...extra });
  return h.core.nextLink(0);
}

const script = (s: Script): string => JSON.stringify(s);

function expectContiguous(link: FakeLink, runId: string): void {
  const seqs = seqsOf(link, runId);
  expect(seqs).toEqual(seqs.map((_, i) => BigInt(i + 1)));
}

function questionOf(link: FakeLink, runId: string): Question {
  const ev = link.runEvents(runId).find((e) => e.event.case === "question");
  return ev!.event.value as Question;
}

describe("host with the scripted agent (in-process)", () => {
  it("self-drive: maps reasoning, content, model and usage; answers allow_once itself", async () => {
    const link = await setup({ model: "scripted-1" });
    expect(link.authorization).toBe("Bearer pht-test");
    expect(link.hello?.maxConcurrentRuns).toBeGreaterThan(0);
    startRun(link, {
      runId: "r1",
      sessionId: "s1",
      prompt: script({
        steps: [
          { reasoning: "thinking" },
          { content: "hello " },
          { question: { kind: "execute", title: "ls" } },
          { usageUpdate: { used: null, cost: { amount: 0.25, currency: "USD" } } },
          { model: "scripted-2" },
          { content: "done" },
        ],
        usage: { inputTokens: 3, outputTokens: 4, totalTokens: 7, cachedReadTokens: 1 },
      }),
    });
    const ended = await link.waitForEvent("r1", "turnEnded");
    expect((ended.event.value as { stopReason: string }).stopReason).toBe("end_turn");
    const cases = link.runEvents("r1").map((e) => e.event.case);
    expect(cases[0]).toBe("started");
    expect(cases).toEqual(["started", "model", "reasoning", "content", "content", "model", "content", "usage", "turnEnded"]);
    // self-drive picks allow_once ("allow"), never allow_always
    expect(contentOf(link, "r1")).toBe("hello [answer allow]done");
    expect(contentOf(link, "r1", "reasoning")).toBe("thinking");
    const models = link.runEvents("r1").filter((e) => e.event.case === "model").map((e) => (e.event.value as { model: string }).model);
    expect(models).toEqual(["scripted-1", "scripted-2"]);
    const usage = link.runEvents("r1").find((e) => e.event.case === "usage")!.event.value as { promptTokens: bigint; completionTokens: bigint; totalTokens: bigint; cost?: number; cachedTokens?: bigint };
    expect(usage.promptTokens).toBe(3n);
    expect(usage.completionTokens).toBe(4n);
    expect(usage.totalTokens).toBe(7n);
    expect(usage.cachedTokens).toBe(1n);
    // usage_update with used:null was repaired by the tap, so its cost arrived
    expect(usage.cost).toBeCloseTo(0.25);
    expectContiguous(link, "r1");
  });

  it("manual: forwards the question, refuses an answer not offered, delivers an offered one", async () => {
    const link = await setup();
    startRun(link, { runId: "r1", sessionId: "s1", manual: true, prompt: script({ steps: [{ question: { kind: "execute", title: "rm -rf x" } }, { content: "after" }] }) });
    await link.waitForEvent("r1", "question");
    const q = questionOf(link, "r1");
    expect(q.kind).toBe("permission");
    expect(q.operation).toBe("shell");
    expect(q.options).toEqual(["allow_once", "allow_always", "reject_once"]);
    await link.waitFor((l) => l.received.some((r) => r.message.case === "capacity" && r.message.value.pausedRuns === 1), 5000, "paused capacity");
    answer(link, "r1", q.interactionId, "reject_always");
    answer(link, "r1", "not-an-id", "allow_once");
    answer(link, "r1", q.interactionId, "allow_always");
    await link.waitForEvent("r1", "turnEnded");
    const results = link.received.filter((r) => r.message.case === "answerResult").map((r) => r.message.value as { outcome: AnswerOutcome });
    expect(results.map((r) => r.outcome)).toEqual([AnswerOutcome.NOT_OFFERED, AnswerOutcome.NOT_PENDING, AnswerOutcome.ACCEPTED]);
    expect(contentOf(link, "r1")).toBe("[answer allow_always]after");
    // answering again after the run ended
    answer(link, "r1", q.interactionId, "allow_once");
    await link.waitFor((l) => l.received.filter((r) => r.message.case === "answerResult").length === 4);
    expectContiguous(link, "r1");
  });

  it("manual: merges the tool kind from an earlier tool_call, keeps the agent's option subset and ids", async () => {
    const link = await setup();
    startRun(link, {
      runId: "r1",
      sessionId: "s1",
      manual: true,
      prompt: script({
        steps: [
          { toolCall: { id: "t9", kind: "edit", title: "edit file" } },
          { question: { toolCallId: "t9", kind: null, options: [{ id: "no", kind: "reject_once" }, { id: "ok", kind: "allow_once" }] } },
          { question: { kind: "think", options: [{ id: "fine", kind: "allow_once" }] } },
        ],
      }),
    });
    await link.waitForEvent("r1", "question");
    const q = questionOf(link, "r1");
    expect(q.operation).toBe("edit");
    expect(q.options).toEqual(["allow_once", "reject_once"]);
    answer(link, "r1", q.interactionId, "reject_once");
    const q2 = (await link.waitFor((l) => l.runEvents("r1").filter((e) => e.event.case === "question")[1])).event.value as Question;
    expect(q2.operation).toBeUndefined();
    expect(q2.options).toEqual(["allow_once"]);
    answer(link, "r1", q2.interactionId, "allow_once");
    await link.waitForEvent("r1", "turnEnded");
    expect(contentOf(link, "r1")).toBe("[answer no][answer fine]");
  });

  it("the answer cancel ends the run; the agent sees session/cancel", async () => {
    const link = await setup();
    startRun(link, { runId: "r1", sessionId: "s1", manual: true, prompt: script({ steps: [{ question: {} }, { content: "never" }] }) });
    await link.waitForEvent("r1", "question");
    answer(link, "r1", questionOf(link, "r1").interactionId, "cancel");
    const ended = await link.waitForEvent("r1", "runEnded");
    expect(ended.event.value).toMatchObject({ cancelled: true, deadline: false });
    expect(observed.some((e) => e.type === "cancel")).toBe(true);
    expect(contentOf(link, "r1")).toBe("");
  });

  it("CancelRun stops a streaming run promptly", async () => {
    const link = await setup();
    startRun(link, { runId: "r1", sessionId: "s1", prompt: script({ steps: [{ content: "a" }, { sleep: 30_000 }] }) });
    await link.waitForEvent("r1", "content");
    link.send({ message: { case: "cancelRun", value: { runId: "r1", reason: 1 } } });
    const ended = await link.waitForEvent("r1", "runEnded", 3000);
    expect(ended.event.value).toMatchObject({ cancelled: true });
  });

  it("a prompt error fails the turn with turn_failed", async () => {
    const link = await setup();
    startRun(link, { runId: "r1", sessionId: "s1", prompt: script({ steps: [{ content: "x" }, { fail: { message: "model exploded" } }] }) });
    const failed = await link.waitForEvent("r1", "turnFailed");
    expect(failed.event.value).toMatchObject({ code: 502, reason: "turn_failed" });
    expect((failed.event.value as { message: string }).message).toContain("model exploded");
  });

  it("the backstop interaction deadline cancels a paused run", async () => {
    const link = await setup();
    startRun(link, { runId: "r1", sessionId: "s1", manual: true, deadlineMs: 300, prompt: script({ steps: [{ question: {} }] }) });
    const ended = await link.waitForEvent("r1", "runEnded", 5000);
    expect(ended.event.value).toMatchObject({ cancelled: true, deadline: true });
  });

  it("refuses runs beyond capacity (busy), a slow agent start (timeout) and a wrong protocol version", async () => {
    const link = await setup({ initDelayMs: 0 }, { limits: { maxConcurrentRuns: 1 } });
    startRun(link, { runId: "r1", sessionId: "s1", prompt: script({ steps: [{ hang: {} }] }) });
    await link.waitForEvent("r1", "started");
    startRun(link, { runId: "r2", sessionId: "s2", prompt: "hi" });
    const rej = await link.waitForEvent("r2", "rejected");
    expect(rej.event.value).toMatchObject({ reason: "busy" });
    expect(rej.seq).toBe(1n);
    await h!.dispose();

    const link2 = await setup({ initDelayMs: 3000 }, { limits: { agentStartBudgetMs: 200 } });
    startRun(link2, { runId: "r3", sessionId: "s1", prompt: "hi" });
    expect((await link2.waitForEvent("r3", "rejected")).event.value).toMatchObject({ reason: "timeout" });
    await h!.dispose();

    const link3 = await setup({ protocolVersion: 2 });
    startRun(link3, { runId: "r4", sessionId: "s1", prompt: "hi" });
    const r4 = (await link3.waitForEvent("r4", "rejected")).event.value as { reason: string; message: string };
    expect(r4.reason).toBe("turn_failed");
    expect(r4.message).toContain("protocol version 2");
  });

  it("reuses the agent session across runs and sets profile modes per approval mode", async () => {
    const link = await setup({ modes: { current: "default", available: ["default", "yolo", "careful"] } }, { profile: { modes: { selfDrive: "yolo", manual: "careful" } } });
    startRun(link, { runId: "r1", sessionId: "s1", prompt: "one" });
    await link.waitForEvent("r1", "turnEnded");
    startRun(link, { runId: "r2", sessionId: "s1", manual: true, prompt: "two" });
    await link.waitForEvent("r2", "turnEnded");
    expect(contentOf(link, "r2")).toBe("echo: two");
    expect(observed.filter((e) => e.type === "new")).toHaveLength(1);
    expect(observed.filter((e) => e.type === "set_mode").map((e) => e.detail)).toEqual(["yolo", "careful"]);
  });
});
