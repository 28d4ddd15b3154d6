/**
 * Several instances on PostgreSQL + Redis, as real processes: two `portico core`, two `portico
 * gateway` (gateway 1 dials core 1 then core 2, gateway 2 dials core 2) and one `portico
 * intern-host --core core1,core2` driving the scripted ACP agent. The host attaches to core 1;
 * prompts and answers through gateway 2 reach core 2, which forwards them to core 1 (the link's holder, per its
 * Redis lease). Core 1 is SIGKILLed while one run streams and two are paused: the streaming run ends
 * with stream_severed, the host re-attaches to core 2, the answer through gateway 1 continues its run
 * to `stop`, and the other paused run's deadline fires exactly once although core 1, which set it,
 * is gone.
 */
import type { ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scriptedAgentCommand } from "../../fixtures/scripted-agent.js";
import { runPortico, startPortico } from "../../helpers/cli.js";
import { createTestPgDatabase } from "../../helpers/db.js";
import type { Harness } from "../../helpers/harness.js";
import { answerBody, chat, chatBody, contentOf, finalOf, finishOf, toolCallOf } from "../../integration/interns/sse-client.js";
import { waitFor } from "../../helpers/wait.js";

const REPO = resolve(import.meta.dirname, "../../..");
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
// Run A is answered after the failover, before its deadline: everything from its pause to that answer took
// 18 s on a loaded 2-core machine, past a 12 s deadline. Run B's deadline is awaited (it costs the wait).
const DEADLINE_MS = 40_000;
const script = (s: unknown) => JSON.stringify(s);
const QUESTION = script({ steps: [{ content: "plan" }, { question: { toolCallId: "t1", kind: "execute", title: "ls" } }, { content: " done" }] });

interface Proc {
  child: ChildProcess;
  output: () => string;
}

const listening = (marker: string) => (out: string) => {
  for (const line of out.split("\n")) {
    if (!line.includes(marker)) continue;
    const m = /"url":"(https?:\/\/[^"/]+)/.exec(line);
    if (m) return m[1]!;
  }
  return undefined;
};


