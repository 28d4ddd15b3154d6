/**
 * Interns through the gateway, host side: the profile's `modelGateway` families and `${PORTICO_MODEL_*}`
 * placeholders (agent-env.ts agentLaunch), and the loopback model relay (model-relay.ts) against a real
 * HTTP server standing in for Portico.
 */
import * as http from "node:http";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { agentLaunch, CODEX_TOKEN_ENV, type ModelAccess } from "../../../src/host/agent-env.js";
import { createModelRelay, type ModelRelay, type RelayTarget } from "../../../src/host/model-relay.js";
import { validateAgentProfile, type AgentProfile } from "../../../src/host/options.js";

const access: ModelAccess = { baseUrl: "http://127.0.0.1:4567", token: "prl-local-secret", model: "anthropic/claude-test" };
const launch = (profile: Partial<AgentProfile>, a: ModelAccess | null = access) =>
  agentLaunch({ command: "agent", ...profile }, "/home/intern", "/work/s1", a ?? undefined, { PATH: "/bin", ANTHROPIC_API_KEY: "host-key", PORTICO_HOST_TOKEN: "pht-x" });

describe("modelGateway families and placeholders", () => {
  it("anthropic: base URL standing for Portico's /api, the credential as the API key, the model", () => {
    const { env, args } = launch({ modelGateway: "anthropic", args: ["--x"] });
    expect(env.ANTHROPIC_BASE_URL).toBe("http://127.0.0.1:4567");
    expect(env.ANTHROPIC_API_KEY).toBe("prl-local-secret"); // replaces the host's own key
    expect(env.ANTHROPIC_MODEL).toBe("anthropic/claude-test");
    expect(env.PORTICO_HOST_TOKEN).toBeUndefined();
    expect(env.HOME).toBe("/home/intern");
    expect(args).toEqual(["--x"]);
  });

  it("openai-responses (codex-acp): a model_providers entry with wire_api responses and env_key, selected, plus the model", () => {
    const { env, args } = launch({ modelGateway: "openai-responses" });
    expect(args).toEqual([
      "-c",
      'model_provider="portico"',
      "-c",
      `model_providers.portico={name="Portico",base_url="http://127.0.0.1:4567/v1",wire_api="responses",env_key="${CODEX_TOKEN_ENV}"}`,
      "-c",
      'web_search="disabled"',
      "-c",
      'model="anthropic/claude-test"',
    ]);
    expect(env[CODEX_TOKEN_ENV]).toBe("prl-local-secret");
  });

  it("openai-chat and gemini", () => {
    const chat = launch({ modelGateway: "openai-chat" }).env;
    expect([chat.OPENAI_BASE_URL, chat.OPENAI_API_KEY]).toEqual(["http://127.0.0.1:4567/v1", "prl-local-secret"]);
    const gem = launch({ modelGateway: "gemini" }).env;
    expect([gem.GOOGLE_GEMINI_BASE_URL, gem.GEMINI_API_KEY]).toEqual(["http://127.0.0.1:4567", "prl-local-secret"]);
  });

  it("opencode: a chat-completions provider merged into the profile's own OPENCODE_CONFIG_CONTENT", () => {
    const own = JSON.stringify({ permission: { bash: "ask" }, provider: { other: { npm: "x" } } });
    const { env } = launch({ modelGateway: "opencode", env: { OPENCODE_CONFIG_CONTENT: own, OPENCODE_DISABLE_AUTOUPDATE: "1" } });
    const config = JSON.parse(env.OPENCODE_CONFIG_CONTENT!) as Record<string, any>;
    expect(config.permission).toEqual({ bash: "ask" });
    expect(config.provider.other).toEqual({ npm: "x" });
    expect(config.provider.portico).toEqual({
      npm: "@ai-sdk/openai-compatible",
      name: "Portico",
      options: { baseURL: "http://127.0.0.1:4567/v1", apiKey: "prl-local-secret" },
      models: { "anthropic/claude-test": { name: "anthropic/claude-test" } },
    });
    expect(config.model).toBe("portico/anthropic/claude-test");
    expect(env.OPENCODE_DISABLE_AUTOUPDATE).toBe("1");
  });

  it("placeholders in env and args; the profile's explicit env wins over the family's; empty without a gateway", () => {
    const profile: Partial<AgentProfile> = {
      args: ["--base", "${PORTICO_MODEL_BASE_URL}/v1", "--model=${PORTICO_MODEL}"],
      env: { MY_KEY: "${PORTICO_MODEL_TOKEN}", ANTHROPIC_MODEL: "pinned" },
      modelGateway: "anthropic",
    };
    const on = launch(profile);
    expect(on.args).toEqual(["--base", "http://127.0.0.1:4567/v1", "--model=anthropic/claude-test"]);
    expect(on.env.MY_KEY).toBe("prl-local-secret");
    expect(on.env.ANTHROPIC_MODEL).toBe("pinned");
    const off = launch(profile, null);
    expect(off.args).toEqual(["--base", "/v1", "--model="]);
    expect(off.env.MY_KEY).toBe("");
    expect(off.env.ANTHROPIC_API_KEY).toBe("host-key"); // no family without a gateway
    expect(off.env.ANTHROPIC_BASE_URL).toBeUndefined();
  });

  it("the profile file accepts the known families only, naming the field", () => {
    expect(validateAgentProfile({ command: "x", modelGateway: "gemini" }).modelGateway).toBe("gemini");
    expect(() => validateAgentProfile({ command: "x", modelGateway: "bedrock" })).toThrow(/agent profile: modelGateway must be "anthropic", "openai-responses"/);
  });
});

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

let servers: Server[] = [];
let relays: ModelRelay[] = [];
afterEach(async () => {
  for (const r of relays) await r.close();
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  servers = [];
  relays = [];
});

