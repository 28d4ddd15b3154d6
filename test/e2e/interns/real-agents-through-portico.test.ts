/**
 * The proof of interns whose model calls go through Portico: each real agent pinned in test/agents runs
 * behind a real intern host attached to a real core, offline, and its model calls reach Portico's own endpoints
 * with the run's credential; a fake OpenAI-compatible upstream stands behind Portico (every dialect is translated
 * to it). gemini-cli speaks the Gemini dialect (ACP `gateway` authentication), claude-code-acp Anthropic Messages,
 * codex-acp Responses and opencode chat completions (profile `modelGateway`). For each: the answer streams, every
 * call is a generation of the intern in the agent's dialect served with the intern's model, the run's usage cost is
 * the sum of its generations, and the run credential the agent's calls carried is refused once the run has ended.
 * A pass-through in front of the gateway (the host's gateway address) records the credentials the calls carried.
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createInternHost } from "../../../src/host/link.js";
import type { AgentProfile } from "../../../src/host/options.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { ensureRealAgents, type REAL_AGENT_BINS } from "../../helpers/real-agents.js";
import { chat, chatBody, contentOf, createTestIntern, finalOf } from "../../integration/interns/sse-client.js";
import { writeCatalogFile } from "../../helpers/catalog-file.js";

const MODEL = "acme/m1";

describe("real agents behind a host, their model calls through Portico with a run credential", () => {
  let bins: typeof REAL_AGENT_BINS;
  let h: Harness;
  let upstream: FakeUpstream;
  let tap: Server;
  let workRoot: string;
  /** Each call the agents' hosts relayed to Portico: its path and the credential it carried. */
  const relayed: Array<{ path: string; credential: string }> = [];

  beforeAll(async () => {
    bins = await ensureRealAgents();
    upstream = await startFakeOpenAI();
    const catalogFile = writeCatalogFile([{ slug: MODEL, name: MODEL, endpoints: [{ provider: "acme", model_id: "m1", context_length: 200_000, pricing: { prompt: "0.000001", completion: "0.000002" } }] }]);
    let target = "";
    tap = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (d: Buffer) => chunks.push(d));
      req.on("end", () => {
        const auth = String(req.headers.authorization ?? req.headers["x-api-key"] ?? req.headers["x-goog-api-key"] ?? "");
        relayed.push({ path: req.url!, credential: auth.replace(/^Bearer /, "") });
        const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !["host", "content-length", "connection"].includes(k))) as Record<string, string>;
        const body = chunks.length > 0 ? Buffer.concat(chunks) : undefined;
        fetch(target + req.url, { method: req.method, headers, body })
          .then((up) => {
            res.writeHead(up.status, Object.fromEntries([...up.headers].filter(([k]) => !["content-length", "content-encoding", "transfer-encoding"].includes(k))));
            if (up.body) Readable.fromWeb(up.body as never).pipe(res);
            else res.end();
          })
          .catch(() => res.destroy());
      });
    });
    await new Promise<void>((r) => tap.listen(0, "127.0.0.1", r));
    h = await startHarness({
      env: {
        PORTICO_INTERN_START_TIMEOUT_MS: "90000",
        PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `acme=${upstream.url}/v1`,
        PORTICO_KEYLESS_PROVIDERS: "acme",
        PORTICO_CATALOG_FILE: catalogFile,
        PORTICO_INTERN_GATEWAY_URL: `http://127.0.0.1:${(tap.address() as AddressInfo).port}`,
      },
    });
    target = h.baseUrl;
    workRoot = mkdtempSync(join(tmpdir(), "portico-real-agents-"));
    chmodSync(workRoot, 0o755); // the agents run as another user when the tests run as root
  }, 660_000);
  afterAll(async () => {
    tap?.closeAllConnections();
    await new Promise((r) => tap?.close(r));
    await h?.close();
    await upstream?.close();
    if (workRoot) rmSync(workRoot, { recursive: true, force: true });
  });

  const mkdirWorkRoot = (name: string) => {
    const dir = mkdtempSync(join(workRoot, `${name}-`));
    chmodSync(dir, 0o755);
    return dir;
  };

  /** One intern with the model, its host running `profile`, one prompt; what the run produced. */
  async function runOnce(name: string, profile: AgentProfile) {
    const { internId, token } = await createTestIntern(h, name);
    const patched = await api(h, "PATCH", `/interns/${internId}`, { key: h.tenant.managementKey, body: { model: MODEL } });
    expect(patched.status, patched.text).toBe(200);
    const hostLog: string[] = [];
    const host = createInternHost({
      coreUrl: h.coreUrl,
      token,
      profile,
      workRoot: mkdirWorkRoot(name),
      logger: pino({ level: "debug" }, { write: (l: string) => void hostLog.push(l) }),
    });
    try {
      await host.ready;
      const before = relayed.length;
      const r = await chat(h, internId, chatBody("Say hello"), { key: h.tenant.apiKey });
      expect(r.status, r.raw).toBe(200);
      const gens = (await api(h, "GET", `/generations?intern_id=${internId}&limit=100`, { key: h.tenant.managementKey })).json.data as Array<Record<string, any>>;
      const credentials = new Set(relayed.slice(before).map((c) => c.credential));
      return { r, final: finalOf(r.chunks), gens, credentials, hostLog: hostLog.join(""), paths: relayed.slice(before).map((c) => c.path) };
    } finally {
      await host.close();
    }
  }

  /** The checks every agent's run passes. */
  async function expectThroughPortico(run: Awaited<ReturnType<typeof runOnce>>, dialect: string) {
    expect(contentOf(run.r.chunks)).toContain("Hello, world");
    expect(run.gens.length, JSON.stringify(run.paths)).toBeGreaterThanOrEqual(1);
    for (const g of run.gens) expect(g).toMatchObject({ model: MODEL, status: "success", dialect, run_id: run.gens[0]!.run_id });
    const sum = run.gens.reduce((s, g) => s + Number(g.total_cost), 0);
    expect(sum).toBeGreaterThan(0);
    expect(run.final.usage.cost).toBeCloseTo(sum, 12);
    // One run, one credential; it is Portico's (prt-v1-), the host never logged it, and the ended run's is refused.
    expect([...run.credentials]).toHaveLength(1);
    const [credential] = [...run.credentials] as [string];
    expect(credential).toMatch(/^prt-v1-/);
    expect(run.hostLog).not.toContain(credential);
    const after = await fetch(`${h.baseUrl}/api/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${credential}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }] }),
    });
    expect(after.status).toBe(401);
  }

  it("gemini-cli through the Gemini dialect (ACP gateway authentication)", async () => {
    const run = await runOnce("gemini", { name: "gemini", command: bins.gemini, args: ["--acp", "--model", "gemini-2.5-flash"] });
    expect(run.paths.some((p) => p.startsWith("/api/v1beta/models/")), run.r.raw + run.hostLog.slice(-3000)).toBe(true);
    await expectThroughPortico(run, "gemini");
  }, 300_000);

  it("claude-code-acp through /api/v1/messages (modelGateway anthropic)", async () => {
    const run = await runOnce("claude", {
      name: "claude-code-acp",
      command: bins.claudeCodeAcp,
      modelGateway: "anthropic",
      env: { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1" },
    });
    expect(run.paths.some((p) => p.startsWith("/api/v1/messages"))).toBe(true);
    await expectThroughPortico(run, "messages");
  }, 300_000);

  it("codex-acp through /api/v1/responses (modelGateway openai-responses)", async () => {
    const run = await runOnce("codex", { name: "codex-acp", command: bins.codexAcp, modelGateway: "openai-responses" });
    expect(run.paths.some((p) => p.startsWith("/api/v1/responses"))).toBe(true);
    await expectThroughPortico(run, "responses");
  }, 300_000);

  it("opencode through /api/v1/chat/completions (modelGateway opencode)", async () => {
    const run = await runOnce("opencode", {
      name: "opencode",
      command: bins.opencode,
      args: ["acp"],
      modelGateway: "opencode",
      env: { OPENCODE_DISABLE_MODELS_FETCH: "1", OPENCODE_DISABLE_AUTOUPDATE: "1", OPENCODE_CONFIG_CONTENT: JSON.stringify({ permission: { bash: "ask", edit: "ask" } }) },
    });
    expect(run.paths.some((p) => p.startsWith("/api/v1/chat/completions"))).toBe(true);
    await expectThroughPortico(run, "chat");
  }, 300_000);
});
