/**
 * Chaos: `portico serve` (two workers, PostgreSQL, Redis) under a mixed load of chat completions (a fake
 * provider), preset and BYOK writes and intern turns (the built-in agent), while its PostgreSQL is restarted
 * and then its Redis is stopped. What was acknowledged is never lost and no intern run is left stuck:
 *
 * - every chat answer with status 200 has its generation record (GET /generation) once the load is over;
 * - every preset version and BYOK credential whose write answered 200 is readable;
 * - every intern session ends up not `streaming`, and takes a new turn (a turn made to end while PostgreSQL
 *   is away included: its end write is retried until the database is back).
 *
 * The PostgreSQL cluster and the redis-server are the test's own (test/helpers/private-services.ts); the
 * shared ones on 5432/6379 are never touched. Every phase waits for events (counts of answers), never for
 * a fixed time.
 */
import type { ChildProcess } from "node:child_process";
import http from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runPortico, startPortico } from "../../helpers/cli.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { startPrivatePostgres, startPrivateRedis, type PrivatePostgres, type PrivateRedis } from "../../helpers/private-services.js";
import { waitFor } from "../../helpers/wait.js";

interface Answer {
  status: number;
  text: string;
}

/** One request on a connection of its own (so the cluster spreads them over both workers); status 0 = no answer. */
function request(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string; onData?: (textSoFar: string) => void } = {},
): Promise<Answer> {
  return new Promise((resolve) => {
    const req = http.request(url, { method: init.method ?? "GET", headers: init.headers, agent: false, timeout: 30_000 }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => {
        text += d;
        init.onData?.(text);
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      res.on("error", (err) => resolve({ status: 0, text: `${text}\n<response error: ${err.message}>` }));
    });
    req.on("timeout", () => req.destroy(new Error("no answer in 30 s")));
    req.on("error", (err) => resolve({ status: 0, text: `<request error: ${err.message}>` }));
    req.end(init.body);
  });
}

const chunksOf = (text: string) =>
  text
    .split("\n")
    .filter((l) => l.startsWith("data: {"))
    .map((l) => JSON.parse(l.slice(6)));

/** What the load saw, per kind of request. */
class Tally {
  readonly ok: Record<string, number> = {};
  readonly statuses: Record<string, Record<string, number>> = {};
  /** The first answer of each kind and status other than 200, for the report. */
  readonly samples: Record<string, string> = {};
  count(kind: string, status: number, text = ""): void {
    if (status === 200) this.ok[kind] = (this.ok[kind] ?? 0) + 1;
    else this.samples[`${kind} ${status}`] ??= text.slice(0, 300);
    const s = (this.statuses[kind] ??= {});
    s[status] = (s[status] ?? 0) + 1;
  }
  okOf(kind: string): number {
    return this.ok[kind] ?? 0;
  }
}

