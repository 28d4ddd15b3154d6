/**
 * Intern chat over HTTP (raw SSE parser) against the real core + gateway and a scripted fake host on
 * the real gRPC link: every transition of the run table and the errors before streaming.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CancelReason } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { startHarness, type Harness } from "../../helpers/harness.js";
import { waitFor } from "../../helpers/wait.js";
import { startFakeHost, MODEL, type FakeHost } from "./fake-host.js";
import { answerBody, chat, chatBody, contentOf, createTestIntern, finalOf, finishOf, toolCallOf } from "./sse-client.js";

const ENV = {
  PORTICO_HEARTBEAT_INTERVAL_MS: "200",
  PORTICO_INTERN_START_TIMEOUT_MS: "800",
  PORTICO_LINK_PING_INTERVAL_MS: "100",
  PORTICO_LINK_LIVENESS_TIMEOUT_MS: "600",
  PORTICO_INTERN_RATE_LIMIT: "10000",
};

describe.each(["sqlite", "postgresql"] as const)("intern chat stream (%s)", (provider) => {
  let h: Harness;
  let internId: string;
  let token: string;
  let host: FakeHost;
  let key: string;

  beforeAll(async () => {
    h = await startHarness({ provider, env: ENV });
    ({ internId, token } = await createTestIntern(h));
    host = startFakeHost({ coreUrl: h.coreUrl, token });
    await host.welcome;
    key = h.tenant.apiKey;
  });
  afterAll(async () => {
    host?.kill();
    await h?.close();
  });

  it("streams a completed turn: role, reasoning, content, stop, final with usage, [DONE]", async () => {
    const r = await chat(h, internId, chatBody("hello"), { key });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(r.headers.get("cache-control")).toContain("no-cache");
    expect(r.headers.get("x-accel-buffering")).toBe("no");
    expect(r.headers.get("content-encoding")).toBeNull();
    expect(r.done).toBe(true);
    const [role, ...rest] = r.chunks;
    expect(role.choices[0]).toEqual({ index: 0, delta: { role: "assistant" }, finish_reason: null });
    expect(role.object).toBe("chat.completion.chunk");
    expect(role.id).toMatch(/^chatcmpl-[0-9a-f-]{36}$/);
    expect(new Set(r.chunks.map((c) => c.id)).size).toBe(1);
    expect(Number.isInteger(role.created)).toBe(true);
    expect(rest[0].choices[0].delta).toEqual({ reasoning: "thinking" });
    // One model per response: the intern's first response names the default, the next its model.
    expect(new Set(r.chunks.map((c) => c.model)).size).toBe(1);
    // The reported model is stored off the request path (run-events.ts, `later`): the next run reads it once written.
    await waitFor("the intern's reported model stored", async () => (await h.database.db.intern.findUnique({ where: { id: internId } }))?.model === MODEL);
    const next = await chat(h, internId, chatBody("hello"), { key });
    expect(new Set(next.chunks.map((c) => c.model))).toEqual(new Set([MODEL]));
    expect(contentOf(r.chunks)).toBe("Hello world");
    const finish = finishOf(r.chunks);
    expect(finish.choices[0]).toEqual({ index: 0, delta: {}, finish_reason: "stop" });
    const final = finalOf(r.chunks);
    expect(r.chunks.at(-1)).toBe(final);
    expect(final.choices).toEqual([]);
    expect(typeof final.session_id).toBe("string");
    expect(final.usage).toEqual({ prompt_tokens: 3, completion_tokens: 2, total_tokens: 5, cost: 0.001 });
  });

  it("pauses on a question and continues in the same session after the answer", async () => {
    const first = await chat(h, internId, chatBody("ask", { approval_mode: "manual" }), { key });
    expect(first.status).toBe(200);
    expect(first.done).toBe(true);
    const call = toolCallOf(first.chunks);
    expect(call).toMatchObject({ index: 0, type: "function", function: { name: "service.provide_input" } });
    const args = JSON.parse(call.function.arguments);
    expect(args).toEqual({ kind: "permission", operation: "shell", options: ["allow_once", "reject_once"], deadline_at: expect.any(String) });
    // The deadline is the pause time plus the interaction deadline (5 minutes by default), in ISO 8601 UTC.
    expect(args.deadline_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(args.deadline_at) - Date.now()).toBeLessThanOrEqual(300_000);
    expect(Date.parse(args.deadline_at)).toBeGreaterThan(Date.parse(first.headers.get("date")!) - 1000);
    expect(finishOf(first.chunks).choices[0].finish_reason).toBe("tool_calls");
    const final = finalOf(first.chunks);
    expect(final.usage).toBeNull();
    const sessionId = final.session_id;
    expect(sessionId).toBeTruthy();
    const runId = [...host.runs.values()].find((r) => r.pendingQuestion?.id === call.id)!.start.runId;
    expect(host.runs.get(runId)!.start.approvalMode).toBe(2);

    // A new user message for the paused session is refused with 409 busy and Retry-After.
    const busy = await chat(h, internId, chatBody("hello", { session_id: sessionId }), { key });
    expect(busy.status).toBe(409);
    expect(busy.json.error.metadata).toMatchObject({ reason: "busy", retryable: true });
    expect(Number(busy.headers.get("retry-after"))).toBeGreaterThan(0);

    // An answer not offered → 400, still paused.
    const bad = await chat(h, internId, answerBody(sessionId, call.id, "allow_always"), { key });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ code: 400, metadata: { reason: "bad_request", retryable: false } });

    // Unknown interaction → 404 interaction_unknown.
    const unknown = await chat(h, internId, answerBody(sessionId, "no-such-call", "allow_once"), { key });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.metadata.reason).toBe("interaction_unknown");

    const second = await chat(h, internId, answerBody(sessionId, call.id, "allow_once"), { key });
    expect(second.status).toBe(200);
    expect(second.chunks[0].choices[0].delta).toEqual({ role: "assistant" });
    expect(contentOf(second.chunks)).toBe("after");
    expect(finishOf(second.chunks).choices[0].finish_reason).toBe("stop");
    expect(finalOf(second.chunks)).toMatchObject({ session_id: sessionId, usage: { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 } });
    expect(second.done).toBe(true);

    // The question is answered: answering again → 409 interaction_not_pending.
    const again = await chat(h, internId, answerBody(sessionId, call.id, "allow_once"), { key });
    expect(again.status).toBe(409);
    expect(again.json.error.metadata.reason).toBe("interaction_not_pending");

    // The session is free again.
    const next = await chat(h, internId, chatBody("hello", { session_id: sessionId }), { key });
    expect(next.status).toBe(200);
    expect(finalOf(next.chunks).session_id).toBe(sessionId);
  });

  it("answering cancel ends the paused run with 410 run_ended", async () => {
    const first = await chat(h, internId, chatBody("ask", { approval_mode: "manual" }), { key });
    const call = toolCallOf(first.chunks);
    const sessionId = finalOf(first.chunks).session_id;
    const r = await chat(h, internId, answerBody(sessionId, call.id, "cancel"), { key });
    expect(r.status).toBe(200);
    const finish = finishOf(r.chunks);
    expect(finish.choices[0].finish_reason).toBe("error");
    expect(finish.error).toMatchObject({ code: 410, metadata: { reason: "run_ended", retryable: false } });
    expect(finalOf(r.chunks).session_id).toBe(sessionId);
    expect(r.done).toBe(true);
  });

  it("an agent's own cancelled stop reason is a normal end (stop) carrying the usage it reported", async () => {
    const r = await chat(h, internId, chatBody("agent-cancel"), { key });
    expect(r.status).toBe(200);
    expect(r.done).toBe(true);
    expect(finishOf(r.chunks).choices[0].finish_reason).toBe("stop");
    expect(finishOf(r.chunks).error).toBeUndefined();
    expect(finalOf(r.chunks).usage).toEqual({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 10, prompt_tokens_details: { cached_tokens: 5 } });
    const row = await h.database.db.internRun.findFirst({ where: { sessionKey: finalOf(r.chunks).session_id } });
    expect(row).toMatchObject({ state: "finished", endReason: "agent_cancelled" });
  });

  it("a failing turn ends with finish error and the reported usage", async () => {
    const r = await chat(h, internId, chatBody("fail"), { key });
    expect(r.status).toBe(200);
    const finish = finishOf(r.chunks);
    expect(finish.choices[0].finish_reason).toBe("error");
    expect(finish.error).toEqual({ code: 502, message: "the agent failed the turn: boom", metadata: { reason: "turn_failed", retryable: false } });
    expect(finalOf(r.chunks).usage).toEqual({ prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 });
    expect(r.done).toBe(true);
  });

  it("the intern ending the run while connected gives 410 run_ended, final, [DONE]", async () => {
    const r = await chat(h, internId, chatBody("end"), { key });
    const finish = finishOf(r.chunks);
    expect(finish.error).toMatchObject({ code: 410, metadata: { reason: "run_ended" } });
    expect(finalOf(r.chunks).usage).toBeNull();
    expect(r.done).toBe(true);
  });

  it("sends `: keepalive` comments while the intern is silent, and a disconnect cancels the run", async () => {
    const before = host.cancels.length;
    const r = await chat(h, internId, chatBody("slow"), { key, readForMs: 700 });
    expect(contentOf(r.chunks)).toBe("tick");
    expect(r.comments.filter((c) => c === "keepalive").length).toBeGreaterThanOrEqual(2);
    expect(r.raw).toContain("\n: keepalive\n\n");
    expect(r.done).toBe(false);
    // The "slow" run never ends by itself: the cancel, with the disconnect as its reason, is the disconnect's doing.
    const cancel = await host.waitFor(() => host.cancels.length > before && host.cancels.at(-1), 30_000);
    expect(cancel.reason).toBe(CancelReason.CLIENT_DISCONNECTED);
  });

  it("errors: 502 before streaming without a host; 503 busy and 504 timeout from the host after the role chunk", async () => {
    const other = await createTestIntern(h);
    const unreachable = await chat(h, other.internId, chatBody("hello"), { key });
    expect(unreachable.status).toBe(502);
    expect(unreachable.json.error).toMatchObject({ code: 502, metadata: { reason: "intern_unreachable", retryable: true } });

    // Once the core accepted the run the response is open (role chunk at once): the host's refusal
    // and a start that never comes end it with an error finish.
    const busy = await chat(h, internId, chatBody("busy"), { key });
    expect(busy.status).toBe(200);
    expect(busy.chunks[0].choices[0].delta).toEqual({ role: "assistant" });
    expect(finishOf(busy.chunks).error).toMatchObject({ code: 503, metadata: { reason: "busy", retryable: true } });
    // The host's refusal says what is full ("no capacity" from the fake host), not the paused-run wording.
    expect(finishOf(busy.chunks).error.message).toBe("Every agent slot of the intern's host is in use: no capacity. Retry later.");
    expect(busy.done).toBe(true);

    const before = host.cancels.length;
    const timeout = await chat(h, internId, chatBody("nostart"), { key });
    expect(timeout.chunks[0].choices[0].delta).toEqual({ role: "assistant" });
    expect(finishOf(timeout.chunks).error).toMatchObject({ code: 504, metadata: { reason: "timeout", retryable: true } });
    await host.waitFor(() => host.cancels.length > before);
  });
});
