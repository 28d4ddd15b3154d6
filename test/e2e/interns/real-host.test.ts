/**
 * End to end through the real intern host (src/host) driving the scripted ACP agent, over the real
 * gRPC link to the core, with the HTTP gateway in front: a whole run, pause and answer, two answers
 * at once, deadline expiry, an answer racing the deadline, client disconnect (the agent sees a
 * cancel) and — with the host as a separate process — the host killed mid-run (noticed by the link's
 * end, not its liveness timeout).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createInternHost, type InternHost } from "../../../src/host/link.js";
import { scriptedAgentCommand, scriptedAgentLauncher } from "../../fixtures/scripted-agent.js";
import { bearer, grpcClient, unary } from "../../helpers/grpc.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { answerBody, chat, chatBody, contentOf, createTestIntern, finalOf, finishOf, toolCallOf } from "../../integration/interns/sse-client.js";
import { waitFor } from "../../helpers/wait.js";

const REPO = resolve(import.meta.dirname, "../../..");
const DEADLINE_MS = 1500;
const ENV = {
  PORTICO_HEARTBEAT_INTERVAL_MS: "2000",
  PORTICO_INTERN_START_TIMEOUT_MS: "15000",
  PORTICO_LINK_PING_INTERVAL_MS: "200",
  PORTICO_LINK_LIVENESS_TIMEOUT_MS: "1500",
  PORTICO_INTERACTION_DEADLINE_MS: String(DEADLINE_MS),
  PORTICO_INTERN_RATE_LIMIT: "10000",
};

const script = (s: unknown) => JSON.stringify(s);
const QUESTION = script({ steps: [{ content: "plan" }, { question: { toolCallId: "t1", kind: "execute", title: "ls" } }, { content: " done" }] });

describe.each(["sqlite", "postgresql"] as const)("intern chat through the real host, in-process agent (%s)", (provider) => {
  let h: Harness;
  let internId: string;
  let host: InternHost;
  let dir: string;
  const observed: Array<{ type: string; sessionId: string; at: number }> = [];

  beforeAll(async () => {
    h = await startHarness({ provider, env: ENV });
    let token: string;
    ({ internId, token } = await createTestIntern(h));
    dir = mkdtempSync(join(tmpdir(), "portico-e2e-interns-"));
    chmodSync(dir, 0o755);
    host = createInternHost({
      coreUrl: h.coreUrl,
      token,
      profile: { command: "scripted", name: "scripted" },
      workRoot: dir,
      runAs: null,
      bwrapPath: null,
      launcher: scriptedAgentLauncher({ model: "scripted-1" }, { observe: (e) => observed.push({ ...e, at: Date.now() }) }),
    });
    expect(await host.ready).toBe(internId);
  });
  afterAll(async () => {
    await host?.close();
    await h?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("streams a whole run with usage", async () => {
    const r = await chat(
      h,
      internId,
      chatBody(script({ steps: [{ reasoning: "thinking" }, { content: "Hello" }, { content: " world" }], usage: { inputTokens: 7, outputTokens: 3, totalTokens: 10 } })),
      { key: h.tenant.apiKey },
    );
    expect(r.status).toBe(200);
    expect(r.chunks[0].choices[0].delta).toEqual({ role: "assistant" });
    expect(r.chunks.some((c) => c.choices[0]?.delta?.reasoning === "thinking")).toBe(true);
    expect(contentOf(r.chunks)).toBe("Hello world");
    expect(finishOf(r.chunks).choices[0].finish_reason).toBe("stop");
    expect(finalOf(r.chunks).usage).toMatchObject({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 });
    // One model per response; the next response names the model the agent reported.
    expect(new Set(r.chunks.map((c) => c.model)).size).toBe(1);
    const next = await chat(h, internId, chatBody(script({ steps: [{ content: "again" }] })), { key: h.tenant.apiKey });
    expect(new Set(next.chunks.map((c) => c.model))).toEqual(new Set(["scripted-1"]));
    expect(r.done).toBe(true);
  });

  it("reads the usage an agent reports only in the prompt result's _meta.quota (gemini-cli) into the run's usage", async () => {
    const r = await chat(
      h,
      internId,
      chatBody(script({ steps: [{ content: "Hi" }], meta: { quota: { token_count: { input_tokens: 41, output_tokens: 9 }, model_usage: [] } } })),
      { key: h.tenant.apiKey },
    );
    expect(r.status).toBe(200);
    expect(finishOf(r.chunks).choices[0].finish_reason).toBe("stop");
    expect(finalOf(r.chunks).usage).toEqual({ prompt_tokens: 41, completion_tokens: 9, total_tokens: 50 });
  });

  it("manual mode pauses on the permission question and continues after allow_once; two answers at once deliver one", async () => {
    const first = await chat(h, internId, chatBody(QUESTION, { approval_mode: "manual" }), { key: h.tenant.apiKey });
    const call = toolCallOf(first.chunks);
    expect(JSON.parse(call.function.arguments)).toEqual({
      kind: "permission",
      operation: "shell",
      options: ["allow_once", "allow_always", "reject_once"],
      deadline_at: expect.any(String),
      // What the agent asked to run: the permission request's title and tool kind (no raw input here).
      tool: { title: "ls", kind: "execute" },
    });
    expect(finishOf(first.chunks).choices[0].finish_reason).toBe("tool_calls");
    expect(finalOf(first.chunks).usage).toBeNull();
    const sessionId = finalOf(first.chunks).session_id;
    const [a, b] = await Promise.all([
      chat(h, internId, answerBody(sessionId, call.id, "allow_once"), { key: h.tenant.apiKey }),
      chat(h, internId, answerBody(sessionId, call.id, "allow_once"), { key: h.tenant.apiKey }),
    ]);
    const won = a.status === 200 ? a : b;
    const lost = won === a ? b : a;
    expect(won.status).toBe(200);
    // The loser meets a question no longer pending: 404 while the run lives on, 409 once it has ended.
    expect([
      [404, "interaction_unknown"],
      [409, "interaction_not_pending"],
    ]).toContainEqual([lost.status, lost.json.error.metadata.reason]);
    expect(contentOf(won.chunks)).toBe("[answer allow] done");
    expect(finishOf(won.chunks).choices[0].finish_reason).toBe("stop");
    expect(finalOf(won.chunks).session_id).toBe(sessionId);
  });

  it("the permission question says what the agent asked to run: command line, title and input, over HTTP, GetSession and gRPC", async () => {
    const ask = (id: string, rawInput: unknown, title: string) =>
      script({ steps: [{ question: { toolCallId: id, kind: "execute", title, rawInput } }, { content: " done" }] });
    // Two commands in one prompt: each question names its own.
    const two = script({
      steps: [
        { question: { toolCallId: "c1", kind: "execute", title: "Remove build", rawInput: { command: "rm -rf build", description: "clean" } } },
        { question: { toolCallId: "c2", kind: "execute", title: "Push", rawInput: { command: ["git", "push", "--force"], cwd: "/w" } } },
      ],
    });
    const first = await chat(h, internId, chatBody(two, { approval_mode: "manual" }), { key: h.tenant.apiKey });
    const args = JSON.parse(toolCallOf(first.chunks).function.arguments);
    expect(args).toEqual({
      kind: "permission",
      operation: "shell",
      options: ["allow_once", "allow_always", "reject_once"],
      deadline_at: expect.any(String),
      tool: { title: "Remove build", kind: "execute", command: "rm -rf build", input: { command: "rm -rf build", description: "clean" } },
    });
    const sessionId = finalOf(first.chunks).session_id;
    // The session read back shows the same object.
    const read = await api(h, "GET", `/interns/${internId}/sessions/${encodeURIComponent(sessionId)}`, { key: h.tenant.apiKey });
    expect(read.json.pending_question.arguments).toEqual(args);
    const second = await chat(h, internId, answerBody(sessionId, toolCallOf(first.chunks).id, "reject_once"), { key: h.tenant.apiKey });
    expect(JSON.parse(toolCallOf(second.chunks).function.arguments).tool).toEqual({
      title: "Push",
      kind: "execute",
      command: "git push --force",
      input: { command: ["git", "push", "--force"], cwd: "/w" },
    });
    await api(h, "POST", `/interns/${internId}/sessions/${encodeURIComponent(sessionId)}/cancel`, { key: h.tenant.apiKey });

    // gRPC: QuestionEvent.arguments carries the same tool; GetSession's pending question too.
    const client: any = grpcClient("portico/interns/v1/interns_service.proto", "portico.interns.v1.InternsService", h.coreUrl);
    try {
      const events = await new Promise<any[]>((resolvePromise, reject) => {
        const got: any[] = [];
        const call = client.StreamChat(
          { intern_id: internId, stream: true, approval_mode: "manual", messages: [{ role: "user", content: { stringValue: ask("g1", { cmd: "make   test" }, "Run tests") } }] },
          bearer(h.tenant.apiKey),
        );
        call.on("data", (ev: any) => got.push(ev));
        call.on("error", reject);
        call.on("end", () => resolvePromise(got));
      });
      const q = events.find((e) => e.event === "question").question;
      expect(q).toMatchObject({ kind: "permission", operation: "shell" });
      const tool = q.arguments.fields.tool.structValue.fields;
      expect(tool.command).toEqual({ kind: "stringValue", stringValue: "make test" });
      expect(tool.title).toEqual({ kind: "stringValue", stringValue: "Run tests" });
      expect(tool.input.structValue.fields.cmd).toEqual({ kind: "stringValue", stringValue: "make   test" });
      expect(q.arguments.fields.kind).toEqual({ kind: "stringValue", stringValue: "permission" });
      const gSession = events.at(-1).final.session_id;
      const g = await unary(client, "GetSession", { intern_id: internId, session_id: gSession }, bearer(h.tenant.apiKey));
      expect(g.response.session.pending_question.arguments.fields.tool.structValue.fields.command.stringValue).toBe("make test");
      await api(h, "POST", `/interns/${internId}/sessions/${encodeURIComponent(gSession)}/cancel`, { key: h.tenant.apiKey });
    } finally {
      client.close();
    }
  });

  it("a turn that fails after the agent reported its cost ends with that usage on the final chunk", async () => {
    const r = await chat(
      h,
      internId,
      chatBody(script({ steps: [{ content: "partial" }, { usageUpdate: { used: 10, cost: { amount: 0.25, currency: "USD" } } }, { fail: { message: "boom" } }] })),
      { key: h.tenant.apiKey },
    );
    expect(finishOf(r.chunks).choices[0].finish_reason).toBe("error");
    expect(finishOf(r.chunks).error.metadata.reason).toBe("turn_failed");
    expect(finalOf(r.chunks).usage).toMatchObject({ cost: 0.25 });
  });

  it("self-drive never pauses", async () => {
    const r = await chat(h, internId, chatBody(QUESTION), { key: h.tenant.apiKey });
    expect(toolCallOf(r.chunks)).toBeUndefined();
    expect(contentOf(r.chunks)).toBe("plan[answer allow] done");
  });

  it("a client disconnect mid-run reaches the agent as a cancel", async () => {
    let disconnectAt = 0;
    const r = await chat(h, internId, chatBody(script({ steps: [{ content: "tick" }, { sleep: 30_000 }, { content: "never" }] })), {
      key: h.tenant.apiKey,
      onChunk: (_c, all) => {
        if (contentOf(all) === "tick") {
          disconnectAt = Date.now();
          return true;
        }
        return false;
      },
    });
    expect(r.done).toBe(false);
    // Nothing else cancels this run: its agent would sleep 30 s (no wall-clock bound: a loaded machine
    // can take its time, and the waiting timeout still ends well before the agent's sleep would).
    const start = observed.length;
    await waitFor(
      "the agent to receive a cancel",
      () => observed.slice(start - 5).find((e) => e.type === "cancel" && e.at >= disconnectAt),
      { timeoutMs: 20_000, intervalMs: 20 },
    );
  });

  it("the interaction deadline cancels the paused run on the agent; a late answer gets 409", async () => {
    const first = await chat(h, internId, chatBody(QUESTION, { approval_mode: "manual" }), { key: h.tenant.apiKey });
    const call = toolCallOf(first.chunks);
    const sessionId = finalOf(first.chunks).session_id;
    const pausedAt = Date.now();
    const { deadlineAt } = await h.database.db.internInteraction.findUniqueOrThrow({ where: { id: call.id } });
    const cancel = await waitFor("the agent to receive the deadline's cancel", () => observed.find((e) => e.type === "cancel" && e.at >= pausedAt), {
      timeoutMs: DEADLINE_MS + 20_000,
      intervalMs: 20,
    });
    // Not before the deadline the core recorded (compared by the same clock; a timer may fire up to a
    // millisecond early by Date.now, hence the 2 ms of slack), however late the response reached us.
    expect(cancel.at).toBeGreaterThanOrEqual(deadlineAt.getTime() - 2);
    const late = await chat(h, internId, answerBody(sessionId, call.id, "allow_once"), { key: h.tenant.apiKey });
    expect(late.status).toBe(409);
    expect(late.json.error.metadata.reason).toBe("interaction_not_pending");
  });

  it("an answer racing the deadline has exactly one outcome", async () => {
    const results = await Promise.all(
      [-40, -10, 0, 15].map(async (offset) => {
        const first = await chat(h, internId, chatBody(QUESTION, { approval_mode: "manual" }), { key: h.tenant.apiKey });
        const call = toolCallOf(first.chunks);
        const sessionId = finalOf(first.chunks).session_id;
        const row = await h.database.db.internInteraction.findUniqueOrThrow({ where: { id: call.id } });
        await new Promise((res) => setTimeout(res, Math.max(0, row.deadlineAt.getTime() - Date.now() + offset)));
        const r = await chat(h, internId, answerBody(sessionId, call.id, "allow_once"), { key: h.tenant.apiKey });
        // The outcome is settled once the run has ended (finished by the answer, or cancelled at its deadline).
        await waitFor(`run ${row.runId} to end`, async () => !["paused", "streaming"].includes((await h.database.db.internRun.findUniqueOrThrow({ where: { id: row.runId } })).state));
        const run = await h.database.db.internRun.findUniqueOrThrow({ where: { id: row.runId } });
        const inter = await h.database.db.internInteraction.findUniqueOrThrow({ where: { id: call.id } });
        return { status: r.status, content: contentOf(r.chunks), run: run.state, interaction: inter.state };
      }),
    );
    for (const r of results) {
      if (r.status === 200) expect(r).toMatchObject({ content: "[answer allow] done", run: "finished", interaction: "answered" });
      else expect(r).toMatchObject({ status: 409, run: "cancelled", interaction: "expired" });
    }
  });
});

describe("intern chat through an intern host process", () => {
  let h: Harness;
  let internId: string;
  let token: string;
  let dir: string;
  let child: ChildProcess | undefined;

  const startHostProcess = async () => {
    const { command, args } = scriptedAgentCommand(REPO);
    child = spawn(
      process.execPath,
      [join(REPO, "bin/portico.mjs"), "intern-host", "--core", h.coreUrl, "--token", token, "--work-root", dir, "--", command, ...args],
      {
        cwd: REPO,
        detached: true,
        stdio: ["ignore", "ignore", "pipe"],
        env: { ...process.env, PORTICO_HOST_RUN_AS: "off", PORTICO_HOST_BWRAP: "off", PORTICO_LOG_LEVEL: "warn" },
      },
    );
    await waitFor(
      "the intern host process to attach",
      async () => (await h.database.db.intern.findUniqueOrThrow({ where: { id: internId } })).status === "attached",
      { timeoutMs: 20_000, intervalMs: 100 },
    );
  };

  beforeAll(async () => {
    h = await startHarness({ env: ENV });
    ({ internId, token } = await createTestIntern(h));
    dir = mkdtempSync(join(tmpdir(), "portico-e2e-hostproc-"));
    chmodSync(dir, 0o755);
    await startHostProcess();
  }, 60_000);
  afterAll(async () => {
    if (child?.pid && child.exitCode === null) {
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {
        // already gone
      }
    }
    await h?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("streams a run through the host process and its agent subprocess", async () => {
    const r = await chat(h, internId, chatBody(script({ steps: [{ content: "from a subprocess" }] })), { key: h.tenant.apiKey });
    expect(r.status).toBe(200);
    expect(contentOf(r.chunks)).toBe("from a subprocess");
    expect(finishOf(r.chunks).choices[0].finish_reason).toBe("stop");
  }, 30_000);

  it("killing the host mid-run gives stream_severed + final + [DONE], noticed by the link's end", async () => {
    let killedAt = 0;
    const r = await chat(h, internId, chatBody(script({ steps: [{ content: "tick" }, { sleep: 30_000 }] })), {
      key: h.tenant.apiKey,
      onChunk: (_c, all) => {
        if (contentOf(all) === "tick" && !killedAt) {
          killedAt = Date.now();
          process.kill(-child!.pid!, "SIGKILL");
        }
      },
    });
    expect(killedAt).toBeGreaterThan(0);
    // The core noticed the connection's end at once, not after the liveness timeout (a wall-clock bound
    // would tell the two apart only on a machine that is not loaded).
    const closes = h.logs.join("").split("\n").filter((l) => l.includes('"msg":"intern link closed"'));
    expect(closes.length).toBeGreaterThan(0);
    expect(closes.at(-1)).not.toContain("liveness timeout");
    expect(finishOf(r.chunks).error).toMatchObject({ code: 502, metadata: { reason: "stream_severed", retryable: true } });
    expect(finalOf(r.chunks)).toBeDefined();
    expect(r.done).toBe(true);
  }, 30_000);
});
