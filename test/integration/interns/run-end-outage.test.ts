/**
 * A run's end is written even when the database fails at that moment, and a run no live process
 * relays is ended by another core (issue 26: a run stayed `streaming` for 20+ minutes after a 2.5 s
 * PostgreSQL restart; its session answered 409 busy until the process restarted).
 *
 * The outage is real and private to the test database: on PostgreSQL it stops accepting connections
 * and its sessions are terminated (pg_terminate_backend; the shared server is never restarted); on
 * SQLite another connection holds the write lock past the (short) busy timeout.
 */
import Database from "better-sqlite3";
import pg from "pg";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CancelReason } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { testPgAdminUrl } from "../../helpers/db.js";
import { bearer, grpcClient } from "../../helpers/grpc.js";
import { startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeHost, type FakeHost } from "./fake-host.js";
import { chat, chatBody, contentOf, createTestIntern, finalOf, finishOf } from "./sse-client.js";

const ENV = {
  PORTICO_HEARTBEAT_INTERVAL_MS: "5000",
  PORTICO_INTERN_START_TIMEOUT_MS: "5000",
  // The sweep runs every quarter of the deadline (here 1 s).
  PORTICO_INTERACTION_DEADLINE_MS: "4000",
  PORTICO_INTERN_RATE_LIMIT: "10000",
};

interface Outage {
  start(): Promise<void>;
  end(): Promise<void>;
}

async function outageOf(h: Harness): Promise<Outage & { dispose(): Promise<void> }> {
  if (h.provider === "sqlite") {
    const path = h.database.url.slice("file:".length);
    let holder: Database.Database | undefined;
    const end = async () => {
      holder?.exec("COMMIT");
      holder?.close();
      holder = undefined;
    };
    return {
      async start() {
        holder = new Database(path);
        holder.exec("BEGIN EXCLUSIVE");
      },
      end,
      dispose: end,
    };
  }
  const name = new URL(h.database.url).pathname.slice(1);
  const admin = new pg.Client({ connectionString: testPgAdminUrl() });
  admin.on("error", () => undefined);
  await admin.connect();
  const end = async () => void (await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`));
  return {
    async start() {
      await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS false`);
      await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [name]);
    },
    end,
    async dispose() {
      await end().catch(() => undefined);
      await admin.end();
    },
  };
}

