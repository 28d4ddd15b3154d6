/**
 * Intern chat faults and guards over HTTP: access rules, validation, limits, link loss (kill and
 * silence), reconnect with held runs, deadlines (timer and database sweep), answer races.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AnswerOutcome, CancelReason } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { waitFor } from "../../helpers/wait.js";
import { startFakeHost, type FakeHost } from "./fake-host.js";
import { answerBody, chat, chatBody, contentOf, createTestIntern, finalOf, finishOf, toolCallOf } from "./sse-client.js";

const BASE_ENV = {
  PORTICO_HEARTBEAT_INTERVAL_MS: "5000",
  PORTICO_INTERN_START_TIMEOUT_MS: "1500",
  PORTICO_LINK_PING_INTERVAL_MS: "100",
  PORTICO_LINK_LIVENESS_TIMEOUT_MS: "500",
  PORTICO_INTERN_RATE_LIMIT: "10000",
};

async function pause(h: Harness, internId: string, key: string, extra: Record<string, unknown> = {}) {
  const r = await chat(h, internId, chatBody("ask", { approval_mode: "manual", ...extra }), { key });
  expect(r.status).toBe(200);
  const call = toolCallOf(r.chunks);
  return { call, sessionId: finalOf(r.chunks).session_id as string, chunks: r.chunks };
}

describe.each(["sqlite", "postgresql"] as const)("intern chat guards and faults (%s)", (provider) => {
  let h: Harness;
  let internId: string;
  let token: string;
  let host: FakeHost;
  let key: string;

  beforeAll(async () => {
    h = await startHarness({ provider, env: BASE_ENV });
    ({ internId, token } = await createTestIntern(h));
    host = startFakeHost({ coreUrl: h.coreUrl, token });
    await host.welcome;
    key = h.tenant.apiKey;
  });
  afterAll(async () => {
    host?.kill();
    await h?.close();
  });

  it("refuses callers: 401 without a key, 404 without metadata outside the programme, 404 not_found for other tenants, 403 departed creator", async () => {
    const none = await chat(h, internId, chatBody("hello"));
    expect(none.status).toBe(401);
    expect(none.json.error.metadata).toBeUndefined();

    const outsider = await h.createTenant({ internsProgramme: false });
    const out = await chat(h, internId, chatBody("hello"), { key: outsider.apiKey });
    expect(out.status).toBe(404);
    expect(out.json).toEqual({ error: { code: 404, message: expect.any(String) } });
    // Even a malformed request from an outsider gets the bare 404.
    const outBad = await chat(h, internId, { stream: false, messages: "x" }, { key: outsider.apiKey });
    expect(outBad.status).toBe(404);
    expect(outBad.json.error.metadata).toBeUndefined();
    const outOther = await api(h, "GET", `/interns/${internId}`, { key: outsider.apiKey });
    expect(outOther.status).toBe(404);

    const member = await h.createTenant({ internsProgramme: true });
    const foreign = await chat(h, internId, chatBody("hello"), { key: member.apiKey });
    expect(foreign.status).toBe(404);
    expect(foreign.json.error.metadata).toEqual({ reason: "not_found", retryable: false });
    const unknown = await chat(h, "00000000-0000-4000-8000-000000000000", chatBody("hello"), { key });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.metadata.reason).toBe("not_found");
    for (const odd of ["not-a-uuid", "a%00b", "%C3%A9"]) {
      const res = await chat(h, odd, chatBody("hello"), { key });
      expect(res.status, odd).toBe(404);
      expect(res.json.error.metadata.reason).toBe("not_found");
    }

    const departed = await h.createTenant({ internsProgramme: true });
    await h.identity.removeMember(departed.organizationId, departed.userId);
    const gone = await chat(h, internId, chatBody("hello"), { key: departed.apiKey });
    expect(gone.status).toBe(403);
    expect(gone.json.error.metadata).toBeUndefined();
  });

  it.each([
    ["stream not true", { messages: [{ role: "user", content: "hi" }], stream: false }, "stream"],
    ["stream missing", { messages: [{ role: "user", content: "hi" }] }, "stream"],
    ["no messages", { stream: true, messages: [] }, "messages"],
    ["messages not an array", { stream: true, messages: "hi" }, "messages"],
    ["unknown role", { stream: true, messages: [{ role: "robot", content: "hi" }] }, "messages[0].role"],
    ["last message assistant", { stream: true, messages: [{ role: "assistant", content: "hi" }] }, "messages[0].role"],
    ["tool without session_id", { stream: true, messages: [{ role: "tool", tool_call_id: "x", content: "allow_once" }] }, "session_id"],
    ["tool_call_id too long", { stream: true, session_id: "s", messages: [{ role: "tool", tool_call_id: "x".repeat(129), content: "allow_once" }] }, "messages[0].tool_call_id"],
    ["empty model", { stream: true, model: "", messages: [{ role: "user", content: "hi" }] }, "model"],
    ["model too long", { stream: true, model: "m".repeat(257), messages: [{ role: "user", content: "hi" }] }, "model"],
    ["session_id too long", { stream: true, session_id: "s".repeat(257), messages: [{ role: "user", content: "hi" }] }, "session_id"],
    ["bad approval_mode", { stream: true, approval_mode: "auto", messages: [{ role: "user", content: "hi" }] }, "approval_mode"],
    ["prompt too long", { stream: true, messages: [{ role: "user", content: "x".repeat(32_001) }] }, "messages[0].content"],
    ["content of the wrong shape", { stream: true, messages: [{ role: "user", content: { text: "hi" } }] }, "messages[0].content"],
    ["role of the wrong type", { stream: true, messages: [{ role: 3, content: "hi" }] }, "messages[0].role"],
  ])("400 bad_request naming the field: %s", async (_name, body, field) => {
    const r = await chat(h, internId, body, { key });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ code: 400, metadata: { reason: "bad_request", retryable: false, field } });
  });

  it("413 payload_too_large over 1048576 bytes", async () => {
    const big = JSON.stringify(chatBody("x".repeat(1_048_600)));
    const r = await chat(h, internId, undefined, { key, rawBody: big });
    expect(r.status).toBe(413);
    expect(r.json.error).toMatchObject({ code: 413, metadata: { reason: "payload_too_large", retryable: false } });
  });

  it("accepts array text content, ignores unknown OpenAI fields and uses x-session-id when the body has none", async () => {
    const r = await chat(
      h,
      internId,
      { stream: true, temperature: 0.3, tools: [], messages: [{ role: "system", content: "x" }, { role: "user", content: [{ type: "text", text: "hel" }, { type: "text", text: "lo" }] }] },
      { key, headers: { "x-session-id": "header-session-1" } },
    );
    expect(r.status).toBe(200);
    expect(contentOf(r.chunks)).toBe("Hello world");
    expect(finalOf(r.chunks).session_id).toBe("header-session-1");
    const bodyWins = await chat(h, internId, chatBody("hello", { session_id: "body-session-1" }), { key, headers: { "x-session-id": "header-session-2" } });
    expect(finalOf(bodyWins.chunks).session_id).toBe("body-session-1");
  });

  it("a client closing after the [DONE] that follows tool_calls keeps the run paused", async () => {
    const { call, sessionId } = await pause(h, internId, key);
    // No sleep: a cancel sent on the close would end the run before the answer (which then fails) or
    // reach the host before the answer's run has ended (and be listed below).
    const r = await chat(h, internId, answerBody(sessionId, call.id, "reject_once"), { key });
    expect(r.status).toBe(200);
    expect(contentOf(r.chunks)).toBe("rejected");
    expect(host.cancels.find((c) => host.runs.get(c.runId)?.pendingQuestion?.id === call.id)).toBeUndefined();
  });

  it("two answers at once: one is delivered, the other finds no pending question", async () => {
    const { call, sessionId } = await pause(h, internId, key);
    const [a, b] = await Promise.all([
      chat(h, internId, answerBody(sessionId, call.id, "allow_once"), { key }),
      chat(h, internId, answerBody(sessionId, call.id, "allow_once"), { key }),
    ]);
    const winner = a.status === 200 ? a : b;
    const loser = winner === a ? b : a;
    expect(winner.status).toBe(200);
    // 404 while the winner's run lives on; 409 if it has already ended by the time the loser is judged.
    expect([
      [404, "interaction_unknown"],
      [409, "interaction_not_pending"],
    ]).toContainEqual([loser.status, loser.json.error.metadata.reason]);
    expect(contentOf(winner.chunks)).toBe("after");
    expect(host.answers.filter((x) => x.interactionId === call.id)).toHaveLength(1);
  });

  it("410 attachment_failed when the paused run lost output it cannot replay", async () => {
    const { call, sessionId } = await pause(h, internId, key);
    const run = [...host.runs.values()].find((r) => r.pendingQuestion?.id === call.id)!;
    run.ended = true;
    host.emit(run.start.runId, {
      case: "turnFailed",
      value: { code: 410, reason: "attachment_failed", message: "replay buffer exceeded", retryable: false } as never,
    });
    await expect
      .poll(async () => (await h.database.db.internRun.findUniqueOrThrow({ where: { id: run.start.runId } })).state, { timeout: 10_000 })
      .toBe("failed");
    const r = await chat(h, internId, answerBody(sessionId, call.id, "allow_once"), { key });
    expect(r.status).toBe(410);
    expect(r.json.error).toMatchObject({ code: 410, metadata: { reason: "attachment_failed", retryable: false } });
  });

  it("503 busy with Retry-After while the host reports no capacity", async () => {
    host.send({ case: "capacity", value: { runningRuns: 8, pausedRuns: 0, busy: true } as never });
    // The report travels over the host link: wait until the core has it (a run started before then ends normally).
    let busy!: Awaited<ReturnType<typeof chat>>;
    await expect
      .poll(async () => (busy = await chat(h, internId, chatBody("hello"), { key })).status, { timeout: 15_000, interval: 20 })
      .toBe(503);
    expect(busy.json.error.metadata).toEqual({ reason: "busy", retryable: true });
    // It says what is full (not the paused-run wording).
    expect(busy.json.error.message).toBe("Every agent slot of the intern's host is in use. Retry later.");
    expect(Number(busy.headers.get("retry-after"))).toBeGreaterThan(0);
    host.send({ case: "capacity", value: { runningRuns: 0, pausedRuns: 0, busy: false } as never });
    await expect.poll(async () => (await chat(h, internId, chatBody("hello"), { key })).status, { timeout: 15_000, interval: 20 }).toBe(200);
  });

  it("a tool answer for another session is interaction_unknown", async () => {
    const { call, sessionId } = await pause(h, internId, key);
    const r = await chat(h, internId, answerBody("some-other-session", call.id, "allow_once"), { key });
    expect(r.status).toBe(404);
    expect(r.json.error.metadata.reason).toBe("interaction_unknown");
    await chat(h, internId, answerBody(sessionId, call.id, "cancel"), { key });
  });
});

describe.each(["sqlite", "postgresql"] as const)("intern links: loss, silence, reconnect (%s)", (provider) => {
  let h: Harness;
  let key: string;
  beforeAll(async () => {
    h = await startHarness({ provider, env: BASE_ENV });
    key = h.tenant.apiKey;
  });
  afterAll(async () => {
    await h?.close();
  });

  it("the host going away mid-run gives stream_severed + final + [DONE] within 2 s, and the intern shows detached", async () => {
    const { internId, token } = await createTestIntern(h);
    const host = startFakeHost({ coreUrl: h.coreUrl, token });
    await host.welcome;
    const row = await h.database.db.intern.findUniqueOrThrow({ where: { id: internId } });
    expect(row.status).toBe("attached");
    let killedAt = 0;
    const r = await chat(h, internId, chatBody("slow"), {
      key,
      onChunk: (_c, all) => {
        if (contentOf(all) === "tick" && !killedAt) {
          killedAt = Date.now();
          host.kill();
        }
      },
    });
    expect(killedAt).toBeGreaterThan(0);
    const finish = finishOf(r.chunks);
    expect(finish.error).toMatchObject({ code: 502, metadata: { reason: "stream_severed", retryable: true } });
    expect(finalOf(r.chunks)).toBeTruthy();
    expect(r.done).toBe(true);
    await expect.poll(async () => (await h.database.db.intern.findUniqueOrThrow({ where: { id: internId } })).status, { timeout: 10_000 }).toBe("detached");
    const after = await chat(h, internId, chatBody("hello"), { key });
    expect(after.status).toBe(502);
    expect(after.json.error.metadata.reason).toBe("intern_unreachable");
  });

  it("a silent host (no pongs) is noticed within the liveness timeout", async () => {
    const { internId, token } = await createTestIntern(h);
    const host = startFakeHost({ coreUrl: h.coreUrl, token });
    await host.welcome;
    let silentAt = 0;
    const r = await chat(h, internId, chatBody("slow"), {
      key,
      onChunk: (_c, all) => {
        if (contentOf(all) === "tick" && !silentAt) {
          silentAt = Date.now();
          host.goSilent();
          // The fake host also stops sending anything: no pongs means no inbound traffic.
        }
      },
    });
    // The "slow" run never ends by itself and the host keeps its connection open: only the liveness timeout ends it.
    expect(silentAt).toBeGreaterThan(0);
    expect(finishOf(r.chunks).error.metadata.reason).toBe("stream_severed");
    host.kill();
  });

  it("a paused run survives a reconnect when the host holds it, and ends when it does not", async () => {
    const { internId, token } = await createTestIntern(h);
    const host1 = startFakeHost({ coreUrl: h.coreUrl, token });
    await host1.welcome;
    const a = await pause(h, internId, key);
    const b = await pause(h, internId, key);
    const runA = [...host1.runs.values()].find((r) => r.pendingQuestion?.id === a.call.id)!;
    const runB = [...host1.runs.values()].find((r) => r.pendingQuestion?.id === b.call.id)!;
    host1.kill();
    await expect.poll(async () => (await h.database.db.intern.findUniqueOrThrow({ where: { id: internId } })).status, { timeout: 10_000 }).toBe("detached");
    // While no host is attached an answer cannot be delivered (and the question stays pending).
    const down = await chat(h, internId, answerBody(a.sessionId, a.call.id, "allow_once"), { key });
    expect(down.status).toBe(502);
    expect(down.json.error.metadata.reason).toBe("intern_unreachable");

    // The host comes back holding run A (not B) and an unknown run.
    const runs = new Map([[runA.start.runId, runA]]);
    const host2 = startFakeHost({
      coreUrl: h.coreUrl,
      token,
      runs,
      heldRuns: [
        { runId: runA.start.runId, lastSeq: BigInt(runA.seq), pendingInteractionId: a.call.id } as never,
        { runId: "ghost-run", lastSeq: 3n, pendingInteractionId: "" } as never,
      ],
    });
    const welcome = await host2.welcome;
    expect(welcome.cancelRunIds).toEqual(["ghost-run"]);
    const ra = await chat(h, internId, answerBody(a.sessionId, a.call.id, "allow_once"), { key });
    expect(ra.status).toBe(200);
    expect(contentOf(ra.chunks)).toBe("after");
    const rb = await chat(h, internId, answerBody(b.sessionId, b.call.id, "allow_once"), { key });
    expect(rb.status).toBe(409);
    expect(rb.json.error.metadata.reason).toBe("interaction_not_pending");
    // B's session is free again.
    const next = await chat(h, internId, chatBody("hello", { session_id: b.sessionId }), { key });
    expect(next.status).toBe(200);
    void runB;
    host2.kill();
  });

  it("the link dropping while an answer is delivered keeps the run paused; after a reconnect the answer continues it", async () => {
    const { internId, token } = await createTestIntern(h);
    const host1 = startFakeHost({
      coreUrl: h.coreUrl,
      token,
      onAnswer: (_a, _run, self) => {
        self.kill(); // gone before its AnswerResult leaves
        return AnswerOutcome.NOT_OFFERED;
      },
    });
    await host1.welcome;
    const a = await pause(h, internId, key);
    const runA = [...host1.runs.values()].find((r) => r.pendingQuestion?.id === a.call.id)!;
    const lost = await chat(h, internId, answerBody(a.sessionId, a.call.id, "allow_once"), { key });
    expect(lost.status).toBe(502);
    expect(lost.json.error.metadata.reason).toBe("intern_unreachable");

    const host2 = startFakeHost({
      coreUrl: h.coreUrl,
      token,
      runs: new Map([[runA.start.runId, runA]]),
      heldRuns: [{ runId: runA.start.runId, lastSeq: BigInt(runA.seq), pendingInteractionId: a.call.id } as never],
    });
    expect((await host2.welcome).cancelRunIds).toEqual([]);
    const ra = await chat(h, internId, answerBody(a.sessionId, a.call.id, "allow_once"), { key });
    expect(ra.status).toBe(200);
    expect(finishOf(ra.chunks).choices[0].finish_reason).toBe("stop");
    expect(contentOf(ra.chunks)).toBe("after");
    host2.kill();
  });

  it("503 busy when a manual run could not be held paused (the host's max_paused_runs)", async () => {
    const { internId, token } = await createTestIntern(h);
    const host = startFakeHost({ coreUrl: h.coreUrl, token, maxPausedRuns: 1 });
    await host.welcome;
    const a = await pause(h, internId, key);
    const second = await chat(h, internId, chatBody("ask", { approval_mode: "manual" }), { key });
    expect(second.status).toBe(503);
    expect(second.json.error.metadata.reason).toBe("busy");
    // Another key (its own share unused) is refused because the host's paused slots are full, and is told so.
    const other = await h.identity.createApiKey({
      organizationId: h.tenant.organizationId,
      workspaceId: h.tenant.workspaceId,
      creatorUserId: h.tenant.userId,
      name: "another caller",
      isManagement: false,
    });
    const third = await chat(h, internId, chatBody("ask", { approval_mode: "manual" }), { key: other.plaintext });
    expect(third.status).toBe(503);
    expect(third.json.error.message).toBe("The intern's host already holds 1 run waiting for an answer, as many as it can. Answer or cancel one, or retry later.");
    // A self-drive run cannot pause, so it still runs.
    expect((await chat(h, internId, chatBody("hello"), { key })).status).toBe(200);
    await chat(h, internId, answerBody(a.sessionId, a.call.id, "cancel"), { key });
    host.kill();
  });

  it("503 busy naming the run slots when the host's max_concurrent_runs runs are open", async () => {
    const { internId, token } = await createTestIntern(h);
    const host = startFakeHost({ coreUrl: h.coreUrl, token, maxConcurrentRuns: 1 });
    await host.welcome;
    const a = await pause(h, internId, key);
    const second = await chat(h, internId, chatBody("hello"), { key });
    expect(second.status).toBe(503);
    expect(second.json.error).toMatchObject({ message: "Every run slot of the intern's host is in use (1 of 1). Retry later.", metadata: { reason: "busy" } });
    await chat(h, internId, answerBody(a.sessionId, a.call.id, "cancel"), { key });
    host.kill();
  });

  it("a newer link replaces an older one for the same intern", async () => {
    const { internId, token } = await createTestIntern(h);
    const first = startFakeHost({ coreUrl: h.coreUrl, token });
    await first.welcome;
    const second = startFakeHost({ coreUrl: h.coreUrl, token });
    await second.welcome;
    await first.closed;
    const r = await chat(h, internId, chatBody("hello"), { key });
    expect(r.status).toBe(200);
    expect(second.runs.size).toBe(1);
    expect(first.runs.size).toBe(0);
    second.kill();
  });

  it("refuses a bad host token", async () => {
    const host = startFakeHost({ coreUrl: h.coreUrl, token: "pht-v1-" + "0".repeat(64) });
    await expect(host.welcome).rejects.toMatchObject({ code: 16 });
  });
});

describe.each(["sqlite", "postgresql"] as const)("interaction deadlines and rate limits (%s)", (provider) => {
  let h: Harness;
  let internId: string;
  let host: FakeHost;
  let key: string;
  // Long enough that the sweep (every DEADLINE / 4) beats this process's own timer with room to spare on a loaded machine.
  const DEADLINE = 4000;
  beforeAll(async () => {
    h = await startHarness({
      provider,
      env: { ...BASE_ENV, PORTICO_INTERACTION_DEADLINE_MS: String(DEADLINE), PORTICO_INTERN_RATE_LIMIT: "10000" },
    });
    let token: string;
    ({ internId, token } = await createTestIntern(h));
    host = startFakeHost({ coreUrl: h.coreUrl, token });
    await host.welcome;
    key = h.tenant.apiKey;
  });
  afterAll(async () => {
    host?.kill();
    await h?.close();
  });

  it("the deadline passing cancels the run (CancelRun DEADLINE); a later answer gets 409 and the session is free", async () => {
    const { call, sessionId } = await pause(h, internId, key);
    const runId = [...host.runs.values()].find((r) => r.pendingQuestion?.id === call.id)!.start.runId;
    const cancel = await host.waitFor(() => host.cancels.find((c) => c.runId === runId), DEADLINE + 10_000);
    expect(cancel.reason).toBe(CancelReason.DEADLINE);
    const r = await chat(h, internId, answerBody(sessionId, call.id, "allow_once"), { key });
    expect(r.status).toBe(409);
    expect(r.json.error.metadata.reason).toBe("interaction_not_pending");
    const run = await h.database.db.internRun.findUniqueOrThrow({ where: { id: runId } });
    expect(run).toMatchObject({ state: "cancelled", endReason: "deadline" });
    const next = await chat(h, internId, chatBody("hello", { session_id: sessionId }), { key });
    expect(next.status).toBe(200);
  });

  it("a rejected answer does not extend the deadline", async () => {
    const { call, sessionId } = await pause(h, internId, key);
    const before = await h.database.db.internInteraction.findUniqueOrThrow({ where: { id: call.id } });
    const bad = await chat(h, internId, answerBody(sessionId, call.id, "reject_always"), { key });
    expect(bad.status).toBe(400);
    const after = await h.database.db.internInteraction.findUniqueOrThrow({ where: { id: call.id } });
    expect(after.deadlineAt.getTime()).toBe(before.deadlineAt.getTime());
    expect(after.state).toBe("pending");
    await chat(h, internId, answerBody(sessionId, call.id, "cancel"), { key });
  });

  it("the database sweep expires a deadline even without this process's timer", async () => {
    const { call } = await pause(h, internId, key);
    const runId = [...host.runs.values()].find((r) => r.pendingQuestion?.id === call.id)!.start.runId;
    // This process's timer fires at the deadline set at the pause.
    const { deadlineAt: timerAt } = await h.database.db.internInteraction.findUniqueOrThrow({ where: { id: call.id } });
    // Pretend another process set an earlier deadline: only the sweep can notice.
    await h.database.db.internInteraction.update({ where: { id: call.id }, data: { deadlineAt: new Date(Date.now() - 1000) } });
    const cancel = await host.waitFor(() => host.cancels.find((c) => c.runId === runId), DEADLINE + 10_000);
    expect(cancel.reason).toBe(CancelReason.DEADLINE);
    // The sweep (every DEADLINE / 4) got there before the timer was due: the timer did not end the run.
    expect(Date.now()).toBeLessThan(timerAt.getTime());
  });

  it("an answer racing the deadline has exactly one outcome", async () => {
    const trials = await Promise.all(
      [-60, -30, -10, 0, 10, 30].map(async (offset) => {
        const { call, sessionId } = await pause(h, internId, key);
        const runId = [...host.runs.values()].find((r) => r.pendingQuestion?.id === call.id)!.start.runId;
        const row = await h.database.db.internInteraction.findUniqueOrThrow({ where: { id: call.id } });
        await new Promise((r) => setTimeout(r, Math.max(0, row.deadlineAt.getTime() - Date.now() + offset)));
        const r = await chat(h, internId, answerBody(sessionId, call.id, "allow_once"), { key });
        // The outcome is settled once the run has ended (finished by the answer, or cancelled at its deadline).
        const ended = await waitFor(`run ${runId} to end`, async () => {
          const { state } = await h.database.db.internRun.findUniqueOrThrow({ where: { id: runId } });
          return !["paused", "streaming"].includes(state) && state;
        });
        // A run cancelled at its deadline: the host is told (the event the check below reads).
        if (ended === "cancelled") await host.waitFor(() => host.cancels.some((c) => c.runId === runId), 5_000);
        const deadlineCancel = host.cancels.some((c) => c.runId === runId && c.reason === CancelReason.DEADLINE);
        const delivered = host.answers.some((a) => a.interactionId === call.id);
        const run = await h.database.db.internRun.findUniqueOrThrow({ where: { id: runId } });
        return { status: r.status, reason: r.json?.error?.metadata?.reason, content: contentOf(r.chunks), deadlineCancel, delivered, state: run.state };
      }),
    );
    for (const t of trials) {
      if (t.status === 200) {
        expect(t).toMatchObject({ content: "after", deadlineCancel: false, delivered: true, state: "finished" });
      } else {
        expect(t).toMatchObject({ status: 409, reason: "interaction_not_pending", deadlineCancel: true, delivered: false, state: "cancelled" });
      }
    }
  });
});

describe("intern turn rate limit", () => {
  let h: Harness;
  afterAll(async () => {
    await h?.close();
  });
  it("429 rate_limited with Retry-After once a key spends its turns", async () => {
    h = await startHarness({ env: { ...BASE_ENV, PORTICO_INTERN_RATE_LIMIT: "2", PORTICO_INTERN_RATE_WINDOW_S: "60" } });
    const { internId, token } = await createTestIntern(h);
    const host = startFakeHost({ coreUrl: h.coreUrl, token });
    await host.welcome;
    const key = h.tenant.apiKey;
    expect((await chat(h, internId, chatBody("hello"), { key })).status).toBe(200);
    expect((await chat(h, internId, chatBody("hello"), { key })).status).toBe(200);
    const limited = await chat(h, internId, chatBody("hello"), { key });
    expect(limited.status).toBe(429);
    expect(limited.json.error).toMatchObject({ code: 429, metadata: { reason: "rate_limited", retryable: true } });
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    // Another key has its own bucket.
    const other = await h.identity.createApiKey({
      organizationId: h.tenant.organizationId,
      workspaceId: h.tenant.workspaceId,
      creatorUserId: h.tenant.userId,
      name: "second",
      isManagement: false,
    });
    expect((await chat(h, internId, chatBody("hello"), { key: other.plaintext })).status).toBe(200);
    host.kill();
  });
});
