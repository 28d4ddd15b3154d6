/**
 * codex-acp (pinned in test/agents) behind the intern host, its model calls relayed to the real Portico gateway's
 * /api/v1/responses (core + gateway, SQLite) in front of a fake OpenAI-compatible upstream. Until the core mints
 * per-run credentials, the run's gateway token is a tenant API key (the relay swaps it in as the bearer, as it
 * would a run token). The upstream's first answer calls codex's namespaced MCP tool by its flattened name.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { ensureRealAgents, type REAL_AGENT_BINS } from "../../helpers/real-agents.js";
import { startHarness as startPortico, api, type Harness as Portico } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { contentOf, startRun } from "./fake-core.js";
import { startHarness } from "./helpers.js";

let BIN: typeof REAL_AGENT_BINS;
let portico: Portico;
let fake: FakeUpstream;
let tap: Server;
let tapUrl = "";
/** What codex sent to Portico and what Portico answered (status), recorded by a pass-through in front of the gateway. */
const seen: Array<{ method: string; url: string; body: unknown; status: number; error?: string }> = [];
beforeAll(async () => {
  BIN = await ensureRealAgents();
  fake = await startFakeOpenAI();
  portico = await startPortico({ env: { PORTICO_PROVIDER_GROQ_BASE_URL: `${fake.url}/v1` } });
  tap = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("end", async () => {
      const raw = Buffer.concat(chunks);
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !["host", "content-length", "connection"].includes(k))) as Record<string, string>;
      const up = await fetch(portico.baseUrl + req.url, { method: req.method, headers, body: raw.length > 0 ? raw : undefined });
      const entry: (typeof seen)[number] = { method: req.method!, url: req.url!, body: raw.length > 0 ? JSON.parse(raw.toString()) : undefined, status: up.status };
      seen.push(entry);
      res.writeHead(up.status, Object.fromEntries([...up.headers].filter(([k]) => !["content-length", "content-encoding", "transfer-encoding"].includes(k))));
      if (up.status >= 400) {
        entry.error = await up.text();
        res.end(entry.error);
        return;
      }
      if (up.body) Readable.fromWeb(up.body as never).pipe(res);
      else res.end();
    });
  });
  await new Promise<void>((r) => tap.listen(0, "127.0.0.1", r));
  tapUrl = `http://127.0.0.1:${(tap.address() as AddressInfo).port}`;
  expect((await api(portico, "POST", "/byok", { key: portico.tenant.managementKey, body: { provider: "groq", key: "gsk-test" } })).status).toBe(200);
}, 660_000);
afterAll(async () => {
  tap?.closeAllConnections();
  await new Promise((r) => tap?.close(r));
  await portico?.close();
  await fake?.close();
});

