/**
 * `portico serve` with two worker processes (PORTICO_WORKERS=2) on the embedded SQLite database, no
 * Redis: connections are spread over both workers, an intern prompt succeeds whichever worker takes it
 * (the other forwards to the one holding the embedded host's link), a paused run is answered through
 * either worker, the intern turn budget is one
 * budget for the whole serve, a paused run nobody answers is cancelled at its deadline once (a late
 * answer through either worker is refused), a revoked key is refused by every worker within one second, and a worker
 * killed with SIGKILL is replaced while what it acknowledged stays written. A scrape of /metrics counts the
 * requests of both workers, whichever worker answers it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChildProcess } from "node:child_process";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { hashSecret } from "../../../src/core/identity/keys.js";
import { requestOnNewConnection as request, runPortico, startPortico } from "../../helpers/cli.js";
import { allProcesses } from "../../helpers/procs.js";
import { answerBody, chatBody, contentOf, finalOf, toolCallOf } from "../../integration/interns/sse-client.js";
import { waitFor } from "../../helpers/wait.js";

/** The worker processes a serve primary forked. */
const childPids = (pid: number) => allProcesses().filter((p) => p.ppid === pid && p.cmdline.includes("portico")).map((p) => p.pid);

describe("portico serve with worker processes (SQLite, no Redis)", () => {
  const dirs: string[] = [];
  let child: ChildProcess | undefined;
  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child!.once("exit", r));
      child.kill("SIGTERM");
      await gone;
    }
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  it("spreads connections, forwards intern runs, shares the turn budget and revocations, replaces a dead worker", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "portico-workers-"));
    dirs.push(dataDir);
    const env = {
      PORT: "0",
      PORTICO_GRPC_PORT: "0",
      PORTICO_DATA_DIR: dataDir,
      PORTICO_LOG_LEVEL: "info",
      PORTICO_WORKERS: "2",
      PORTICO_INTERN_RATE_LIMIT: "4",
      PORTICO_INTERN_RATE_WINDOW_S: "600",
      PORTICO_INTERACTION_DEADLINE_MS: "5000",
    };
    const boot = JSON.parse((await runPortico(["admin", "bootstrap", "--json"], env, 120_000)).stdout);
    const started = await startPortico(["serve"], env, (out) =>
      out.includes("serving with worker processes") ? /"url":"(http:\/\/127\.0\.0\.1:\d+\/api\/v1)","msg":"gateway listening/.exec(out)?.[1] : undefined,
    );
    child = started.child;
    const api = started.value;
    const root = api.replace(/\/api\/v1$/, "");
    const ready = async () => JSON.parse((await request(`${root}/readyz`)).text).instance_id as string;

    // Both workers answer.
    const seen = new Set<string>();
    for (let i = 0; i < 20 && seen.size < 2; i++) seen.add(await ready());
    expect([...seen].sort().map((s) => s.replace(/.*-/, ""))).toEqual(["w0", "w1"]);

    // Intern prompts succeed on either worker; the budget of 4 turns is shared, so the 5th is refused.
    const auth = { authorization: `Bearer ${boot.api_key}`, "content-type": "application/json" };
    const prompt = (word: string) =>
      request(`${api}/interns/${boot.intern_id}/chat/completions`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ stream: true, messages: [{ role: "user", content: `$ echo ${word}` }] }),
      });
    // "serving with worker processes" follows every worker's readiness, which waits until the worker can
    // reach the embedded host's link: the very first prompt, whichever worker takes it, is answered.
    const first = await prompt("w-1");
    expect(first.status).toBe(200);
    expect(first.text).toContain("w-1\\n");
    for (const word of ["w-2", "w-3", "w-4"]) expect((await prompt(word)).text).toContain(`${word}\\n`);
    const fifth = await prompt("w-5");
    expect(fifth.status).toBe(429);

    // Manual mode: the run pauses on a question and the answer, sent on a connection of its own (so to
    // either worker), resumes it; twice, so both workers take part whatever the round-robin's phase.
    const chunksOf = (text: string) =>
      text
        .split("\n")
        .filter((l) => l.startsWith("data: {"))
        .map((l) => JSON.parse(l.slice(6)));
    const mkAuth = { authorization: `Bearer ${boot.management_key}`, "content-type": "application/json" };
    for (const word of ["paused-a", "paused-b"]) {
      const asked = await request(`${api}/interns/${boot.intern_id}/chat/completions`, {
        method: "POST",
        headers: mkAuth,
        body: JSON.stringify(chatBody(`$ echo ${word}`, { approval_mode: "manual" })),
      });
      expect(asked.status).toBe(200);
      const chunks = chunksOf(asked.text);
      const call = toolCallOf(chunks);
      expect(call.function.name).toBe("service.provide_input");
      const answered = await request(`${api}/interns/${boot.intern_id}/chat/completions`, {
        method: "POST",
        headers: mkAuth,
        body: JSON.stringify(answerBody(finalOf(chunks).session_id, call.id, "allow_once")),
      });
      expect(answered.status).toBe(200);
      expect(contentOf(chunksOf(answered.text))).toContain(`${word}\n`);
    }

    // A paused run nobody answers is cancelled at its deadline, once, by whichever worker's timer or sweep
    // gets there; a late answer through either worker is refused and the session takes a new turn.
    // (A key of its own: the management key spent its turn budget above.)
    const deadlineKey = JSON.parse(
      (await request(`${api}/keys`, { method: "POST", headers: mkAuth, body: JSON.stringify({ name: "deadline" }) })).text,
    ).key as string;
    const dlAuth = { authorization: `Bearer ${deadlineKey}`, "content-type": "application/json" };
    const asked = await request(`${api}/interns/${boot.intern_id}/chat/completions`, {
      method: "POST",
      headers: dlAuth,
      body: JSON.stringify(chatBody("$ echo unanswered", { approval_mode: "manual" })),
    });
    const askedChunks = chunksOf(asked.text);
    const question = toolCallOf(askedChunks);
    const sessionId = finalOf(askedChunks).session_id as string;
    const db = new Database(join(dataDir, "portico.db"), { readonly: true, fileMustExist: true });
    try {
      const runOf = () => db.prepare(`SELECT r.state, r.endReason FROM "InternRun" r JOIN "InternSession" s ON r.sessionId = s.id WHERE s.sessionKey = ? ORDER BY r.createdAt DESC LIMIT 1`).get(sessionId) as { state: string; endReason: string | null };
      expect(runOf().state).toBe("paused");
      await waitFor("the paused run's deadline", () => runOf().state !== "paused", { timeoutMs: 30_000, intervalMs: 50 });
      expect(runOf()).toEqual({ state: "cancelled", endReason: "deadline" });
      expect((db.prepare(`SELECT count(*) AS n FROM "InternRun" r JOIN "InternSession" s ON r.sessionId = s.id WHERE s.sessionKey = ?`).get(sessionId) as { n: number }).n).toBe(1);
    } finally {
      db.close();
    }
    for (let i = 0; i < 2; i++) {
      const late = await request(`${api}/interns/${boot.intern_id}/chat/completions`, {
        method: "POST",
        headers: dlAuth,
        body: JSON.stringify(answerBody(sessionId, question.id, "allow_once")),
      });
      expect(late.status).toBe(409);
      expect(JSON.parse(late.text).error.metadata.reason).toBe("interaction_not_pending");
    }
    const again = await request(`${api}/interns/${boot.intern_id}/chat/completions`, {
      method: "POST",
      headers: dlAuth,
      body: JSON.stringify(chatBody("$ echo next-turn", { session_id: sessionId })),
    });
    expect(again.status).toBe(200);
    expect(contentOf(chunksOf(again.text))).toContain("next-turn\n");

    // Acknowledged writes survive a worker's death.
    const mk = { authorization: `Bearer ${boot.management_key}`, "content-type": "application/json" };
    const body = JSON.stringify({ model: "openai/gpt-4o", messages: [{ role: "system", content: "keep me" }, { role: "user", content: "x" }] });
    for (let i = 0; i < 6; i++) expect((await request(`${api}/presets/kept-${i}/chat/completions`, { method: "POST", headers: mk, body })).status).toBe(200);

    const workers = childPids(child.pid!);
    expect(workers).toHaveLength(2);
    const out = started.output().length;
    process.kill(workers[1]!, "SIGKILL");
    // The primary notices and starts a replacement, which reports ready.
    await waitFor("a replacement worker ready", () => /worker exited; starting a replacement[\s\S]*worker ready/.test(started.output().slice(out)), {
      timeoutMs: 30_000,
      intervalMs: 50,
    });
    const after = childPids(child.pid!);
    expect(after).toHaveLength(2);
    expect(after).not.toContain(workers[1]);
    for (let i = 0; i < 6; i++) {
      const res = await request(`${api}/presets/kept-${i}`, { headers: mk });
      expect(res.status).toBe(200);
    }

    // A key revoked through one worker is refused by both at once (every request after the DELETE answers 401).
    expect((await request(`${api}/key`, { headers: mk })).status).toBe(200);
    const other = JSON.parse((await request(`${api}/keys`, { method: "POST", headers: mk, body: JSON.stringify({ name: "short-lived" }) })).text).key as string;
    for (let i = 0; i < 4; i++) expect((await request(`${api}/key`, { headers: { authorization: `Bearer ${other}` } })).status).toBe(200);
    expect((await request(`${api}/keys/${hashSecret(other)}`, { method: "DELETE", headers: mk })).status).toBe(200);
    for (let i = 0; i < 4; i++) expect((await request(`${api}/key`, { headers: { authorization: `Bearer ${other}` } })).status).toBe(401);
  }, 240_000);

  it("answers /metrics with the sum over both workers, whichever takes the scrape", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "portico-workers-metrics-"));
    dirs.push(dataDir);
    const env = { PORT: "0", PORTICO_GRPC_PORT: "0", PORTICO_DATA_DIR: dataDir, PORTICO_LOG_LEVEL: "info", PORTICO_WORKERS: "2", PORTICO_EMBEDDED_HOST: "false" };
    const started = await startPortico(["serve"], env, (out) =>
      out.includes("serving with worker processes") ? /"url":"(http:\/\/127\.0\.0\.1:\d+)\/api\/v1","msg":"gateway listening/.exec(out)?.[1] : undefined,
    );
    const serve = started.child;
    try {
      const root = started.value;
      // 20 probes, each on a connection of its own: the cluster hands them to both workers.
      const served = new Map<string, number>();
      for (let i = 0; i < 20; i++) {
        const res = await request(`${root}/readyz`);
        expect(res.status).toBe(200);
        const instance = JSON.parse(res.text).instance_id as string;
        served.set(instance, (served.get(instance) ?? 0) + 1);
      }
      expect(served.size).toBe(2);
      const countOf = (text: string) => Number(/^portico_gateway_http_request_duration_seconds_count\{method="GET",route="\/readyz",status="200"\} (\d+)$/m.exec(text)?.[1]);
      // Each worker answers some of these scrapes; every one of them counts all 20 probes.
      for (let i = 0; i < 6; i++) {
        const scrape = await request(`${root}/metrics`);
        expect(scrape.status).toBe(200);
        expect(countOf(scrape.text)).toBe(20);
        expect(scrape.text).toMatch(/^process_cpu_seconds_total \d/m);
      }
    } finally {
      const gone = new Promise((r) => serve.once("exit", r));
      serve.kill("SIGTERM");
      await gone;
    }
  }, 120_000);
});
