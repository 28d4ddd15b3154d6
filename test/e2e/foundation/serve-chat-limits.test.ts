/**
 * `portico serve` with two worker processes and no Redis: the per-key bound on chat completions in flight
 * (PORTICO_CHAT_MAX_CONCURRENT_PER_KEY) is one bound for the whole serve, counted by the primary. With the bound
 * at 1 and one stream held open through one worker, requests of the same key on fresh connections (so spread over
 * both workers) are all refused with 429; once the held stream's client leaves, the key is served again.
 */
import http from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChildProcess } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { requestOnNewConnection as request, runPortico, startPortico } from "../../helpers/cli.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import { defaultScript, type FakeUpstream } from "../../helpers/fake-upstreams/server.js";

describe("portico serve: chat concurrency per key across workers (no Redis)", () => {
  const dirs: string[] = [];
  const fakes: FakeUpstream[] = [];
  let child: ChildProcess | undefined;
  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child!.once("exit", r));
      child.kill("SIGTERM");
      await gone;
    }
    await Promise.all(fakes.map((f) => f.close()));
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  it("one bound for both workers; the slot comes back when the client leaves", async () => {
    const ok = await startFakeOpenAI();
    const held = await startFakeOpenAI(defaultScript(), { headerDelayMs: 600_000 });
    fakes.push(ok, held);
    const dataDir = mkdtempSync(join(tmpdir(), "portico-chat-limits-"));
    dirs.push(dataDir);
    const env = {
      PORT: "0",
      PORTICO_GRPC_PORT: "0",
      PORTICO_DATA_DIR: dataDir,
      PORTICO_LOG_LEVEL: "info",
      PORTICO_WORKERS: "2",
      PORTICO_EMBEDDED_HOST: "false",
      PORTICO_CHAT_MAX_CONCURRENT_PER_KEY: "1",
      PORTICO_PROVIDER_GROQ_BASE_URL: `${ok.url}/v1`,
      PORTICO_PROVIDER_TOGETHER_BASE_URL: `${held.url}/v1`,
    };
    const boot = JSON.parse((await runPortico(["admin", "bootstrap", "--json"], env, 120_000)).stdout);
    const started = await startPortico(["serve"], env, (out) =>
      out.includes("serving with worker processes") ? /"url":"(http:\/\/127\.0\.0\.1:\d+\/api\/v1)","msg":"gateway listening/.exec(out)?.[1] : undefined,
    );
    child = started.child;
    const api = started.value;
    const mk = { authorization: `Bearer ${boot.management_key}`, "content-type": "application/json" };
    for (const [provider, key] of [["groq", "gsk-ok"], ["together", "tg-held"]]) {
      expect((await request(`${api}/byok`, { method: "POST", headers: mk, body: JSON.stringify({ provider, key }) })).status).toBe(200);
    }
    const auth = { authorization: `Bearer ${boot.api_key}`, "content-type": "application/json" };
    const ask = (model: string) =>
      request(`${api}/chat/completions`, { method: "POST", headers: auth, body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }) });

    // Hold the key's one slot with a request the provider never answers.
    const holder = http.request(`${api}/chat/completions`, { method: "POST", headers: auth, agent: false });
    holder.on("error", () => {});
    holder.end(JSON.stringify({ model: "together/m", stream: true, messages: [{ role: "user", content: "hi" }] }));
    await expect.poll(() => held.requests.length, { timeout: 20_000, interval: 20 }).toBe(1);

    // Fresh connections alternate between the workers: every one is refused.
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await ask("groq/llama")).status);
    expect(statuses).toEqual([429, 429, 429, 429, 429, 429]);
    expect(ok.requests.length).toBe(0);

    // The holder leaves: its slot is given back at the primary, whichever worker serves next.
    holder.destroy();
    await held.clientAborted(1);
    await expect.poll(async () => (await ask("groq/llama")).status, { timeout: 20_000, interval: 20 }).toBe(200);
    for (let i = 0; i < 4; i++) expect((await ask("groq/llama")).status).toBe(200);
  }, 180_000);
});