describe.each(["sqlite", "postgresql"] as const)("intern runs when the database fails (%s)", (provider) => {
  let h: Harness;
  let internId: string;
  let host: FakeHost;
  let key: string;
  let outage: Awaited<ReturnType<typeof outageOf>>;
  let grpcInterns: any;

  beforeAll(async () => {
    h = await startHarness({ provider, env: ENV, busyTimeoutMs: 100 });
    let token: string;
    ({ internId, token } = await createTestIntern(h));
    host = startFakeHost({ coreUrl: h.coreUrl, token });
    await host.welcome;
    key = h.tenant.apiKey;
    outage = await outageOf(h);
    grpcInterns = grpcClient("portico/interns/v1/interns_service.proto", "portico.interns.v1.InternsService", h.coreUrl);
  });
  afterAll(async () => {
    grpcInterns?.close();
    await outage?.dispose();
    host?.kill();
    await h?.close();
  });

  it("a run whose end could not be written ends once the database is back, and its session takes a new turn", async () => {
    const sessionId = `outage-${randomUUID()}`;
    const streaming = chat(h, internId, chatBody("slow", { session_id: sessionId }), { key });
    const run = await host.waitFor(() => [...host.runs.values()].find((r) => r.start.sessionId === sessionId && r.seq >= 2), 10_000);
    const runId = run.start.runId;
    // The run is owned by this process, with a lease in the future.
    const live = await h.database.db.internRun.findUniqueOrThrow({ where: { id: runId } });
    expect(live).toMatchObject({ state: "streaming", owner: h.config.instanceId });
    expect(live.leaseUntil!.getTime()).toBeGreaterThan(Date.now());

    const logsBefore = h.logs.length;
    await outage.start();
    // The turn ends while the database cannot take the write.
    host.emit(runId, { case: "turnEnded", value: { stopReason: "end_turn" } as never });
    run.ended = true;
    const r = await streaming;
    expect(r.status).toBe(200);
    expect(finishOf(r.chunks).choices[0].finish_reason).toBe("stop");
    expect(r.done).toBe(true);
    await expect
      .poll(() => h.logs.slice(logsBefore).some((l) => l.includes("could not record the end of a run")), { timeout: 10_000, interval: 20 })
      .toBe(true);

    await outage.end();
    // Written once the database is back (the backoff is at most 5 s): the run is finished and the session free.
    await expect
      .poll(async () => (await h.database.db.internRun.findUniqueOrThrow({ where: { id: runId } })).state, { timeout: 15_000, interval: 50 })
      .toBe("finished");
    const row = await h.database.db.internRun.findUniqueOrThrow({ where: { id: runId } });
    expect(row.endReason).toBe("end_turn");
    expect((await h.database.db.internSession.findFirstOrThrow({ where: { sessionKey: sessionId } })).activeRunId).toBeNull();
    const next = await chat(h, internId, chatBody("hello", { session_id: sessionId }), { key });
    expect(next.status).toBe(200);
    expect(contentOf(next.chunks)).toBe("Hello world");
    expect(finalOf(next.chunks).session_id).toBe(sessionId);
  });

  it("the same over gRPC: StreamChat ends while the end cannot be written, the run is finished later, the session takes a new turn", async () => {
    const sessionId = `outage-grpc-${randomUUID()}`;
    const request = (text: string) => ({ intern_id: internId, stream: true, session_id: sessionId, messages: [{ role: "user", content: { stringValue: text } }] });
    const streamChat = (text: string) =>
      new Promise<{ events: any[]; error?: unknown }>((resolve) => {
        const events: any[] = [];
        const call = grpcInterns.StreamChat(request(text), bearer(key));
        call.on("data", (ev: any) => events.push(ev));
        call.on("error", (error: unknown) => resolve({ events, error }));
        call.on("end", () => resolve({ events }));
      });
    const streaming = streamChat("slow");
    const run = await host.waitFor(() => [...host.runs.values()].find((r) => r.start.sessionId === sessionId && r.seq >= 2), 10_000);
    const runId = run.start.runId;
    const logsBefore = h.logs.length;
    await outage.start();
    host.emit(runId, { case: "turnEnded", value: { stopReason: "end_turn" } as never });
    run.ended = true;
    const r = await streaming;
    expect(r.error).toBeUndefined();
    expect(r.events.find((e) => e.event === "finish")?.finish.reason).toBe("stop");
    expect(r.events.at(-1).event).toBe("final");
    await expect
      .poll(() => h.logs.slice(logsBefore).some((l) => l.includes("could not record the end of a run")), { timeout: 10_000, interval: 20 })
      .toBe(true);

    await outage.end();
    await expect
      .poll(async () => (await h.database.db.internRun.findUniqueOrThrow({ where: { id: runId } })).state, { timeout: 15_000, interval: 50 })
      .toBe("finished");
    await expect
      .poll(async () => (await h.database.db.internSession.findFirstOrThrow({ where: { sessionKey: sessionId } })).activeRunId, { timeout: 10_000, interval: 50 })
      .toBeNull();
    const next = await streamChat("hello");
    expect(next.error).toBeUndefined();
    expect(next.events.filter((e) => e.event === "content").map((e) => e.content.text).join("")).toBe("Hello world");
  });

  it("a streaming run whose owning process is gone (its lease passed) is ended by this core; a live owner's run is left alone", async () => {
    const db = h.database.db;
    const orphanSession = `orphan-${randomUUID()}`;
    const otherSession = `other-${randomUUID()}`;
    const orphanRun = randomUUID();
    const otherRun = randomUUID();
    // As a core that died mid-stream leaves them: the run streaming, the session locked by it, the lease passed.
    const s1 = await db.internSession.create({ data: { internId, sessionKey: orphanSession, activeRunId: orphanRun } });
    await db.internRun.create({
      data: { id: orphanRun, internId, sessionId: s1.id, sessionKey: orphanSession, state: "streaming", approvalMode: "self-drive", owner: "core-that-died", leaseUntil: new Date(Date.now() - 1_000) },
    });
    // Another core, alive, relays this one (its lease is in the future).
    const s2 = await db.internSession.create({ data: { internId, sessionKey: otherSession, activeRunId: otherRun } });
    await db.internRun.create({
      data: { id: otherRun, internId, sessionId: s2.id, sessionKey: otherSession, state: "streaming", approvalMode: "self-drive", owner: "core-alive", leaseUntil: new Date(Date.now() + 120_000) },
    });

    await expect.poll(async () => (await db.internRun.findUniqueOrThrow({ where: { id: orphanRun } })).state, { timeout: 10_000, interval: 50 }).toBe("ended");
    expect((await db.internRun.findUniqueOrThrow({ where: { id: orphanRun } })).endReason).toBe("owner_lost");
    // The run's end and the session's release are separate idempotent writes: wait for the second as well.
    await expect.poll(async () => (await db.internSession.findUniqueOrThrow({ where: { id: s1.id } })).activeRunId, { timeout: 10_000, interval: 50 }).toBeNull();
    // The host holding the intern's link is told to cancel it.
    const cancel = await host.waitFor(() => host.cancels.find((c) => c.runId === orphanRun), 5_000);
    expect(cancel.reason).toBe(CancelReason.OPERATOR);
    const next = await chat(h, internId, chatBody("hello", { session_id: orphanSession }), { key });
    expect(next.status).toBe(200);
    expect(contentOf(next.chunks)).toBe("Hello world");

    // The other run is left alone: its owner vouches for it.
    expect(await db.internRun.findUniqueOrThrow({ where: { id: otherRun } })).toMatchObject({ state: "streaming", owner: "core-alive" });
    const busy = await chat(h, internId, chatBody("hello", { session_id: otherSession }), { key });
    expect(busy.status).toBe(409);
    expect(busy.json.error.metadata.reason).toBe("busy");
  });
});
