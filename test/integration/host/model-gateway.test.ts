/**
 * Interns through the gateway, host and agent side, with real agent processes: a run's StartRun.gateway
 * reaches the agent as the host's model relay (ACP `authenticate {methodId: "gateway"}` where offered,
 * the profile's `modelGateway` family otherwise), the relay forwards each model call to a stand-in for
 * Portico with that run's token, and the built-in agent streams its chat completions answer into the run.
 * Run tokens never appear in the host's logs.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { TurnFailed, Usage } from "../../../src/gen/portico/internlink/v1/internlink_service_pb.js";
import { BUILTIN_HELP } from "../../../src/agent/builtin-agent.js";
import { startEmbeddedHost } from "../../../src/host/embedded.js";
import { scriptedAgentCommand, type Script } from "../../fixtures/scripted-agent.js";
import { contentOf, FakeCore, startRun } from "./fake-core.js";
import { REPO_ROOT, startHarness } from "./helpers.js";

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

/** Stands in for Portico's gateway: records every call; refuses token "prt-refused"; chat completions stream "Hello" + " world". */
async function fakePortico(): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      if (req.headers.authorization === "Bearer prt-refused") {
        res.writeHead(401, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { type: "authentication_error", message: "the run credential has expired" } }));
        return;
      }
      if (req.url === "/api/v1/chat/completions") {
        res.writeHead(200, { "content-type": "text/event-stream" });
        const chunk = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;
        res.write(chunk({ choices: [{ index: 0, delta: { role: "assistant", content: "Hello" } }] }));
        setTimeout(() => {
          res.write(chunk({ choices: [{ index: 0, delta: { content: " world" } }] }));
          res.write(chunk({ choices: [], usage: { prompt_tokens: 11, completion_tokens: 2, total_tokens: 13 } }));
          res.end("data: [DONE]\n\n");
        }, 10);
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ path: req.url }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanup.push(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

function capturedLogger(): { logger: pino.Logger; text: () => string } {
  const lines: string[] = [];
  return { logger: pino({ level: "debug" }, { write: (l: string) => void lines.push(l) }), text: () => lines.join("") };
}

const script = (s: Script): string => JSON.stringify(s);

interface GatewayInfo {
  auth: { gateway?: { baseUrl: string; headers: Record<string, string> } } | null;
  clientAuth: unknown;
  promptMeta: unknown;
  env: Record<string, string | null>;
}

function infoOf(content: string): GatewayInfo {
  const end = content.indexOf("}[http") >= 0 ? content.indexOf("}[http") + 1 : content.length;
  return JSON.parse(content.slice(0, end)) as GatewayInfo;
}

describe("agents through the gateway (real agent processes)", () => {
  it("ACP gateway auth: the agent gets the relay once; each run's calls carry that run's token; no token in the logs", async () => {
    const portico = await fakePortico();
    const log = capturedLogger();
    const h = await startHarness({
      profile: { ...scriptedAgentCommand(REPO_ROOT), env: { SCRIPTED_AGENT_CONFIG: JSON.stringify({ gatewayAuth: true }) } },
      logger: log.logger,
    });
    cleanup.push(() => h.dispose());
    const link = await h.core.nextLink(0);
    const steps: Script = { steps: [{ gatewayInfo: true }, { http: { path: "/v1/messages?beta=true", body: { model: "claude-x", max_tokens: 5 } } }] };

    startRun(link, { runId: "r1", sessionId: "s1", prompt: script(steps), gateway: { baseUrl: `${portico.url}/`, token: "prt-run-one", model: "anthropic/claude-x" } });
    await link.waitForEvent("r1", "turnEnded", 20_000);
    const c1 = contentOf(link, "r1");
    const info = infoOf(c1);
    // initialize advertised the gateway capability; authenticate carried the relay's base URL and a Bearer header
    expect(info.clientAuth).toMatchObject({ _meta: { gateway: true } });
    expect(info.auth?.gateway?.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const secretHeader = info.auth!.gateway!.headers.Authorization!;
    expect(secretHeader).toMatch(/^Bearer prl-/);
    expect(JSON.stringify(info)).not.toContain("prt-run-one");
    expect(info.promptMeta).toEqual({ portico: { model: "anthropic/claude-x" } });
    expect(c1).toContain('[http 200 {"path":"/api/v1/messages?beta=true"}]');
    expect(portico.seen[0]).toMatchObject({ method: "POST", url: "/api/v1/messages?beta=true" });
    expect(portico.seen[0]!.headers.authorization).toBe("Bearer prt-run-one");
    const pid = h.host.sessions().find((s) => s.sessionId === "s1")!.agentPid;

    // The next run of the session: same process, no new authenticate, the new run's token upstream.
    startRun(link, { runId: "r2", sessionId: "s1", prompt: script(steps), gateway: { baseUrl: portico.url, token: "prt-run-two", model: "anthropic/claude-x" } });
    await link.waitForEvent("r2", "turnEnded", 20_000);
    expect(h.host.sessions().find((s) => s.sessionId === "s1")!.agentPid).toBe(pid);
    expect(infoOf(contentOf(link, "r2")).auth?.gateway?.headers.Authorization).toBe(secretHeader);
    expect(portico.seen[1]!.headers.authorization).toBe("Bearer prt-run-two");

    // Between runs the relay refuses the agent's secret: no run, no model calls.
    const between = await fetch(`${info.auth!.gateway!.baseUrl}/v1/messages`, { method: "POST", headers: { authorization: secretHeader }, body: "{}" });
    expect(between.status).toBe(403);
    expect(portico.seen).toHaveLength(2);

    // A run without a gateway: the agent is restarted without one (no capability, no authenticate).
    startRun(link, { runId: "r3", sessionId: "s1", prompt: script({ steps: [{ gatewayInfo: true }] }) });
    await link.waitForEvent("r3", "turnEnded", 20_000);
    const info3 = infoOf(contentOf(link, "r3"));
    expect((info3.clientAuth as { _meta?: unknown } | null)?._meta).toBeUndefined();
    expect(info3.auth).toBeNull();
    expect(h.host.sessions().find((s) => s.sessionId === "s1")!.agentPid).not.toBe(pid);

    const logged = log.text();
    expect(logged).toContain("relayed a model call");
    expect(logged).not.toContain("prt-run-");
    expect(logged).not.toContain(secretHeader.slice("Bearer ".length));
  });

  it("profile modelGateway (anthropic): the agent's environment points at the relay; calls reach Portico with the run token", async () => {
    const portico = await fakePortico();
    const log = capturedLogger();
    const h = await startHarness({
      profile: {
        ...scriptedAgentCommand(REPO_ROOT),
        modelGateway: "anthropic",
        env: { SCRIPTED_AGENT_CONFIG: JSON.stringify({ reportEnv: ["ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_MODEL"] }) },
      },
      logger: log.logger,
    });
    cleanup.push(() => h.dispose());
    const link = await h.core.nextLink(0);
    const steps: Script = {
      steps: [{ gatewayInfo: true }, { http: { path: "/v1/messages?beta=true", body: {}, base: { env: "ANTHROPIC_BASE_URL", keyEnv: "ANTHROPIC_API_KEY", keyHeader: "x-api-key" } } }],
    };
    startRun(link, { runId: "r1", sessionId: "s1", prompt: script(steps), gateway: { baseUrl: portico.url, token: "prt-env-one", model: "anthropic/claude-y" } });
    await link.waitForEvent("r1", "turnEnded", 20_000);
    const c1 = contentOf(link, "r1");
    const info = infoOf(c1);
    expect(info.clientAuth).toMatchObject({ _meta: { gateway: true } }); // advertised; this agent offers no gateway method
    expect(info.auth).toBeNull();
    expect(info.env.ANTHROPIC_BASE_URL).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(info.env.ANTHROPIC_API_KEY).toMatch(/^prl-/);
    expect(info.env.ANTHROPIC_MODEL).toBe("anthropic/claude-y");
    expect(c1).toContain("[http 200");
    expect(portico.seen[0]!.url).toBe("/api/v1/messages?beta=true");
    expect(portico.seen[0]!.headers.authorization).toBe("Bearer prt-env-one");
    expect(portico.seen[0]!.headers["x-api-key"]).toBeUndefined();

    // Same model, new token: the process (and its environment) stays; the relay swaps the token.
    const pid = h.host.sessions()[0]!.agentPid;
    startRun(link, { runId: "r2", sessionId: "s1", prompt: script(steps), gateway: { baseUrl: portico.url, token: "prt-env-two", model: "anthropic/claude-y" } });
    await link.waitForEvent("r2", "turnEnded", 20_000);
    expect(h.host.sessions()[0]!.agentPid).toBe(pid);
    expect(portico.seen[1]!.headers.authorization).toBe("Bearer prt-env-two");

    // Another model is baked into the environment: the agent is restarted with it.
    startRun(link, { runId: "r3", sessionId: "s1", prompt: script({ steps: [{ gatewayInfo: true }] }), gateway: { baseUrl: portico.url, token: "prt-env-3", model: "anthropic/claude-z" } });
    await link.waitForEvent("r3", "turnEnded", 20_000);
    expect(infoOf(contentOf(link, "r3")).env.ANTHROPIC_MODEL).toBe("anthropic/claude-z");
    expect(h.host.sessions()[0]!.agentPid).not.toBe(pid);
    expect(log.text()).not.toContain("prt-env-");
  });
});

describe("the built-in agent with a model gateway (embedded host, agent subprocess)", () => {
  async function embedded(): Promise<{ core: FakeCore; log: () => string }> {
    const core = await new FakeCore({ token: "pht-builtin", pingIntervalMs: 300, livenessTimeoutMs: 3000 }).listen();
    const dataDir = mkdtempSync(join(tmpdir(), "portico-data-"));
    const log = capturedLogger();
    const host = startEmbeddedHost({ coreUrl: core.url, token: "pht-builtin", dataDir, internId: "intern-g", logger: log.logger });
    cleanup.push(async () => {
      await host.close();
      await core.close();
      rmSync(dataDir, { recursive: true, force: true });
    });
    await host.ready;
    return { core, log: log.text };
  }

  it("sends a prompt without $ lines to Portico's chat completions with the run token and model, streams the answer back", async () => {
    const portico = await fakePortico();
    const { core, log } = await embedded();
    const link = await core.nextLink(0);
    startRun(link, { runId: "b1", sessionId: "sb", prompt: "Say hello", gateway: { baseUrl: portico.url, token: "prt-builtin-1", model: "openai/gpt-test" } });
    await link.waitForEvent("b1", "turnEnded", 20_000);
    expect(contentOf(link, "b1")).toBe("Hello world");
    const contentEvents = link.runEvents("b1").filter((e) => e.event.case === "content");
    expect(contentEvents.length).toBeGreaterThanOrEqual(2); // streamed, not one block
    const call = portico.seen.find((s) => s.url === "/api/v1/chat/completions")!;
    expect(call.headers.authorization).toBe("Bearer prt-builtin-1");
    const body = JSON.parse(call.body) as { model: string; stream: boolean; messages: unknown[] };
    expect(body.model).toBe("openai/gpt-test");
    expect(body.stream).toBe(true);
    expect(body.messages).toEqual([{ role: "user", content: "Say hello" }]);
    const usage = link.runEvents("b1").find((e) => e.event.case === "usage")!.event.value as Usage;
    expect([usage.promptTokens, usage.completionTokens, usage.totalTokens]).toEqual([11n, 2n, 13n]);

    // The next run of the session carries the conversation so far, and its own token.
    startRun(link, { runId: "b2", sessionId: "sb", prompt: "Again", gateway: { baseUrl: portico.url, token: "prt-builtin-2", model: "openai/gpt-test" } });
    await link.waitForEvent("b2", "turnEnded", 20_000);
    const calls = portico.seen.filter((s) => s.url === "/api/v1/chat/completions");
    expect(calls).toHaveLength(2);
    expect(calls[1]!.headers.authorization).toBe("Bearer prt-builtin-2");
    expect((JSON.parse(calls[1]!.body) as { messages: unknown[] }).messages).toEqual([
      { role: "user", content: "Say hello" },
      { role: "assistant", content: "Hello world" },
      { role: "user", content: "Again" },
    ]);

    // $ commands keep working as before, with no model call.
    startRun(link, { runId: "b3", sessionId: "sb", prompt: "$ echo via-terminal", gateway: { baseUrl: portico.url, token: "prt-builtin-3", model: "openai/gpt-test" } });
    await link.waitForEvent("b3", "turnEnded", 20_000);
    expect(contentOf(link, "b3")).toContain("via-terminal");
    expect(portico.seen.filter((s) => s.url === "/api/v1/chat/completions")).toHaveLength(2);

    // A refused credential fails the turn with Portico's message.
    startRun(link, { runId: "b4", sessionId: "sb", prompt: "Hi", gateway: { baseUrl: portico.url, token: "prt-refused", model: "openai/gpt-test" } });
    const failed = (await link.waitForEvent("b4", "turnFailed", 20_000)).event.value as TurnFailed;
    expect(failed.message).toContain("the model call failed (401): the run credential has expired");

    expect(log()).not.toContain("prt-builtin-");
  });

  it("without a gateway it answers with its help text, as before", async () => {
    const { core } = await embedded();
    const link = await core.nextLink(0);
    startRun(link, { runId: "h1", sessionId: "sh", prompt: "Say hello" });
    await link.waitForEvent("h1", "turnEnded", 20_000);
    expect(contentOf(link, "h1")).toBe(BUILTIN_HELP);
  });
});
