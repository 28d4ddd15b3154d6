/**
 * The description's table, to the letter: re-sending the answer to a question that was already
 * answered while the run is alive and paused on a new question is 404 interaction_unknown ("no pending
 * question has this tool_call_id"); 409 interaction_not_pending is only for a run that has ended.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnswerOutcome } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeHost, type FakeHost } from "./fake-host.js";
import { answerBody, chat, chatBody, createTestIntern, finalOf, toolCallOf } from "./sse-client.js";

describe.each(["sqlite", "postgresql"] as const)("re-sent answers (%s)", (provider) => {
  let h: Harness;
  let host: FakeHost;
  let internId = "";
  beforeAll(async () => {
    h = await startHarness({ provider, env: { PORTICO_INTERN_RATE_LIMIT: "1000" } });
    const intern = await createTestIntern(h);
    internId = intern.internId;
    host = startFakeHost({
      coreUrl: h.coreUrl,
      token: intern.token,
      // The first answer is taken and the run asks a second question; the second answer ends the turn.
      onAnswer: (a, run, fake) => {
        if (!run || run.pendingQuestion?.id !== a.interactionId) return AnswerOutcome.NOT_PENDING;
        const id = run.start.runId;
        queueMicrotask(() => {
          if (a.interactionId === firstQuestion.get(id)) {
            const q2 = randomUUID();
            run.pendingQuestion = { id: q2, options: ["allow_once", "reject_once"] };
            fake.emit(id, { case: "question", value: { interactionId: q2, kind: "permission", operation: "shell", options: ["allow_once", "reject_once"] } as never });
          } else {
            fake.emit(id, { case: "content", value: { text: "done" } as never });
            fake.emit(id, { case: "turnEnded", value: { stopReason: "end_turn" } as never });
            run.ended = true;
          }
        });
        return AnswerOutcome.ACCEPTED;
      },
    });
    await host.welcome;
  });
  afterAll(async () => {
    host?.kill();
    await h?.close();
  });
  const firstQuestion = new Map<string, string>();

  it("404 while the run waits on a new question, 409 once the run has ended", async () => {
    const key = h.tenant.apiKey;
    const first = await chat(h, internId, chatBody("ask"), { key });
    expect(first.status).toBe(200);
    const q1 = toolCallOf(first.chunks);
    const sessionId = finalOf(first.chunks).session_id;
    const runId = [...host.runs.values()].find((r) => r.pendingQuestion?.id === q1.id)!.start.runId;
    firstQuestion.set(runId, q1.id);

    const second = await chat(h, internId, answerBody(sessionId, q1.id, "allow_once"), { key });
    expect(second.status).toBe(200);
    const q2 = toolCallOf(second.chunks);
    expect(q2.id).not.toBe(q1.id);

    const resent = await chat(h, internId, answerBody(sessionId, q1.id, "allow_once"), { key });
    expect(resent.status).toBe(404);
    expect(resent.json.error.metadata.reason).toBe("interaction_unknown");

    const last = await chat(h, internId, answerBody(sessionId, q2.id, "allow_once"), { key });
    expect(last.status).toBe(200);
    const late = await chat(h, internId, answerBody(sessionId, q2.id, "allow_once"), { key });
    expect(late.status).toBe(409);
    expect(late.json.error.metadata.reason).toBe("interaction_not_pending");
  });
});
