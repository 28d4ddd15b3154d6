/**
 * Upstream time limits per provider (docs/operations.md, "Upstream time limits per provider"): the operator's
 * PORTICO_PROVIDER_<SLUG>_IDLE_TIMEOUT_MS / _FIRST_BYTE_TIMEOUT_MS / _CONNECT_TIMEOUT_MS. Fake providers that
 * pause: before anything reached the caller the next candidate serves (the caller never sees the stall); after
 * the first chunk the stream ends with an error chunk. Requests through the `openai` client.
 */
import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../../helpers/wait.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";

/**
 * A TCP address that accepts no connection: a listener in a stopped process (SIGSTOP) whose accept queue is full.
 * The kernel completes handshakes for the queue only (backlog + 1 on Linux); once it is full a new connection's SYN is
 * dropped, so its `connect` never comes. The queue is filled with connections opened one by one until one does not
 * complete (at most a few). Deterministic and local: no non-routable address, no firewall rule.
 */
async function startUnacceptingAddress(): Promise<{ url: string; close(): Promise<void> }> {
  const child: ChildProcess = spawn(
    process.execPath,
    ["-e", "require('node:net').createServer().listen({ port: 0, host: '127.0.0.1', backlog: 1 }, function () { console.log(this.address().port) })"],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const port = await new Promise<number>((resolve, reject) => {
    child.once("error", reject);
    child.stdout!.once("data", (d: Buffer) => resolve(Number(String(d).trim())));
  });
  child.kill("SIGSTOP");
  const fillers: net.Socket[] = [];
  for (let i = 0; ; i++) {
    if (i === 16) throw new Error("the stopped listener kept accepting connections");
    const s = net.connect(port, "127.0.0.1");
    s.on("error", () => undefined);
    fillers.push(s);
    // A queued connection completes at once on loopback; the first that does not within a second is refused a place.
    const connected = await new Promise<boolean>((resolve) => {
      const t = setTimeout(() => resolve(false), 1_000);
      s.once("connect", () => (clearTimeout(t), resolve(true)));
    });
    if (!connected) break;
  }
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      for (const s of fillers) s.destroy();
      const gone = new Promise((r) => child.once("exit", r));
      child.kill("SIGKILL");
      await gone;
    },
  };
}

describe("upstream time limits per provider", () => {
  let h: Harness;
  let stallFirst: FakeUpstream;
  let stallMid: FakeUpstream;
  let slowHeaders: FakeUpstream;
  let ok: FakeUpstream;
  let unaccepting: Awaited<ReturnType<typeof startUnacceptingAddress>>;
  let client: OpenAI;
  const script = { text: ["one ", "two ", "three"], finish: "stop", usage: { input: 1, output: 3 } };

  beforeAll(async () => {
    stallFirst = await startFakeOpenAI(script, { stallAfterChunks: 0 });
    stallMid = await startFakeOpenAI(script, { stallAfterChunks: 2 });
    slowHeaders = await startFakeOpenAI(script, { headerDelayMs: 20_000 });
    ok = await startFakeOpenAI({ ...script, text: ["fine"] });
    unaccepting = await startUnacceptingAddress();
    h = await startHarness({
      provider: "sqlite",
      env: {
        PORTICO_PROVIDER_GROQ_BASE_URL: `${stallFirst.url}/v1`,
        PORTICO_PROVIDER_MISTRAL_BASE_URL: `${stallMid.url}/v1`,
        PORTICO_PROVIDER_XAI_BASE_URL: `${slowHeaders.url}/v1`,
        PORTICO_PROVIDER_TOGETHER_BASE_URL: `${ok.url}/v1`,
        PORTICO_PROVIDER_GROQ_IDLE_TIMEOUT_MS: "300",
        PORTICO_PROVIDER_MISTRAL_IDLE_TIMEOUT_MS: "300",
        PORTICO_PROVIDER_XAI_FIRST_BYTE_TIMEOUT_MS: "300",
        // Accepts no connection; only its connect limit is short (the first-byte and answer limits stay long).
        PORTICO_PROVIDER_FIREWORKS_BASE_URL: `${unaccepting.url}/v1`,
        PORTICO_PROVIDER_FIREWORKS_CONNECT_TIMEOUT_MS: "300",
        PORTICO_PROVIDER_FIREWORKS_FIRST_BYTE_TIMEOUT_MS: "60000",
        PORTICO_UPSTREAM_ANSWER_TIMEOUT_MS: "60000",
      },
    });
    for (const provider of ["groq", "mistral", "xai", "together", "fireworks"]) {
      expect((await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider, key: `${provider}-key` } })).status).toBe(200);
    }
    client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await h?.close();
    for (const f of [stallFirst, stallMid, slowHeaders, ok]) await f?.close();
    await unaccepting?.close();
  });

  const text = async (model: string, models: string[]) => {
    const stream = await client.chat.completions.create({ model, models, stream: true, messages: [{ role: "user", content: "hi" }] } as never);
    let out = "";
    for await (const chunk of stream as unknown as AsyncIterable<{ choices: Array<{ delta?: { content?: string } }> }>) out += chunk.choices[0]?.delta?.content ?? "";
    return out;
  };

  it("a stream that stalls before its first chunk is abandoned after the provider's idle limit; the next candidate serves", async () => {
    expect(await text("groq/m", ["groq/m", "together/m"])).toBe("fine");
    await stallFirst.clientAborted(1);
  });

  it("a provider whose response does not begin within its own first-byte limit is abandoned for the next", async () => {
    expect(await text("xai/m", ["xai/m", "together/m"])).toBe("fine");
    await slowHeaders.clientAborted(1);
  });

  it("a stream that stalls after its first chunk ends with an error, never switching provider", async () => {
    const before = ok.requests.length;
    const err = await text("mistral/m", ["mistral/m", "together/m"]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(String((err as Error).message)).toMatch(/upstream|stream/i);
    expect(ok.requests.length).toBe(before);
  });

  it("a provider that accepts no connection within its connect limit is abandoned as a timeout; the next candidate serves", async () => {
    const before = ok.requests.length;
    const res = (await client.chat.completions.create({ model: "fireworks/m", models: ["fireworks/m", "together/m"], messages: [{ role: "user", content: "hi" }] } as never)) as unknown as {
      id: string;
      provider: string;
      choices: Array<{ message: { content: string } }>;
    };
    expect(res.choices[0]!.message.content).toBe("fine");
    expect(res.provider).toBe("together");
    expect(ok.requests.length).toBe(before + 1);
    const log = await waitFor(`generation ${res.id}`, async () => {
      const g = await api(h, "GET", `/generation?id=${res.id}`, { key: h.tenant.apiKey });
      return g.status === 200 ? (g.json.data.attempts_log as Array<{ provider: string; status: number | null; reason: string; duration_ms: number }>) : undefined;
    });
    expect(log.map((e) => [e.provider, e.reason, e.status])).toEqual([
      ["fireworks", "timeout", null],
      ["together", "served", 200],
    ]);
    // Its connect limit (300 ms) ended it, not the first-byte or answer limits (60 s).
    expect(log[0]!.duration_ms).toBeGreaterThanOrEqual(290);
    expect(log[0]!.duration_ms).toBeLessThan(10_000);
  });
});
