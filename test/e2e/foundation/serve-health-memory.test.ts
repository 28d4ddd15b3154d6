/**
 * `portico serve` with two worker processes and no Redis: the health memory is shared between the workers through
 * their primary. A provider refuses one request with 429 and `Retry-After: 30`, then is healthy again; requests
 * on fresh connections (spread over both workers) soon are all refused with 429 from the cool-down, without
 * calling the provider: the worker that never saw the 429 learnt it. Without the sharing, that worker would keep
 * being served by the healthy provider and four refusals in a row could not happen.
 */
import http from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChildProcess } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { requestOnNewConnection as request, runPortico, startPortico } from "../../helpers/cli.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";

describe("portico serve: the health memory across workers (no Redis)", () => {
  const dirs: string[] = [];
  let fake: FakeUpstream | undefined;
  let child: ChildProcess | undefined;
  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child!.once("exit", r));
      child.kill("SIGTERM");
      await gone;
    }
    await fake?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  it("a provider's wait learnt by one worker is honoured by the other", async () => {
    fake = await startFakeOpenAI({ text: ["fine"], finish: "stop", usage: { input: 1, output: 1 } });
    const dataDir = mkdtempSync(join(tmpdir(), "portico-health-"));
    dirs.push(dataDir);
    const env = {
      PORT: "0",
      PORTICO_GRPC_PORT: "0",
      PORTICO_DATA_DIR: dataDir,
      PORTICO_LOG_LEVEL: "info",
      PORTICO_WORKERS: "2",
      PORTICO_EMBEDDED_HOST: "false",
      PORTICO_PROVIDER_MISTRAL_BASE_URL: `${fake.url}/v1`,
    };
    const boot = JSON.parse((await runPortico(["admin", "bootstrap", "--json"], env, 120_000)).stdout);
    const started = await startPortico(["serve"], env, (out) =>
      out.includes("serving with worker processes") ? /"url":"(http:\/\/127\.0\.0\.1:\d+\/api\/v1)","msg":"gateway listening/.exec(out)?.[1] : undefined,
    );
    child = started.child;
    const api = started.value;
    const mk = { authorization: `Bearer ${boot.management_key}`, "content-type": "application/json" };
    expect((await request(`${api}/byok`, { method: "POST", headers: mk, body: JSON.stringify({ provider: "mistral", key: "ms-key" }) })).status).toBe(200);
    const auth = { authorization: `Bearer ${boot.api_key}`, "content-type": "application/json" };
    // A fresh connection each (so the workers alternate), with the answer's Retry-After.
    const ask = () =>
      new Promise<{ status: number; retryAfter: number }>((resolve, reject) => {
        const req = http.request(`${api}/chat/completions`, { method: "POST", headers: auth, agent: false }, (res) => {
          res.resume();
          res.on("end", () => resolve({ status: res.statusCode ?? 0, retryAfter: Number(res.headers["retry-after"] ?? 0) }));
        });
        req.on("error", reject);
        req.end(JSON.stringify({ model: "mistral/m", messages: [{ role: "user", content: "hi" }] }));
      });

    fake.knobs = { failStatus: 429, failMessage: "slow down", failHeaders: { "retry-after": "30" } };
    expect((await ask()).status).toBe(429);
    expect(fake.requests).toHaveLength(1);
    fake.knobs = {}; // healthy again

    // Fresh connections alternate between the workers: wait until four in a row are refused from the cool-down.
    let inARow = 0;
    let served = 0;
    await expect
      .poll(
        async () => {
          const res = await ask();
          if (res.status === 200) served++;
          inARow = res.status === 429 && res.retryAfter > 20 ? inARow + 1 : 0;
          return inARow;
        },
        { timeout: 30_000, interval: 20 },
      )
      .toBeGreaterThanOrEqual(4);
    expect(fake.requests).toHaveLength(1 + served);
  }, 180_000);
});
