/**
 * An agent that ends its own turn as "cancelled" (codex on reject_once), with no session/cancel from
 * Portico, ended the turn normally: the host reports TurnEnded{cancelled}, not RunEnded (which the core
 * renders as 410 run_ended). A cancel Portico asked for still ends as RunEnded. Issue 25.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Question } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { scriptedAgentLauncher } from "../../fixtures/scripted-agent.js";
import { answer, startRun, type FakeLink } from "./fake-core.js";
import { startHarness, type Harness } from "./helpers.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

async function setup(): Promise<FakeLink> {
  h = await startHarness({ launcher: scriptedAgentLauncher({}) });
  return h.core.nextLink(0);
}

const askThenCancelOnReject = JSON.stringify({
  steps: [{ question: { kind: "execute", title: "rm -rf x", onReject: "cancelled" } }, { content: "after" }],
});

describe("an agent's own cancelled stop reason", () => {
  it("is a normal end (TurnEnded) when Portico sent no session/cancel", async () => {
    const link = await setup();
    startRun(link, { runId: "r1", sessionId: "s1", manual: true, prompt: askThenCancelOnReject });
    const q = (await link.waitForEvent("r1", "question")).event.value as Question;
    answer(link, "r1", q.interactionId, "reject_once");
    const ended = await link.waitForEvent("r1", "turnEnded");
    expect((ended.event.value as { stopReason: string }).stopReason).toBe("cancelled");
    expect(link.runEvents("r1").map((e) => e.event.case)).not.toContain("runEnded");
  });

  it("is RunEnded when the caller answered cancel (Portico sent session/cancel)", async () => {
    const link = await setup();
    startRun(link, { runId: "r2", sessionId: "s2", manual: true, prompt: askThenCancelOnReject });
    const q = (await link.waitForEvent("r2", "question")).event.value as Question;
    answer(link, "r2", q.interactionId, "cancel");
    await link.waitForEvent("r2", "runEnded");
    expect(link.runEvents("r2").map((e) => e.event.case)).not.toContain("turnEnded");
  });
});