describe("interns across two cores and two gateways (PostgreSQL + Redis, real processes)", () => {
  const dir = mkdtempSync(join(tmpdir(), "portico-multicore-"));
  chmodSync(dir, 0o755);
  const procs: Proc[] = [];
  let db: Awaited<ReturnType<typeof createTestPgDatabase>>;
  let sql: pg.Client;
  let env: Record<string, string>;
  let apiKey: string;
  let internId: string;
  let hostToken: string;
  let core1: Proc & { value: string };
  let core2: Proc & { value: string };
  let gw1: { baseUrl: string };
  let gw2: { baseUrl: string };
  let host: Proc;

  beforeAll(async () => {
    db = await createTestPgDatabase();
    env = {
      DATABASE_URL: db.url,
      REDIS_URL,
      PORTICO_REDIS_PREFIX: `test-${randomBytes(6).toString("hex")}:`,
      PORTICO_DATA_DIR: join(dir, "data"),
      PORTICO_EMBEDDED_HOST: "false",
      PORTICO_LOG_LEVEL: "info",
      HOST: "127.0.0.1",
      PORT: "0",
      PORTICO_GRPC_PORT: "0",
      PORTICO_INTERACTION_DEADLINE_MS: String(DEADLINE_MS),
      PORTICO_LINK_PING_INTERVAL_MS: "200",
      PORTICO_LINK_LIVENESS_TIMEOUT_MS: "1500",
      PORTICO_INTERN_START_TIMEOUT_MS: "20000",
      PORTICO_INTERN_RATE_LIMIT: "10000",
    };
    const boot = await runPortico(["admin", "bootstrap", "--json"], env, 120_000);
    expect(boot.code, boot.stderr).toBe(0);
    const b = JSON.parse(boot.stdout);
    apiKey = b.api_key;
    const created = await runPortico(["admin", "intern", "create", "--workspace", b.workspace_id, "--name", "multi-core", "--json"], env);
    expect(created.code, created.stderr).toBe(0);
    ({ intern_id: internId, host_token: hostToken } = JSON.parse(created.stdout));
    sql = new pg.Client({ connectionString: db.url });
    await sql.connect();

    const start = async (args: string[], extra: Record<string, string>, marker: string) => {
      const p = await startPortico(args, { ...env, ...extra }, listening(marker), 60_000);
      procs.push(p);
      return p;
    };
    [core1, core2] = await Promise.all([
      start(["core"], { PORTICO_INSTANCE_ID: "core-1" }, "core listening"),
      start(["core"], { PORTICO_INSTANCE_ID: "core-2" }, "core listening"),
    ]);
    const [g1, g2] = await Promise.all([
      start(["gateway", "--core", `${core1.value},${core2.value}`], {}, "gateway listening"),
      start(["gateway", "--core", core2.value], {}, "gateway listening"),
    ]);
    gw1 = { baseUrl: g1.value };
    gw2 = { baseUrl: g2.value };
    const { command, args } = scriptedAgentCommand(REPO);
    host = await startPortico(
      ["intern-host", "--core", `${core1.value},${core2.value}`, "--work-root", join(dir, "work"), "--", command, ...args],
      { ...env, PORTICO_HOST_TOKEN: hostToken, PORTICO_HOST_RUN_AS: "off", PORTICO_HOST_BWRAP: "off" },
      (out) => (out.includes("link established") ? true : undefined),
      60_000,
    );
    procs.push(host);
  }, 180_000);

  afterAll(async () => {
    for (const p of procs.reverse()) {
      if (p.child.exitCode === null && p.child.signalCode === null) {
        const gone = new Promise((r) => p.child.once("exit", r));
        p.child.kill("SIGTERM");
        await Promise.race([gone, new Promise((r) => setTimeout(r, 5_000))]);
        if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
      }
    }
    await sql?.end().catch(() => undefined);
    await db?.drop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  const via = (gw: { baseUrl: string }) => gw as unknown as Harness;

  it("fails over without losing paused runs; a dead core severs its streams; a deadline fires once", async () => {
    expect(host.output()).toContain(core1.value);

    // Prompts through gateway 2 (core 2) are served by core 1, which holds the link.
    const a = await chat(via(gw2), internId, chatBody(QUESTION, { approval_mode: "manual" }), { key: apiKey });
    expect(a.status, a.raw).toBe(200);
    const callA = toolCallOf(a.chunks);
    expect(finishOf(a.chunks).choices[0].finish_reason).toBe("tool_calls");
    const sessionA = finalOf(a.chunks).session_id;
    const b = await chat(via(gw2), internId, chatBody(QUESTION, { approval_mode: "manual" }), { key: apiKey });
    const callB = toolCallOf(b.chunks);
    expect(callB).toBeDefined();
    // Core 2 never held the link: it forwarded both prompts.
    expect(core1.output()).toContain("intern host attached");
    expect(core2.output()).not.toContain("intern host attached");

    // A question asked through gateway 1 is answered through gateway 2 (forwarded to core 1).
    const d = await chat(via(gw1), internId, chatBody(QUESTION, { approval_mode: "manual" }), { key: apiKey });
    const dAnswer = await chat(via(gw2), internId, answerBody(finalOf(d.chunks).session_id, toolCallOf(d.chunks).id, "allow_once"), { key: apiKey });
    expect(dAnswer.status, dAnswer.raw).toBe(200);
    expect(contentOf(dAnswer.chunks)).toBe("[answer allow] done");
    expect(finishOf(dAnswer.chunks).choices[0].finish_reason).toBe("stop");

    // A run streaming through core 2 → core 1 when core 1 dies ends with stream_severed.
    const died = new Promise((r) => core1.child.once("exit", r));
    const streaming = await chat(via(gw2), internId, chatBody(script({ steps: [{ content: "tick" }, { sleep: 30_000 }] })), {
      key: apiKey,
      onChunk: (_c, all) => {
        if (contentOf(all) === "tick" && core1.child.exitCode === null && core1.child.signalCode === null) core1.child.kill("SIGKILL");
      },
    });
    await died;
    expect(streaming.status).toBe(200);
    expect(contentOf(streaming.chunks)).toBe("tick");
    expect(finishOf(streaming.chunks).error).toMatchObject({ code: 502, metadata: { reason: "stream_severed", retryable: true } });
    expect(streaming.done).toBe(true);

    // The host re-attaches to core 2.
    await waitFor("the host to re-attach to core 2", () => {
      const lines = host.output().split("\n").filter((l) => l.includes("link established"));
      return lines.some((l) => l.includes(core2.value));
    }, { timeoutMs: 20_000, intervalMs: 50 });

    // The answer through gateway 1 (its core 1 is gone: it fails over to core 2) continues run A.
    const answered = await chat(via(gw1), internId, answerBody(sessionA, callA.id, "allow_once"), { key: apiKey });
    expect(answered.status, answered.raw).toBe(200);
    expect(contentOf(answered.chunks)).toBe("[answer allow] done");
    expect(finishOf(answered.chunks).choices[0].finish_reason).toBe("stop");
    expect(finalOf(answered.chunks).session_id).toBe(sessionA);

    // Run B's deadline, set by core 1, fires once (on core 2): cancelled, its question expired.
    const runB = await waitFor(
      "run B's deadline",
      async () => {
        const r = await sql.query(
          `SELECT r.state, r."endReason", i.state AS "interaction" FROM "InternRun" r JOIN "InternInteraction" i ON i."runId" = r.id WHERE i.id = $1`,
          [callB.id],
        );
        const row = r.rows[0];
        return row && row.state !== "paused" ? row : undefined;
      },
      { timeoutMs: DEADLINE_MS + 10_000, intervalMs: 50 },
    );
    expect(runB).toEqual({ state: "cancelled", endReason: "deadline", interaction: "expired" });
    // Its log line comes through core 2's output pipe, which the test may read after the database row.
    const fired = () => (core1.output() + core2.output()).split("\n").filter((l) => l.includes("interaction deadline passed") && l.includes(callB.id));
    await waitFor("core 2's log of run B's deadline", () => fired().length > 0);
    expect(fired()).toHaveLength(1);
    const late = await chat(via(gw2), internId, answerBody(finalOf(b.chunks).session_id, callB.id, "allow_once"), { key: apiKey });
    expect(late.status).toBe(409);
    expect(late.json.error.metadata.reason).toBe("interaction_not_pending");
  }, 120_000);
});