describe("codex-acp through Portico's /api/v1/responses", () => {
  it("runs a turn; Portico answers every request codex sends", async () => {
    fake.script = { text: ["Hello, world"], finish: "stop", usage: { input: 11, output: 3 } };
    const h = await startHarness({ profile: { command: BIN.codexAcp, modelGateway: "openai-responses" }, limits: { agentStartBudgetMs: 90_000 } });
    try {
      const link = await h.core.nextLink(0);
      startRun(link, { runId: "r1", sessionId: "s1", prompt: "say hello", gateway: { baseUrl: tapUrl, token: portico.tenant.apiKey, model: "groq/llama-4" } });
      const end = await link.waitFor((l) => l.runEvents("r1").find((e) => e.event.case === "turnEnded" || e.event.case === "turnFailed"), 120_000, "end of turn");
      if (process.env.CODEX_DUMP) writeFileSync(process.env.CODEX_DUMP, JSON.stringify({ seen, upstream: fake.requests.map((r) => ({ url: r.url, body: r.body })) }, null, 1));
      expect(seen.filter((s) => s.status >= 400), JSON.stringify(seen.map((s) => [s.url, s.status, s.error]))).toEqual([]);
      expect(end.event.case, JSON.stringify(end.event.value, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v))).toBe("turnEnded");
      expect(contentOf(link, "r1")).toContain("Hello, world");
    } finally {
      await h.dispose();
    }
  }, 300_000);

  it("a call to a namespaced tool reaches codex as name + namespace; codex replays it and the upstream gets the qualified name", async () => {
    const before = fake.requests.length;
    const seenBefore = seen.length;
    // First model call: call codex's multi_agent_v1.wait_agent by its flattened name; then answer in text.
    fake.scriptFor = (req) => {
      const msgs = (req.body as { messages?: Array<{ role: string }> }).messages ?? [];
      return msgs.some((m) => m.role === "tool")
        ? { text: ["Done waiting."], finish: "stop", usage: { input: 20, output: 3 } }
        : { text: [], toolCalls: [{ id: "call_ns1", name: "multi_agent_v1__wait_agent", arguments: '{"targets":["nobody"],"timeout_ms":1}' }], finish: "tool_calls", usage: { input: 11, output: 3 } };
    };
    const h = await startHarness({ profile: { command: BIN.codexAcp, modelGateway: "openai-responses", modes: { selfDrive: "full-access" } }, limits: { agentStartBudgetMs: 90_000 } });
    try {
      const link = await h.core.nextLink(0);
      startRun(link, { runId: "r2", sessionId: "s2", prompt: "wait for the agent", gateway: { baseUrl: tapUrl, token: portico.tenant.apiKey, model: "groq/llama-4" } });
      const end = await link.waitFor((l) => l.runEvents("r2").find((e) => e.event.case === "turnEnded" || e.event.case === "turnFailed"), 120_000, "end of turn");
      if (process.env.CODEX_DUMP) writeFileSync(process.env.CODEX_DUMP + ".2", JSON.stringify({ seen: seen.slice(seenBefore), upstream: fake.requests.slice(before).map((r) => ({ url: r.url, body: r.body })) }, null, 1));
      const mine = seen.slice(seenBefore);
      expect(mine.filter((s) => s.status >= 400), JSON.stringify(mine.map((s) => [s.url, s.status, s.error]))).toEqual([]);
      expect(end.event.case).toBe("turnEnded");
      expect(contentOf(link, "r2")).toContain("Done waiting.");
      // Codex sent the call back with its namespace, and its output.
      const replay = mine.map((s) => s.body as { input?: Array<Record<string, unknown>> }).find((b) => b?.input?.some((i) => i.type === "function_call_output"))!;
      expect(replay.input!.find((i) => i.type === "function_call")).toMatchObject({ call_id: "call_ns1", name: "wait_agent", namespace: "multi_agent_v1" });
      const output = replay.input!.find((i) => i.type === "function_call_output")!;
      expect(JSON.stringify(output.output)).not.toMatch(/unsupported call/i);
      // The upstream got the call back under the qualified name.
      const back = fake.requests.slice(before).map((r) => r.body as { messages: Array<{ role: string; tool_calls?: Array<{ function: { name: string } }> }> }).at(-1)!;
      expect(back.messages.find((m) => m.tool_calls)!.tool_calls![0]!.function.name).toBe("multi_agent_v1__wait_agent");
    } finally {
      fake.scriptFor = undefined;
      await h.dispose();
    }
  }, 300_000);

  it("with reasoning settings (effort, summaries) codex sends reasoning and include, and both are served", async () => {
    const seenBefore = seen.length;
    const before = fake.requests.length;
    fake.script = { text: ["Reasoned hello"], finish: "stop", usage: { input: 11, output: 3 } };
    const args = ["-c", 'model_reasoning_effort="high"', "-c", 'model_reasoning_summary="detailed"', "-c", "model_supports_reasoning_summaries=true"];
    const h = await startHarness({ profile: { command: BIN.codexAcp, args, modelGateway: "openai-responses" }, limits: { agentStartBudgetMs: 90_000 } });
    try {
      const link = await h.core.nextLink(0);
      startRun(link, { runId: "r3", sessionId: "s3", prompt: "think and say hello", gateway: { baseUrl: tapUrl, token: portico.tenant.apiKey, model: "groq/llama-4" } });
      const end = await link.waitFor((l) => l.runEvents("r3").find((e) => e.event.case === "turnEnded" || e.event.case === "turnFailed"), 120_000, "end of turn");
      const mine = seen.slice(seenBefore);
      if (process.env.CODEX_DUMP) writeFileSync(process.env.CODEX_DUMP + ".3", JSON.stringify({ seen: mine, upstream: fake.requests.slice(before).map((r) => ({ url: r.url, body: r.body })) }, null, 1));
      expect(mine.filter((s) => s.status >= 400), JSON.stringify(mine.map((s) => [s.url, s.status, s.error]))).toEqual([]);
      expect(end.event.case).toBe("turnEnded");
      expect(contentOf(link, "r3")).toContain("Reasoned hello");
      const sent = mine[0]!.body as Record<string, unknown>;
      expect(sent).toMatchObject({ reasoning: { effort: "high", summary: "detailed" }, include: ["reasoning.encrypted_content"] });
      expect(fake.requests.at(-1)!.body).toMatchObject({ reasoning_effort: "high" });
    } finally {
      await h.dispose();
    }
  }, 300_000);
});
