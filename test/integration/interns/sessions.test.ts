/**
 * A lost intern question does not lock its session (issue 25): a paused run's question is readable
 * (tool call id, exact arguments, deadline) by keys that may answer it, over HTTP and gRPC, and the run
 * holding a session can be cancelled, paused or streaming, through the API.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { CancelReason } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { bearer, grpcClient, unary } from "../../helpers/grpc.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeHost, type FakeHost } from "./fake-host.js";
import { answerBody, chat, chatBody, createTestIntern, finalOf, finishOf, toolCallOf } from "./sse-client.js";

const ENV = {
  PORTICO_HEARTBEAT_INTERVAL_MS: "5000",
  PORTICO_INTERN_START_TIMEOUT_MS: "10000",
  // No link loss is tested here: a loaded machine must not break the link.
  PORTICO_LINK_PING_INTERVAL_MS: "1000",
  PORTICO_LINK_LIVENESS_TIMEOUT_MS: "10000",
  PORTICO_INTERN_RATE_LIMIT: "10000",
};

const TOOL = { title: "Run ls", kind: "execute", command: "ls -la", input: { command: ["ls", "-la"] } };

describe.each(["sqlite", "postgresql"] as const)("intern sessions: pending question and cancel (%s)", (provider) => {
  let h: Harness;
  let internId: string;
  let host: FakeHost;
  let key: string;
  let client: any;

  beforeAll(async () => {
    h = await startHarness({ provider, env: ENV });
    let token: string;
    ({ internId, token } = await createTestIntern(h));
    host = startFakeHost({
      coreUrl: h.coreUrl,
      token,
      onStart(run, fake) {
        // "ask-tool": a question whose host adds a `tool` field to the arguments.
        if (run.start.prompt !== "ask-tool") return false;
        const id = run.start.runId;
        fake.emit(id, { case: "started", value: {} as never });
        const qid = randomUUID();
        run.pendingQuestion = { id: qid, options: ["allow_once", "reject_once"] };
        fake.emit(id, {
          case: "question",
          value: { interactionId: qid, kind: "permission", operation: "shell", options: ["allow_once", "reject_once"], arguments: { tool: TOOL, kind: "spoofed" } } as never,
        });
        return true;
      },
    });
    await host.welcome;
    key = h.tenant.apiKey;
    client = grpcClient("portico/interns/v1/interns_service.proto", "portico.interns.v1.InternsService", h.coreUrl);
  });
  afterAll(async () => {
    client?.close();
    host?.kill();
    await h?.close();
  });

  async function pause(prompt = "ask") {
    const r = await chat(h, internId, chatBody(prompt, { approval_mode: "manual" }), { key });
    expect(r.status).toBe(200);
    const call = toolCallOf(r.chunks);
    expect(call).toBeTruthy();
    return { call, sessionId: finalOf(r.chunks).session_id as string, args: JSON.parse(call.function.arguments) };
  }

  it("shows a paused run's question, exactly as streamed, in the session and in the intern's sessions", async () => {
    const { call, sessionId, args } = await pause("ask-tool");
    // The host's extra field is carried; the core's own fields cannot be replaced.
    expect(args).toEqual({ kind: "permission", operation: "shell", options: ["allow_once", "reject_once"], deadline_at: expect.any(String), tool: TOOL });
    const expected = { tool_call_id: call.id, name: "service.provide_input", arguments: args, deadline_at: args.deadline_at };

    // Any key that may answer (an ordinary key of the workspace) reads the session.
    const one = await api(h, "GET", `/interns/${internId}/sessions/${encodeURIComponent(sessionId)}`, { key });
    expect(one.status).toBe(200);
    expect(one.json).toEqual({ session_id: sessionId, state: "paused", run_id: expect.any(String), started_at: expect.any(String), pending_question: expected, usage: null });

    // The intern (management key) lists it with the same question.
    const intern = await api(h, "GET", `/interns/${internId}`, { key: h.tenant.managementKey });
    expect(intern.status).toBe(200);
    const listed = intern.json.sessions.find((s: any) => s.session_id === sessionId);
    expect(listed).toEqual({ session_id: sessionId, state: "paused", run_id: one.json.run_id, started_at: one.json.started_at, pending_question: expected, usage: null });

    // The same over gRPC.
    const g = await unary(client, "GetSession", { intern_id: internId, session_id: sessionId }, bearer(key));
    expect(g.error).toBeUndefined();
    const q = g.response.session.pending_question;
    expect(g.response.session).toMatchObject({ session_id: sessionId, state: "paused", run_id: one.json.run_id });
    expect(q).toMatchObject({ tool_call_id: call.id, name: "service.provide_input" });
    expect(new Date(Number(q.deadline.seconds) * 1000 + q.deadline.nanos / 1e6).toISOString()).toBe(args.deadline_at);
    expect(q.arguments.fields.operation).toEqual({ stringValue: "shell", kind: "stringValue" });

    // The question read back answers the run.
    const answered = await chat(h, internId, answerBody(sessionId, one.json.pending_question.tool_call_id, "allow_once"), { key });
    expect(answered.status).toBe(200);
    const after = await api(h, "GET", `/interns/${internId}/sessions/${encodeURIComponent(sessionId)}`, { key });
    expect(after.json).toMatchObject({ state: "idle", run_id: one.json.run_id, pending_question: null });
  });

  it("frees a session whose question was lost: cancel the paused run over HTTP, then prompt again", async () => {
    const { call, sessionId } = await pause();
    const busy = await chat(h, internId, chatBody("hello", { session_id: sessionId }), { key });
    expect(busy.status).toBe(409);

    const cancelled = await api(h, "POST", `/interns/${internId}/sessions/${encodeURIComponent(sessionId)}/cancel`, { key });
    expect(cancelled.status).toBe(200);
    expect(cancelled.json).toMatchObject({ session_id: sessionId, state: "idle", pending_question: null });
    const runId = cancelled.json.run_id;
    await host.waitFor(() => host.cancels.find((c) => c.runId === runId && c.reason === CancelReason.CALLER));

    const next = await chat(h, internId, chatBody("hello", { session_id: sessionId }), { key });
    expect(next.status).toBe(200);
    expect(finishOf(next.chunks).choices[0].finish_reason).toBe("stop");
    // The old question is over.
    const late = await chat(h, internId, answerBody(sessionId, call.id, "allow_once"), { key });
    expect(late.status).toBe(409);
    expect(late.json.error.metadata.reason).toBe("interaction_not_pending");
  });

  it("cancels a streaming run: its open stream ends with a run_ended error chunk, the final chunk and [DONE]", async () => {
    let sessionId: string | undefined;
    let opened!: () => void;
    const streaming = new Promise<void>((r) => (opened = r));
    const stream = chat(h, internId, chatBody("slow", { session_id: `s-${randomUUID()}` }), {
      key,
      onChunk: (c) => {
        if (c.choices?.[0]?.delta?.content === "tick") opened();
      },
    });
    await streaming;
    const row = await h.database.db.internRun.findFirst({ where: { internId, state: "streaming" }, orderBy: { createdAt: "desc" } });
    sessionId = row!.sessionKey;
    const cancelled = await api(h, "POST", `/interns/${internId}/sessions/${encodeURIComponent(sessionId)}/cancel`, { key });
    expect(cancelled.status).toBe(200);
    expect(cancelled.json).toMatchObject({ state: "idle", run_id: row!.id });
    const r = await stream;
    expect(r.done).toBe(true);
    expect(finishOf(r.chunks).choices[0].finish_reason).toBe("error");
    expect(finishOf(r.chunks).error).toMatchObject({ code: 410, metadata: { reason: "run_ended" } });
    expect(finalOf(r.chunks).session_id).toBe(sessionId);
    await host.waitFor(() => host.cancels.find((c) => c.runId === row!.id && c.reason === CancelReason.CALLER));
    expect((await h.database.db.internRun.findUnique({ where: { id: row!.id } }))!.state).toBe("cancelled");
  });

  it("cancels over gRPC, and refuses what cannot be cancelled", async () => {
    const { sessionId } = await pause();
    const g = await unary(client, "CancelSessionRun", { intern_id: internId, session_id: sessionId }, bearer(key));
    expect(g.error).toBeUndefined();
    expect(g.response.session).toMatchObject({ session_id: sessionId, state: "idle" });
    // Nothing left to cancel: 409 conflict (FAILED_PRECONDITION over gRPC).
    const again = await api(h, "POST", `/interns/${internId}/sessions/${encodeURIComponent(sessionId)}/cancel`, { key });
    expect(again.status).toBe(409);
    expect(again.json.error.metadata.reason).toBe("conflict");
    const gAgain = await unary(client, "CancelSessionRun", { intern_id: internId, session_id: sessionId }, bearer(key));
    expect(gAgain.error?.code).toBe(9);
    // Unknown session, unknown intern, a body field, a session id too long.
    expect((await api(h, "GET", `/interns/${internId}/sessions/nope-${randomUUID()}`, { key })).status).toBe(404);
    expect((await api(h, "POST", `/interns/${internId}/sessions/nope-${randomUUID()}/cancel`, { key })).status).toBe(404);
    expect((await api(h, "GET", `/interns/${randomUUID()}/sessions/${sessionId}`, { key })).status).toBe(404);
    const withBody = await api(h, "POST", `/interns/${internId}/sessions/${sessionId}/cancel`, { key, body: { force: true } });
    expect(withBody.status).toBe(400);
    expect(withBody.json.error.metadata.field).toBe("force");
    const long = await api(h, "GET", `/interns/${internId}/sessions/${"x".repeat(257)}`, { key });
    expect(long.status).toBe(400);
    expect(long.json.error.metadata.field).toBe("session_id");
    // Another workspace's key sees no such intern.
    const other = await h.createTenant();
    expect((await api(h, "GET", `/interns/${internId}/sessions/${sessionId}`, { key: other.apiKey })).status).toBe(404);
    expect((await api(h, "POST", `/interns/${internId}/sessions/${sessionId}/cancel`, { key: other.apiKey })).status).toBe(404);
    const gOther = await unary(client, "GetSession", { intern_id: internId, session_id: sessionId }, bearer(other.apiKey));
    expect(gOther.error?.code).toBe(5);
  });
});