describe("chaos: PostgreSQL restarted and Redis stopped under mixed load", () => {
  const dirs: string[] = [];
  let pg: PrivatePostgres | undefined;
  let redis: PrivateRedis | undefined;
  let fake: FakeUpstream | undefined;
  let serve: ChildProcess | undefined;
  // What the load test leaves for the intern check: the API, the bootstrap, every session it established
  // (session id → its last prompt).
  let api: string | undefined;
  let boot: { management_key: string; intern_id: string } | undefined;
  const sessions = new Map<string, string>();
  const auth = () => ({ authorization: `Bearer ${boot!.management_key}`, "content-type": "application/json" });
  const post = (path: string, body: unknown, onData?: (textSoFar: string) => void) =>
    request(`${api}${path}`, { method: "POST", headers: auth(), body: JSON.stringify(body), onData });
  const get = (path: string) => request(`${api}${path}`, { headers: auth() });
  afterAll(async () => {
    if (serve && serve.exitCode === null && serve.signalCode === null) {
      const gone = new Promise((r) => serve!.once("exit", r));
      serve.kill("SIGTERM");
      await gone;
    }
    await fake?.close();
    await redis?.dispose();
    await pg?.dispose();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  it("loses nothing acknowledged: generation records, preset versions, BYOK credentials", async () => {
    [pg, redis, fake] = await Promise.all([
      startPrivatePostgres(),
      startPrivateRedis(),
      startFakeOpenAI({ text: ["chaos ", "answer"], finish: "stop", usage: { input: 3, output: 2 } }),
    ]);
    const dataDir = mkdtempSync(join(tmpdir(), "portico-chaos-"));
    dirs.push(dataDir);
    const env = {
      DATABASE_URL: pg.url,
      REDIS_URL: redis.url,
      PORTICO_DATA_DIR: dataDir,
      PORT: "0",
      PORTICO_GRPC_PORT: "0",
      PORTICO_WORKERS: "2",
      PORTICO_LOG_LEVEL: "info",
      PORTICO_INTERN_RATE_LIMIT: "100000",
      PORTICO_SHUTDOWN_TIMEOUT_MS: "2000",
      PORTICO_PROVIDER_OPENAI_BASE_URL: `${fake.url}/v1`,
    };
    boot = JSON.parse((await runPortico(["admin", "bootstrap", "--json"], env, 120_000)).stdout);
    const started = await startPortico(["serve"], env, (out) =>
      out.includes("serving with worker processes") ? /"url":"(http:\/\/127\.0\.0\.1:\d+\/api\/v1)","msg":"gateway listening/.exec(out)?.[1] : undefined,
    );
    serve = started.child;
    api = started.value;
    const internChat = `/interns/${boot!.intern_id}/chat/completions`;
    expect((await post("/byok", { provider: "openai", key: "sk-chaos-openai" })).status).toBe(200);

    // ---- the load: loops that run until `stopping`, recording what was acknowledged ----
    const tally = new Tally();
    let stopping = false;
    const generations: string[] = [];
    const presetVersions: Array<{ slug: string; version: number }> = [];
    const credentials: string[] = [];
    const current = new Map<number, string>(); // intern loop → the session it prompts

    const chatLoop = async (n: number) => {
      for (let i = 0; !stopping; i++) {
        const stream = (n + i) % 2 === 0;
        const res = await post("/chat/completions", { model: "openai/gpt-4o-mini", stream, messages: [{ role: "user", content: `c${n}-${i}` }] });
        tally.count("chat", res.status, res.text);
        if (res.status !== 200) continue;
        const id = stream ? chunksOf(res.text)[0]?.id : JSON.parse(res.text).id;
        generations.push(typeof id === "string" ? id : `<no id in ${res.text.slice(0, 200)}>`);
      }
    };
    const presetLoop = async () => {
      for (let i = 0; !stopping; i++) {
        const slug = `chaos-${i % 5}`;
        const res = await post(`/presets/${slug}/chat/completions`, {
          model: "openai/gpt-4o-mini",
          messages: [{ role: "system", content: `version ${i}` }, { role: "user", content: "x" }],
        });
        tally.count("preset", res.status, res.text);
        if (res.status === 200) presetVersions.push({ slug, version: JSON.parse(res.text).data.designated_version.version });
      }
    };
    const byokLoop = async () => {
      for (let i = 0; !stopping; i++) {
        const res = await post("/byok", { provider: "groq", key: `gsk-chaos-${i}`, name: `chaos ${i}` });
        tally.count("byok", res.status, res.text);
        if (res.status === 200) credentials.push(JSON.parse(res.text).data.id);
      }
    };
    const internLoop = async (n: number) => {
      for (let i = 0; !stopping; i++) {
        const word = `i${n}-${i}`;
        const session = current.get(n);
        const res = await post(internChat, {
          stream: true,
          messages: [{ role: "user", content: `$ echo ${word}` }],
          ...(session ? { session_id: session } : {}),
        });
        tally.count("intern", res.status, res.text);
        // A session still held by a run: as a client would, go on in a new one (the final check waits for
        // the held one to be released).
        if (res.status === 409 && session) current.delete(n);
        if (res.status !== 200) continue;
        const sid = chunksOf(res.text).at(-1)?.session_id;
        if (typeof sid === "string") {
          current.set(n, sid);
          sessions.set(sid, word);
        }
        if (res.text.includes(`${word}\\n`)) tally.count("intern-echo", 200);
      }
    };
    const loops = Promise.all([
      ...[0, 1, 2, 3].map(chatLoop),
      presetLoop(),
      byokLoop(),
      ...[0, 1].map(internLoop),
    ]);

    /** Waits until every kind has `more` further acknowledged answers than now. */
    const progress = async (what: string, more: Record<string, number>, timeoutMs = 45_000) => {
      const from = Object.fromEntries(Object.keys(more).map((k) => [k, tally.okOf(k)]));
      await waitFor(
        () => `${what}: ${JSON.stringify(more)} more answers (so far ${JSON.stringify(tally.statuses)}; samples ${JSON.stringify(tally.samples)})`,
        () => Object.entries(more).every(([k, m]) => tally.okOf(k) - from[k]! >= m),
        { timeoutMs, intervalMs: 50 },
      );
    };

    try {
      await progress("warm-up", { chat: 20, preset: 3, byok: 3, "intern-echo": 2 });

      // A run that is streaming when PostgreSQL goes away and ends while it is away: its end cannot be
      // written at once (the case of a run left `streaming` for ever).
      const first = await post(internChat, { stream: true, messages: [{ role: "user", content: "$ echo long-0" }] });
      expect(first.status, first.text).toBe(200);
      const longSession = chunksOf(first.text).at(-1)!.session_id as string;
      sessions.set(longSession, "long-0");
      let streaming!: () => void;
      const longStarted = new Promise<void>((r) => (streaming = r));
      const long = post(
        internChat,
        { stream: true, session_id: longSession, messages: [{ role: "user", content: "$ sleep 4; echo long-1" }] },
        (text) => text.includes("sleep 4") && streaming(),
      );
      await Promise.race([longStarted, long]);

      // PostgreSQL restarted: a clean stop ends every session, requests meanwhile see no database.
      await pg.stop("fast");
      const answered = () => Object.values(tally.statuses.chat ?? {}).reduce((a, b) => a + b, 0);
      const atStop = answered();
      const longEnd = await long;
      await waitFor("chat answers while PostgreSQL is down", () => answered() - atStop >= 8, { timeoutMs: 30_000 });
      await pg.start();
      tally.count("long-turn", longEnd.status, longEnd.text);
      await progress("after the PostgreSQL restart", { chat: 20, preset: 3, byok: 3, "intern-echo": 2 });

      // Redis stopped: everything goes on without it (per-process limits, the primary knows the link).
      await redis.stop();
      await progress("with Redis stopped", { chat: 20, preset: 2, byok: 2, "intern-echo": 2 });
      await redis.start();
      await progress("after Redis is back", { chat: 10, "intern-echo": 2 });
    } finally {
      stopping = true;
      await loops;
    }

    // A request refused because the database is away is a retryable 503, never a 500.
    const unexpected = started
      .output()
      .split("\n")
      .filter((l) => l.includes("unexpected error"))
      .slice(0, 2)
      .map((l) => l.slice(0, 1500));
    for (const kind of ["chat", "preset", "byok"]) {
      expect(tally.statuses[kind]?.[500], `${kind}: ${JSON.stringify(tally.statuses[kind])} ${tally.samples[`${kind} 500`] ?? ""}\n${unexpected.join("\n")}`).toBeUndefined();
    }

    // ---- nothing acknowledged is lost ----
    expect(generations.length).toBeGreaterThan(60);
    const missing = new Set(generations);
    await waitFor(
      () => `a generation record for every 200 chat answer (${missing.size} of ${generations.length} missing: ${[...missing].slice(0, 3).join(", ")})`,
      async () => {
        for (const id of [...missing]) if ((await get(`/generation?id=${encodeURIComponent(id)}`)).status === 200) missing.delete(id);
        return missing.size === 0;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    for (const { slug, version } of presetVersions) {
      const res = await get(`/presets/${slug}/versions/${version}`);
      expect(res.status, `preset ${slug} version ${version}: ${res.text}`).toBe(200);
    }
    for (const id of credentials) {
      const res = await get(`/byok/${id}`);
      expect(res.status, `BYOK credential ${id}: ${res.text}`).toBe(200);
    }

    // What the load saw (statuses per kind, one sample of each refusal), for whoever reads the CI log.
    console.log(`chaos load: ${JSON.stringify(tally.statuses)}\n${JSON.stringify(tally.samples, null, 1)}`);
  }, 115_000);

  // Issue 26: a run that ends while PostgreSQL is away has its end written once the database is back (the
  // write is retried), and a run no live process relays is ended by any core's sweep.
  it("leaves no intern run stuck: every session leaves streaming and takes a new turn", async () => {
    expect(api, "the load above did not run").toBeDefined();
    expect(sessions.size).toBeGreaterThan(2);
    const internChat = `/interns/${boot!.intern_id}/chat/completions`;
    // All sessions at once, under one deadline: each leaves `streaming` (the run's end is written, or the
    // run no process owns is reconciled) and then takes a new turn.
    await Promise.all(
      [...sessions].map(async ([sid, lastWord]) => {
        const path = `/interns/${boot!.intern_id}/sessions/${encodeURIComponent(sid)}`;
        const state = await waitFor(
          `session ${sid} (last prompt ${lastWord}) to leave streaming`,
          async () => {
            const res = await get(path);
            const s = res.status === 200 ? JSON.parse(res.text).state : undefined;
            return s !== undefined && s !== "streaming" ? s : undefined;
          },
          { timeoutMs: 20_000, intervalMs: 200 },
        );
        expect(state).toBe("idle");
        const word = `after-${lastWord}`;
        const res = await post(internChat, { stream: true, session_id: sid, messages: [{ role: "user", content: `$ echo ${word}` }] });
        expect(res.status, res.text).toBe(200);
        expect(res.text).toContain(`${word}\\n`);
      }),
    );
  }, 60_000);
});