/** A stand-in for Portico: records requests; /api/v1/chat/completions streams two SSE events slowly. */
async function fakePortico(): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      if (req.url?.startsWith("/api/v1/chat/completions")) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write('data: {"n":1}\n\n');
        setTimeout(() => res.end('data: {"n":2}\n\ndata: [DONE]\n\n'), 20);
        return;
      }
      res.writeHead(200, { "content-type": "application/json", "x-upstream": "yes" });
      res.end(JSON.stringify({ ok: true }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

describe("model relay", () => {
  it("forwards to <gateway>/api<path> with the run token instead of the local secret, in whichever header the agent used", async () => {
    const portico = await fakePortico();
    const lines: string[] = [];
    const logger = pino({ level: "debug" }, { write: (l: string) => void lines.push(l) });
    const relay = createModelRelay({ logger });
    relays.push(relay);
    let target: RelayTarget | undefined = { runId: "r1", baseUrl: portico.url, token: "prt-run-one" };
    const ep = await relay.register(() => target);
    expect(ep.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(ep.secret).toMatch(/^prl-/);

    // Anthropic clients: x-api-key, path with ?beta=true
    let res = await fetch(`${ep.baseUrl}/v1/messages?beta=true`, { method: "POST", headers: { "x-api-key": ep.secret, "anthropic-version": "2023-06-01" }, body: "{}" });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-upstream")).toBe("yes");
    expect(portico.seen[0]).toMatchObject({ method: "POST", url: "/api/v1/messages?beta=true", body: "{}" });
    expect(portico.seen[0]!.headers.authorization).toBe("Bearer prt-run-one");
    expect(portico.seen[0]!.headers["x-api-key"]).toBeUndefined();
    expect(portico.seen[0]!.headers["anthropic-version"]).toBe("2023-06-01");

    // Gemini clients: x-goog-api-key (or ?key=), which never goes upstream
    target = { runId: "r2", baseUrl: portico.url, token: "prt-run-two" };
    res = await fetch(`${ep.baseUrl}/v1beta/models/m:streamGenerateContent?alt=sse&key=${ep.secret}`, { method: "POST", body: "{}" });
    expect(res.status).toBe(200);
    expect(portico.seen[1]!.url).toBe("/api/v1beta/models/m:streamGenerateContent?alt=sse");
    expect(portico.seen[1]!.headers.authorization).toBe("Bearer prt-run-two");
    await fetch(`${ep.baseUrl}/v1beta/models/m:generateContent`, { method: "POST", headers: { "x-goog-api-key": ep.secret, authorization: "Bearer some-host-key" }, body: "{}" });
    expect(portico.seen[2]!.headers.authorization).toBe("Bearer prt-run-two");
    expect(portico.seen[2]!.headers["x-goog-api-key"]).toBeUndefined();

    // Streams pass through event by event
    res = await fetch(`${ep.baseUrl}/v1/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${ep.secret}` }, body: "{}" });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(await res.text()).toBe('data: {"n":1}\n\ndata: {"n":2}\n\ndata: [DONE]\n\n');

    // HEAD probes too
    res = await fetch(`${ep.baseUrl}/`, { method: "HEAD", headers: { "x-api-key": ep.secret } });
    expect(portico.seen.at(-1)).toMatchObject({ method: "HEAD", url: "/api/" });

    // Neither the run token nor the local secret is logged
    const log = lines.join("");
    expect(log).toContain("relayed a model call");
    expect(log).not.toContain("prt-run-");
    expect(log).not.toContain(ep.secret);
  });

  it("refuses an unknown or disposed secret (401) and a session without a gateway run (403); stays under /api", async () => {
    const portico = await fakePortico();
    const relay = createModelRelay({ logger: pino({ level: "silent" }) });
    relays.push(relay);
    let target: RelayTarget | undefined;
    const ep = await relay.register(() => target);
    const call = (secret: string, path = "/v1/responses") => fetch(`${ep.baseUrl}${path}`, { method: "POST", headers: { authorization: `Bearer ${secret}` }, body: "{}" });
    let res = await call("prl-wrong");
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe("authentication_error");
    res = await call(ep.secret);
    expect(res.status).toBe(403);
    target = { runId: "r1", baseUrl: `${portico.url}/`, token: "prt-1" };
    // A raw ".." cannot climb out of Portico's /api (the path is resolved before /api is put in front)
    const raw = await new Promise<number>((resolve) => {
      const u = new URL(ep.baseUrl);
      const req = http.request({ host: u.hostname, port: u.port, path: "/v1/../../../admin/keys", method: "POST", headers: { authorization: `Bearer ${ep.secret}` } }, (r) => {
        r.resume();
        resolve(r.statusCode ?? 0);
      });
      req.end("{}");
    });
    expect(raw).toBe(200);
    expect(portico.seen.at(-1)!.url).toBe("/api/admin/keys");
    res = await call(ep.secret);
    expect(res.status).toBe(200);
    expect(portico.seen.at(-1)!.url).toBe("/api/v1/responses");
    ep.dispose();
    res = await call(ep.secret);
    expect(res.status).toBe(401);
    expect(relay.size()).toBe(0);
  });

  it("answers 502 when Portico cannot be reached", async () => {
    const relay = createModelRelay({ logger: pino({ level: "silent" }) });
    relays.push(relay);
    const ep = await relay.register(() => ({ runId: "r1", baseUrl: "http://127.0.0.1:1", token: "prt-1" }));
    const res = await fetch(`${ep.baseUrl}/v1/responses`, { method: "POST", headers: { authorization: `Bearer ${ep.secret}` }, body: "{}" });
    expect(res.status).toBe(502);
    expect(await res.text()).not.toContain("prt-1");
  });
});
