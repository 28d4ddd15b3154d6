/**
 * `portico serve` with two worker processes and REDIS_URL (issue 26): while Redis is down, every intern
 * turn is still served. The embedded host's link is held by one worker; a prompt the other worker takes
 * used to fail with 502 intern_unreachable (its Redis lookup failed) although the serve's primary knows
 * the holder. Now the worker asks the primary when Redis fails and forwards the call.
 * Uses a private redis-server on a free port, stopped by the test (the shared one on 6379 is never touched).
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { requestOnNewConnection as request, runPortico, startPortico } from "../../helpers/cli.js";
import { startPrivateRedis, type PrivateRedis } from "../../helpers/private-services.js";
import { waitFor } from "../../helpers/wait.js";

describe("portico serve with worker processes and REDIS_URL, Redis down", () => {
  const dirs: string[] = [];
  let child: ChildProcess | undefined;
  let redis: PrivateRedis | undefined;
  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child!.once("exit", r));
      child.kill("SIGTERM");
      await gone;
    }
    await redis?.dispose();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  it("serves every intern turn through either worker while Redis is unreachable", async () => {
    redis = await startPrivateRedis();
    const dataDir = mkdtempSync(join(tmpdir(), "portico-workers-redis-"));
    dirs.push(dataDir);
    const env = {
      PORT: "0",
      PORTICO_GRPC_PORT: "0",
      PORTICO_DATA_DIR: dataDir,
      PORTICO_LOG_LEVEL: "info",
      PORTICO_WORKERS: "2",
      REDIS_URL: redis.url,
      PORTICO_REDIS_PREFIX: `test-${randomBytes(6).toString("hex")}:`,
      PORTICO_INTERN_RATE_LIMIT: "10000",
    };
    const boot = JSON.parse((await runPortico(["admin", "bootstrap", "--json"], env, 120_000)).stdout);
    const started = await startPortico(["serve"], env, (out) =>
      out.includes("serving with worker processes") ? /"url":"(http:\/\/127\.0\.0\.1:\d+\/api\/v1)","msg":"gateway listening/.exec(out)?.[1] : undefined,
    );
    child = started.child;
    const api = started.value;
    const root = api.replace(/\/api\/v1$/, "");
    const auth = { authorization: `Bearer ${boot.api_key}`, "content-type": "application/json" };
    const prompt = (word: string) =>
      request(`${api}/interns/${boot.intern_id}/chat/completions`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ stream: true, messages: [{ role: "user", content: `$ echo ${word}` }] }),
      });

    // Redis up: both workers serve prompts (the one without the link forwards them).
    for (const word of ["up-1", "up-2", "up-3", "up-4"]) {
      const r = await prompt(word);
      expect(r.status, r.text).toBe(200);
      expect(r.text).toContain(`${word}\\n`);
    }

    await redis.stop();
    // Both workers have noticed once /readyz answers 503 (naming redis) several times in a row: each
    // request is a connection of its own, and the cluster alternates them between the workers.
    let inARow = 0;
    await waitFor(
      () => `/readyz to answer 503 four times in a row (${inARow} so far)`,
      async () => {
        inARow = (await request(`${root}/readyz`)).status === 503 ? inARow + 1 : 0;
        return inARow >= 4;
      },
      { timeoutMs: 30_000 },
    );

    // Every turn is served, whichever worker takes the connection.
    const results = [];
    for (let i = 0; i < 10; i++) {
      const word = `down-${i}`;
      const r = await prompt(word);
      results.push({ word, status: r.status, served: r.text.includes(`${word}\\n`), text: r.status === 200 ? "" : r.text });
    }
    expect(results.filter((r) => r.status !== 200 || !r.served)).toEqual([]);
  }, 240_000);
});
