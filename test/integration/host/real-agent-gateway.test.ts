/**
 * Real agents through the model gateway, host side: the installed agent behind the host, a run's
 * StartRun.gateway pointing at a fake upstream standing in for Portico (its routes under /api), and the
 * agent's model calls relayed there with each run's token. The agents are the versions pinned in test/agents
 * (installed on first use, test/helpers/real-agents.ts).
 */
import pino from "pino";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { startFakeAnthropic } from "../../helpers/fake-upstreams/anthropic.js";
import { startFakeGemini } from "../../helpers/fake-upstreams/gemini.js";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import type { AgentProfile } from "../../../src/host/options.js";
import { ensureRealAgents, type REAL_AGENT_BINS } from "../../helpers/real-agents.js";
import { contentOf, startRun, type FakeLink } from "./fake-core.js";
import { startHarness, type Harness } from "./helpers.js";

let BIN: typeof REAL_AGENT_BINS;
beforeAll(async () => {
  BIN = await ensureRealAgents();
}, 660_000);

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

async function hostFor(profile: Partial<AgentProfile>, fake: FakeUpstream): Promise<{ h: Harness; link: FakeLink; log: () => string }> {
  const lines: string[] = [];
  const h = await startHarness({
    profile,
    limits: { agentStartBudgetMs: 90_000 },
    logger: pino({ level: "debug" }, { write: (l: string) => void lines.push(l) }),
  });
  cleanup.push(async () => {
    await h.dispose();
    await fake.close();
  });
  return { h, link: await h.core.nextLink(0), log: () => lines.join("") };
}

/** A minimal OpenAI Responses stream (what codex-acp reads): "Hello, world" as one message. */
async function fakeResponses(): Promise<FakeUpstream> {
  const requests: FakeUpstream["requests"] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      requests.push({ method: req.method!, url: req.url!, headers: req.headers, body: body ? (JSON.parse(body) as unknown) : undefined });
      res.writeHead(200, { "content-type": "text/event-stream" });
      const ev = (type: string, data: Record<string, unknown>): string => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
      const item = { id: "msg_1", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Hello, world", annotations: [] }] };
      const response = { id: "resp_1", object: "response", status: "completed", model: "gpt-5", output: [item], usage: { input_tokens: 11, output_tokens: 3, total_tokens: 14, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } } };
      res.write(ev("response.created", { response: { ...response, status: "in_progress", output: [] } }));
      res.write(ev("response.output_item.added", { output_index: 0, item: { ...item, status: "in_progress", content: [] } }));
      res.write(ev("response.output_text.delta", { output_index: 0, content_index: 0, item_id: "msg_1", delta: "Hello, world" }));
      res.write(ev("response.output_item.done", { output_index: 0, item }));
      res.end(ev("response.completed", { response }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  } as unknown as FakeUpstream;
}

/** Two runs of one session, each with its own token: returns the authorization each model call carried. */
async function twoRuns(link: FakeLink, fake: FakeUpstream, model: string, prefix: string): Promise<string[]> {
  for (const n of [1, 2]) {
    startRun(link, { runId: `${prefix}${n}`, sessionId: "s1", prompt: "say hello", gateway: { baseUrl: fake.url, token: `prt-${prefix}-${n}`, model } });
    const end = await link.waitFor((l) => l.runEvents(`${prefix}${n}`).find((e) => e.event.case === "turnEnded" || e.event.case === "turnFailed"), 90_000, "end of turn");
    const detail = `${end.event.case} ${JSON.stringify(end.event.value, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v))}; calls: ${fake.requests.map((r) => `${r.method} ${r.url}`).join(", ")}`;
    expect(end.event.case, detail).toBe("turnEnded");
    expect(contentOf(link, `${prefix}${n}`)).toContain("Hello, world");
  }
  return fake.requests.map((r) => `${r.url} ${r.headers.authorization ?? ""}`);
}

describe("real agents through the model relay", () => {
  it("gemini-cli: ACP authenticate {methodId: gateway}; Gemini streamGenerateContent under /api with each run's token", async () => {
    const fake = await startFakeGemini();
    // An explicit model: with "auto" gemini-cli first asks a router model for JSON the fake does not give.
    const { h, link, log } = await hostFor({ command: BIN.gemini, args: ["--acp", "--model", "gemini-2.5-flash"] }, fake);
    const calls = await twoRuns(link, fake, "google/gemini-2.5-flash", "g");
    expect(calls.some((c) => c === "/api/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse Bearer prt-g-1")).toBe(true);
    expect(calls.at(-1)).toBe("/api/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse Bearer prt-g-2");
    expect(calls.every((c) => c.startsWith("/api/"))).toBe(true);
    expect(h.host.sessions()).toHaveLength(1);
    expect(fake.requests.every((r) => r.headers["x-goog-api-key"] === undefined)).toBe(true);
    expect(log()).not.toContain("prt-g-");
  }, 240_000);

  it("claude-code-acp: modelGateway anthropic; Messages under /api with each run's token", async () => {
    const fake = await startFakeAnthropic();
    const { link, log } = await hostFor(
      { command: BIN.claudeCodeAcp, modelGateway: "anthropic", env: { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1" } },
      fake,
    );
    const calls = await twoRuns(link, fake, "claude-sonnet-4-5", "c");
    expect(calls.filter((c) => c.startsWith("/api/v1/messages")).length).toBeGreaterThanOrEqual(2);
    expect(calls.every((c) => c.startsWith("/api/"))).toBe(true);
    expect(calls.some((c) => c.endsWith("Bearer prt-c-1"))).toBe(true);
    expect(calls.at(-1)).toMatch(/Bearer prt-c-2$/);
    expect(log()).not.toContain("prt-c-");
  }, 240_000);

  it("codex-acp: modelGateway openai-responses; Responses under /api with each run's token", async () => {
    const fake = await fakeResponses();
    const { link, log } = await hostFor({ command: BIN.codexAcp, modelGateway: "openai-responses" }, fake);
    const calls = await twoRuns(link, fake, "gpt-5", "x");
    expect(calls.filter((c) => c.startsWith("/api/v1/responses")).length).toBeGreaterThanOrEqual(2);
    expect(calls.some((c) => c.endsWith("Bearer prt-x-1"))).toBe(true);
    expect(calls.at(-1)).toMatch(/Bearer prt-x-2$/);
    expect(log()).not.toContain("prt-x-");
  }, 240_000);

  it("opencode: modelGateway opencode; chat completions under /api with each run's token", async () => {
    const fake = await startFakeOpenAI();
    const { link, log } = await hostFor(
      {
        command: BIN.opencode,
        args: ["acp"],
        modelGateway: "opencode",
        env: { OPENCODE_DISABLE_MODELS_FETCH: "1", OPENCODE_DISABLE_AUTOUPDATE: "1", OPENCODE_CONFIG_CONTENT: JSON.stringify({ permission: { bash: "ask", edit: "ask" } }) },
      },
      fake,
    );
    const calls = await twoRuns(link, fake, "openai/gpt-test", "o");
    expect(calls.filter((c) => c.startsWith("/api/v1/chat/completions")).length).toBeGreaterThanOrEqual(2);
    expect(calls.every((c) => c.startsWith("/api/"))).toBe(true);
    expect(calls.some((c) => c.endsWith("Bearer prt-o-1"))).toBe(true);
    expect(calls.at(-1)).toMatch(/Bearer prt-o-2$/);
    expect(fake.requests.some((r) => (r.body as { model?: string } | undefined)?.model === "openai/gpt-test")).toBe(true);
    expect(log()).not.toContain("prt-o-");
  }, 240_000);
});
