/**
 * The run lifecycle (src/core/interns/run-lifecycle.ts) is the one place a run's state changes. Its
 * writes on real databases, both providers: a run's start, pause and answer, its end (in memory, or by
 * its row alone, where concurrent writers race and exactly one wins), its owner and lease, and whose
 * leaving cancels a run a client reads.
 */
import { randomUUID } from "node:crypto";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { CancelReason } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import type { InternChatConfig } from "../../../src/config.js";
import { createInternRepository } from "../../../src/core/interns/intern-repository.js";
import type { InternCluster } from "../../../src/core/interns/cluster.js";
import type { InternLink, LinkRegistry } from "../../../src/core/interns/link-registry.js";
import { ActiveRun } from "../../../src/core/interns/active-run.js";
import { createRunLifecycle, type RunContext } from "../../../src/core/interns/run-lifecycle.js";
import { dbProviders, useDatabase } from "../../helpers/db.js";

describe.each(dbProviders)("run lifecycle (%s)", (_provider, fresh) => {
  const h = useDatabase(fresh);

  function setup(instanceId = "core-a") {
    const db = h().db;
    const repo = createInternRepository(db);
    const pending: Promise<unknown>[] = [];
    const stopping = new AbortController();
    const ctx: RunContext = {
      repo,
      links: {} as LinkRegistry,
      cluster: {} as InternCluster,
      config: {} as InternChatConfig,
      instanceId,
      log: pino({ level: "silent" }),
      later: (work) => void pending.push(work()),
      runs: new Map(),
      closed: () => false,
      stopping: stopping.signal,
      unwrittenEnds: new Set(),
      runLeaseMs: 30_000,
      gatewayUrl: () => undefined,
    };
    const lifecycle = createRunLifecycle(ctx);
    const cancelled: [string, CancelReason][] = [];
    const link = { internId: "", cancelRun: (id: string, reason: CancelReason) => void cancelled.push([id, reason]) } as unknown as InternLink;
    return { db, repo, ctx, lifecycle, link, cancelled, settle: () => Promise.all(pending) };
  }

  /** An intern with a session whose turn lock the new run `runId` holds, and the run's row (streaming). */
  async function startedRun(s: ReturnType<typeof setup>) {
    const org = await s.db.organization.create({ data: { name: "Org" } });
    const ws = await s.db.workspace.create({ data: { organizationId: org.id, name: "W", slug: `w-${randomUUID().slice(0, 8)}` } });
    const { intern } = await s.repo.createIntern({ workspaceId: ws.id, name: "lifecycle" });
    const runId = randomUUID();
    const session = await s.lifecycle.newLockedSession(intern.id, randomUUID(), runId);
    await s.lifecycle.recordStart({ id: runId, internId: intern.id, sessionId: session.id, sessionKey: session.sessionKey, approvalMode: "manual" });
    const run = new ActiveRun(runId, intern.id, session.id, session.sessionKey, "manual");
    s.lifecycle.admitted(run, { link: s.link, model: "m-1", callerKey: "k", throughGateway: false });
    s.lifecycle.started(run);
    return { intern, session, run };
  }

  it("gives a session's turn lock to one of two runs that want it at once", async () => {
    const s = setup();
    const { session, run } = await startedRun(s);
    const [x, y] = [randomUUID(), randomUUID()];
    expect(await s.lifecycle.lockTurn(session.id, x)).toBe(false); // the started run holds it
    await s.lifecycle.releaseStaleLock(session.id, x); // not x's: nothing changes
    expect((await s.repo.findSession(session.id))!.activeRunId).toBe(run.id);
    await s.lifecycle.releaseStaleLock(session.id, run.id);
    const won = await Promise.all([s.lifecycle.lockTurn(session.id, x), s.lifecycle.lockTurn(session.id, y)]);
    expect(won.filter(Boolean)).toHaveLength(1);
    expect((await s.repo.findSession(session.id))!.activeRunId).toBe(won[0] ? x : y);
  });

  const question = (deadlineMs = 60_000) => ({
    id: randomUUID(),
    kind: "permission",
    operation: "execute",
    options: ["allow_once", "reject_once"],
    deadlineAt: new Date(Date.now() + deadlineMs),
    arguments: { tool: "ls" },
  });

  it("records a start owned by this process, and releases the turn lock when the row cannot be written", async () => {
    const s = setup();
    const { run, session } = await startedRun(s);
    const row = await s.repo.findRun(run.id);
    expect(row).toMatchObject({ state: "streaming", owner: "core-a", approvalMode: "manual" });
    expect(row!.leaseUntil!.getTime()).toBeGreaterThan(Date.now());
    expect(s.ctx.runs.get(run.id)).toBe(run);
    expect(run).toMatchObject({ attached: true, reading: 1, model: "m-1", link: s.link, state: "streaming" });

    // A second row with the same id fails: the lock taken for it is released, the error reaches the caller.
    await s.repo.unlockSession(session.id, run.id);
    expect(await s.repo.lockSession(session.id, run.id)).toBe(true);
    const err = await s.lifecycle
      .recordStart({ id: run.id, internId: run.internId, sessionId: session.id, sessionKey: session.sessionKey, approvalMode: "manual" })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((await s.repo.findSession(session.id))!.activeRunId).toBeNull();
  });

  it("pauses on a question and resumes on its answer, in memory and in the database", async () => {
    const s = setup();
    const { run } = await startedRun(s);
    run.lastSeq = 7;
    const q = question();
    expect(await s.lifecycle.recordPause(run, q)).toBe(true);
    expect(run.state).toBe("paused");
    expect(run.interaction).toEqual({ id: q.id, deadlineAt: q.deadlineAt, arguments: q.arguments });
    expect(await s.repo.findRun(run.id)).toMatchObject({ state: "paused", lastSeq: 7, model: "m-1" });
    expect(await s.repo.findInteraction(q.id)).toMatchObject({ state: "pending", runId: run.id, kind: "permission", operation: "execute" });

    let fired: string | undefined;
    s.lifecycle.armDeadline(run, (id) => (fired = id));
    expect(run.deadlineTimer).toBeDefined();

    s.lifecycle.detach(run); // the client got the question
    expect(run.attached).toBe(false);
    expect(await s.repo.claimInteraction(q.id, new Date())).toBe(true);
    expect(s.lifecycle.attach(run)).toBe(true);
    expect(s.lifecycle.attach(run)).toBe(false);
    await s.lifecycle.answered(run, q.id, "allow_once");
    expect(run).toMatchObject({ state: "streaming", interaction: undefined, deadlineTimer: undefined, attached: true });
    expect(fired).toBeUndefined();
    expect(await s.repo.findRun(run.id)).toMatchObject({ state: "streaming" });
    expect(await s.repo.findInteraction(q.id)).toMatchObject({ state: "answered", answer: "allow_once" });
  });

  it("voids the question of a pause recorded after the run ended", async () => {
    const s = setup();
    const { run, session } = await startedRun(s);
    const q = question();
    const ending = s.lifecycle.end(run, { on: "clientGone" });
    expect(await s.lifecycle.recordPause(run, q)).toBe(false);
    await ending;
    await s.settle();
    expect(await s.repo.findInteraction(q.id)).toMatchObject({ state: "void" });
    expect(await s.repo.findRun(run.id)).toMatchObject({ state: "cancelled", endReason: "client_disconnected" });
    expect((await s.repo.findSession(session.id))!.activeRunId).toBeNull();
  });

  it("ends a relayed run once: memory first, then its row, its questions, its credential and its session's lock", async () => {
    const s = setup();
    const { run, session, intern } = await startedRun(s);
    const q = question();
    await s.lifecycle.recordPause(run, q);
    await s.db.internRunCredential.create({
      data: {
        tokenHash: randomUUID(),
        runId: run.id,
        internId: intern.id,
        sessionId: session.id,
        sessionKey: session.sessionKey,
        organizationId: intern.organizationId,
        workspaceId: intern.workspaceId,
        keyId: "key",
        keyHash: "hash",
        model: "m-1",
        expiresAt: new Date(Date.now() + 60_000),
      },
    });
    s.lifecycle.recordUsage(run, { promptTokens: 3n, completionTokens: 4n, totalTokens: 7n } as never);
    const [first, second] = await Promise.all([s.lifecycle.end(run, { on: "deadline" }), s.lifecycle.end(run, { on: "cancelled" })]);
    expect(first.endReason).toBe("deadline");
    expect(second.endReason).toBe("cancelled"); // rendered, but the run was already over in memory: nothing written
    await s.settle();
    expect(run).toMatchObject({ state: "done", attached: false, interaction: undefined });
    expect(s.ctx.runs.has(run.id)).toBe(false);
    const row = await s.repo.findRun(run.id);
    expect(row).toMatchObject({ state: "cancelled", endReason: "deadline", usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } });
    expect(row!.endedAt).toBeInstanceOf(Date);
    expect(await s.repo.findInteraction(q.id)).toMatchObject({ state: "void" });
    expect((await s.db.internRunCredential.findUnique({ where: { runId: run.id } }))!.revokedAt).toBeInstanceOf(Date);
    expect((await s.repo.findSession(session.id))!.activeRunId).toBeNull();
  });

  it("ends a run by its row: of concurrent writers exactly one wins, from the expected states only", async () => {
    const a = setup("core-a");
    const b = setup("core-b");
    const { run, session } = await startedRun(a);
    const q = question();
    await a.lifecycle.recordPause(run, q);
    const row = { id: run.id, sessionId: session.id };

    // Not in an expected state: nothing changes.
    expect(await a.lifecycle.endRow(row, ["streaming"], { on: "ownerLost" })).toBe(false);
    expect(await a.repo.findRun(run.id)).toMatchObject({ state: "paused" });
    expect((await a.repo.findSession(session.id))!.activeRunId).toBe(run.id);

    const won = await Promise.all([
      a.lifecycle.endRow(row, ["streaming", "paused"], { on: "cancelled" }),
      b.lifecycle.endRow(row, ["streaming", "paused"], { on: "hostLost" }),
      b.lifecycle.endRow(row, ["paused"], { on: "overflow" }),
    ]);
    expect(won.filter(Boolean)).toHaveLength(1);
    const ended = await a.repo.findRun(run.id);
    const winner = [
      { state: "cancelled", endReason: "cancelled" },
      { state: "ended", endReason: "host_lost" },
      { state: "failed", endReason: "attachment_failed" },
    ][won.indexOf(true)];
    expect(ended).toMatchObject(winner!);
    expect(await a.repo.findInteraction(q.id)).toMatchObject({ state: "void" });
    expect((await a.repo.findSession(session.id))!.activeRunId).toBeNull();
  });

  it("leaves the question alone when asked to (the deadline expired it already)", async () => {
    const s = setup();
    const { run, session } = await startedRun(s);
    const q = question();
    await s.lifecycle.recordPause(run, q);
    expect(await s.lifecycle.endRow({ id: run.id, sessionId: session.id }, ["paused", "streaming"], { on: "deadline" }, { voidQuestions: false })).toBe(true);
    expect(await s.repo.findRun(run.id)).toMatchObject({ state: "cancelled", endReason: "deadline" });
    expect(await s.repo.findInteraction(q.id)).toMatchObject({ state: "pending" });
    expect((await s.repo.findSession(session.id))!.activeRunId).toBeNull();
  });

  it("moves a live run's ownership and lease, never an ended run's", async () => {
    const a = setup("core-a");
    const b = setup("core-b");
    const { run, session } = await startedRun(a);
    const before = (await a.repo.findRun(run.id))!.leaseUntil!;
    await b.lifecycle.claim(run.id);
    const claimed = (await a.repo.findRun(run.id))!;
    expect(claimed.owner).toBe("core-b");
    expect(claimed.leaseUntil!.getTime()).toBeGreaterThanOrEqual(before.getTime());

    // core-a no longer owns it: its renewal does not touch it; core-b's does.
    await a.db.internRun.updateMany({ where: { id: run.id }, data: { leaseUntil: new Date(0) } });
    await a.lifecycle.renewLeases([run.id]);
    expect((await a.repo.findRun(run.id))!.leaseUntil!.getTime()).toBe(0);
    await b.lifecycle.renewLeases([run.id]);
    expect((await a.repo.findRun(run.id))!.leaseUntil!.getTime()).toBeGreaterThan(Date.now());

    await a.lifecycle.endRow({ id: run.id, sessionId: session.id }, ["streaming"], { on: "ownerLost" });
    await a.db.internRun.updateMany({ where: { id: run.id }, data: { leaseUntil: new Date(0) } });
    await a.lifecycle.claim(run.id);
    await b.lifecycle.renewLeases([run.id]);
    expect(await a.repo.findRun(run.id)).toMatchObject({ state: "ended", endReason: "owner_lost", owner: "core-b", leaseUntil: new Date(0) });
  });

  it("cancels a run when its reading client leaves, not when a released client leaves after another started reading", async () => {
    const s = setup();
    const { run } = await startedRun(s);
    const first = run.reading;
    await s.lifecycle.recordPause(run, question());
    s.lifecycle.detach(run); // the first client got the question: released
    expect(s.lifecycle.attach(run)).toBe(true); // an answer's client reads the run now
    s.lifecycle.leave(run, first);
    expect(s.cancelled).toEqual([]);
    expect(run.state).toBe("paused");

    s.lifecycle.leave(run, run.reading);
    expect(s.cancelled).toEqual([[run.id, CancelReason.CLIENT_DISCONNECTED]]);
    await s.settle();
    expect(await s.repo.findRun(run.id)).toMatchObject({ state: "cancelled", endReason: "client_disconnected" });
  });
});
