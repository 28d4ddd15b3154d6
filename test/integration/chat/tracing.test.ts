/**
 * Tracing (docs/operations.md, "Tracing"): Portico started through its own composition roots (`portico serve`'s
 * in-process core and gateway, then a split core and gateway over real gRPC) with OTEL_EXPORTER_OTLP_ENDPOINT
 * pointed at a real OTLP/HTTP receiver on loopback (http/json, so the test reads the spans). Chat requests from
 * the `openai` client, against fake providers, must give the span tree gateway request → core RPC (also the chat
 * request's span, with its GenAI attributes) → one span per upstream attempt, in one trace that continues the caller's `traceparent`, with the GenAI
 * attributes, and nothing secret (keys, the prompt, the answer) anywhere in what was exported. Also the
 * per-provider/model Prometheus series the same requests feed. `serve` runs on SQLite, the split pair on PostgreSQL.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config.js";
import { bootstrap } from "../../../src/core/identity/bootstrap.js";
import { createLogger } from "../../../src/log.js";
import { startCoreProcess, startServe, startSplitGateway, type RunningProcess } from "../../../src/server.js";
import { createTestPgDatabase } from "../../helpers/db.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import { defaultScript, type FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "../../helpers/otlp-receiver.js";
import { waitFor } from "../../helpers/wait.js";

const PROMPT = "tell me the secret word: pelican-7731";
const GROQ_KEY = "gsk-trace-secret-groq-key";
const OPENAI_KEY = "sk-trace-secret-openai-key";
const SERVED_MODEL = "groq/llama-3.3-70b-versatile";
const CHAT_RPC = "portico.chat.v1.ChatService/CreateChatCompletion";
const STREAM_RPC = "portico.chat.v1.ChatService/StreamChatCompletion";

const SERVER = 2;
const CLIENT = 3;
const ERROR = 2;

const hex = (bytes: number) => randomBytes(bytes).toString("hex");

function quietLogger() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { logger: createLogger({ level: "info", destination: sink }), lines };
}

/**
 * The spans of one chat request's trace once its attempt spans and the gateway's request span have arrived: the
 * gateway's HTTP span, the core's RPC span (also the chat request's span: named `chat <model>`, with the GenAI
 * attributes) and one span per attempt.
 */
async function chatTrace(receiver: OtlpReceiver, traceId: () => string | undefined, attempts: number, rpc: string, route = "/api/v1/chat/completions") {
  const seen = () => receiver.spans.filter((s) => s.traceId === traceId()).map((s) => `${s.name} (kind ${s.kind}, route ${String(s.attributes["http.route"])})`);
  return waitFor(() => `the spans of trace ${traceId()} (gateway, ${rpc}, ${attempts} attempt(s)); seen: ${seen().join(", ") || "none"}`, () => {
    const id = traceId();
    const spans = receiver.spans.filter((s) => (id ? s.traceId === id : false));
    const gateway = spans.find((s) => s.kind === SERVER && s.attributes["http.route"] === route);
    const core = spans.find((s) => s.kind === SERVER && `${String(s.attributes["rpc.service"])}/${String(s.attributes["rpc.method"])}` === rpc);
    // Portico's own (scope `portico`): an instrumented client (the Anthropic SDK) makes GenAI spans of its own.
    const tried = spans.filter((s) => s.scope === "portico" && s.kind === CLIENT && s.attributes["gen_ai.operation.name"] === "chat");
    if (!gateway || !core || tried.length < attempts) return undefined;
    tried.sort((a, b) => Number(a.attributes["portico.attempt"]) - Number(b.attributes["portico.attempt"]));
    return { gateway, core, attempts: tried };
  });
}

/** gateway → core (the chat request) → attempts, one trace; the core's span names the request. */
function expectTree(t: { gateway: ReceivedSpan; core: ReceivedSpan; attempts: ReceivedSpan[] }) {
  expect(t.core.parentSpanId).toBe(t.gateway.spanId);
  for (const a of t.attempts) expect(a.parentSpanId).toBe(t.core.spanId);
  const ids = new Set([t.gateway, t.core, ...t.attempts].map((s) => s.traceId));
  expect(ids.size).toBe(1);
  expect(t.core.scope).toBe("portico");
  expect(t.core.attributes["gen_ai.operation.name"]).toBe("chat");
  expect(t.core.name).toBe(`chat ${String(t.core.attributes["gen_ai.request.model"])}`);
  expect(t.core.attributes["rpc.system"]).toBe("connect_rpc");
}

function expectServedAttempt(a: ReceivedSpan) {
  expect(a.name).toBe("chat llama-3.3-70b-versatile");
  expect(a.attributes).toMatchObject({
    "gen_ai.provider.name": "groq",
    "gen_ai.request.model": "llama-3.3-70b-versatile",
    "portico.catalog_model": "meta-llama/llama-3.3-70b-instruct",
    "portico.attempt.outcome": "served",
    "portico.credential_source": "byok",
  });
  expect(typeof a.attributes["gen_ai.response.model"]).toBe("string");
  expect(a.attributes["gen_ai.usage.input_tokens"]).toBeGreaterThan(0);
  expect(a.attributes["gen_ai.usage.output_tokens"]).toBeGreaterThan(0);
  expect(a.attributes["portico.cost.usd"]).toBeGreaterThan(0);
  expect(a.statusCode).not.toBe(ERROR);
  // An attribute of the conventions' older name is not sent beside gen_ai.provider.name.
  expect(a.attributes["gen_ai.system"]).toBeUndefined();
}

/** Nothing secret in any export: keys (the caller's and the providers'), the prompt, the answer. */
function expectNoSecrets(receiver: OtlpReceiver, secrets: string[]) {
  const everything = receiver.exports.map((e) => e.body.toString("utf8")).join("\n");
  for (const s of secrets) expect(everything).not.toContain(s);
}

async function addKeys(gatewayUrl: string, managementKey: string) {
  for (const [provider, key] of [["groq", GROQ_KEY], ["openai", OPENAI_KEY], ["together", "tg-trace-secret-key"]] as const) {
    const res = await fetch(`${gatewayUrl}/api/v1/byok`, {
      method: "POST",
      headers: { authorization: `Bearer ${managementKey}`, "content-type": "application/json" },
      body: JSON.stringify({ provider, key }),
    });
    expect(res.status).toBe(200);
  }
}

describe("tracing over OTLP", () => {
  let receiver: OtlpReceiver;
  let ok: FakeUpstream;
  let down: FakeUpstream;
  let broken: FakeUpstream;
  const dirs: string[] = [];

  const env = (protocol: "http/json" | "http/protobuf" = "http/json"): Record<string, string> => {
    const dir = mkdtempSync(join(tmpdir(), "portico-trace-"));
    dirs.push(dir);
    return {
      PORTICO_DATA_DIR: dir,
      HOST: "127.0.0.1",
      PORT: "0",
      PORTICO_GRPC_PORT: "0",
      PORTICO_EMBEDDED_HOST: "false",
      PORTICO_PROVIDER_GROQ_BASE_URL: `${ok.url}/v1`,
      PORTICO_PROVIDER_OPENAI_BASE_URL: `${down.url}/v1`,
      PORTICO_PROVIDER_TOGETHER_BASE_URL: `${broken.url}/v1`,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
      OTEL_EXPORTER_OTLP_HEADERS: "x-collector-token=trace%20token",
      OTEL_SERVICE_NAME: "portico-test",
      OTEL_BSP_SCHEDULE_DELAY: "50",
    };
  };

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    ok = await startFakeOpenAI();
    down = await startFakeOpenAI(defaultScript(), { failStatus: 500, failMessage: "upstream is down" });
    broken = await startFakeOpenAI(defaultScript(), { failAfterChunks: 1 });
  });
  afterAll(async () => {
    await Promise.all([ok, down, broken, receiver].map((f) => f?.close()));
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  describe("portico serve (core and gateway in one process)", () => {
    let proc: RunningProcess;
    let client: OpenAI;
    let apiKey: string;
    let managementKey: string;

    beforeAll(async () => {
      proc = await startServe(loadConfig(env()), quietLogger().logger);
      const boot = await bootstrap(proc.database!.db, []);
      apiKey = boot.api_key!;
      managementKey = boot.management_key!;
      await addKeys(proc.gatewayUrl!, managementKey);
      client = new OpenAI({ baseURL: `${proc.gatewayUrl}/api/v1`, apiKey, maxRetries: 0 });
    });
    afterAll(async () => {
      await proc?.close();
    });

    it("continues an incoming traceparent: gateway → core RPC (the chat request) → one span per attempt, GenAI attributes, no secrets", async () => {
      const traceId = hex(16);
      const parentId = hex(8);
      const res = await client.chat.completions.create(
        { model: "openai/gpt-4o", models: [SERVED_MODEL], messages: [{ role: "user", content: PROMPT }] } as never,
        { headers: { traceparent: `00-${traceId}-${parentId}-01` } },
      );
      expect((res as OpenAI.Chat.Completions.ChatCompletion).choices[0]!.message.content).toBe("Hello, world");

      const t = await chatTrace(receiver, () => traceId, 2, CHAT_RPC);
      expectTree(t);
      expect(t.gateway.parentSpanId).toBe(parentId);
      expect(t.gateway.name).toBe("POST /api/v1/chat/completions");
      expect(t.gateway.attributes).toMatchObject({ "http.request.method": "POST", "url.path": "/api/v1/chat/completions", "http.response.status_code": 200 });
      expect(t.core.attributes).toMatchObject({ "rpc.service": "portico.chat.v1.ChatService", "rpc.method": "CreateChatCompletion" });
      // Three spans for the request: gateway, core, one per attempt.
      expect(receiver.spans.filter((s) => s.traceId === traceId)).toHaveLength(4);
      expect(t.gateway.resource["service.name"]).toBe("portico-test");

      const [failed, served] = t.attempts;
      expect(failed!.attributes).toMatchObject({
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "portico.attempt": 1,
        "portico.attempt.outcome": "failed",
        "http.response.status_code": 500,
        "error.type": "500",
      });
      expect(failed!.statusCode).toBe(ERROR);
      expect(served!.attributes["portico.attempt"]).toBe(2);
      expectServedAttempt(served!);

      expect(t.core.attributes).toMatchObject({
        "gen_ai.provider.name": "groq",
        "gen_ai.request.model": "openai/gpt-4o",
        "portico.attempts": 2,
        "portico.status": "success",
        "portico.streamed": false,
        "rpc.method": "CreateChatCompletion",
      });
      // Tokens, cost and the response model are the served attempt's, on its span only (a back end summing a
      // trace's gen_ai.usage counts the call once).
      for (const k of ["gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "portico.cost.usd", "gen_ai.response.model", "portico.catalog_model", "gen_ai.system"]) expect(t.core.attributes[k]).toBeUndefined();
      // The caller's model name is the request's (gen_ai.request.model above), not repeated on each attempt.
      for (const a of t.attempts) expect(a.attributes["portico.requested_model"]).toBeUndefined();
      expect(t.core.attributes["portico.generation_id"]).toBe(res.id);

      // The exporter sent the configured headers, as OTLP/JSON.
      const exp = receiver.exports.find((e) => e.path === "/v1/traces")!;
      expect(exp.contentType).toMatch(/^application\/json/);
      expect(exp.headers["x-collector-token"]).toBe("trace token");
      expectNoSecrets(receiver, [apiKey, managementKey, GROQ_KEY, OPENAI_KEY, PROMPT, "pelican-7731", "Hello, world"]);
    });

    it("a stream: a new trace rooted at the gateway, the served attempt carrying the stream's usage", async () => {
      const stream = await client.chat.completions.create({ model: SERVED_MODEL, messages: [{ role: "user", content: PROMPT }], stream: true });
      let id = "";
      let text = "";
      for await (const chunk of stream) {
        id = chunk.id;
        text += chunk.choices[0]?.delta?.content ?? "";
      }
      expect(text).toBe("Hello, world");
      const traceOf = () => receiver.spans.find((s) => s.attributes["portico.generation_id"] === id)?.traceId;
      const t = await chatTrace(receiver, traceOf, 1, STREAM_RPC);
      expectTree(t);
      expect(t.gateway.parentSpanId).toBe("");
      expectServedAttempt(t.attempts[0]!);
      expect(t.core.attributes["portico.streamed"]).toBe(true);
      expect(t.core.attributes["portico.time_to_first_token_ms"]).toBeGreaterThan(0);
      expectNoSecrets(receiver, [apiKey, GROQ_KEY, PROMPT, "Hello, world"]);
    });

    it("the Messages dialect (@anthropic-ai/sdk, itself traced in this process): the SDK's client span is the parent", async () => {
      const anthropic = new Anthropic({ baseURL: `${proc.gatewayUrl}/api`, apiKey, maxRetries: 0 });
      const msg = await anthropic.messages.create({ model: SERVED_MODEL, max_tokens: 10, messages: [{ role: "user", content: PROMPT }] });
      expect(msg.content[0]).toMatchObject({ type: "text", text: "Hello, world" });
      const traceOf = () => receiver.spans.find((s) => s.attributes["http.route"] === "/api/v1/messages")?.traceId;
      const t = await chatTrace(receiver, traceOf, 1, "portico.chat.v1.ChatService/CreateMessage", "/api/v1/messages");
      expectTree(t);
      // The SDK made a client span with the global tracer provider and sent its traceparent: the gateway continued it.
      const sdkSpan = await waitFor("the SDK's span", () => receiver.spans.find((s) => s.spanId === t.gateway.parentSpanId));
      expect(sdkSpan.traceId).toBe(t.gateway.traceId);
      expectServedAttempt(t.attempts[0]!);
      expectNoSecrets(receiver, [apiKey, GROQ_KEY, PROMPT, "Hello, world"]);
    });

    it("an error the caller gets: the chat span's status and error.type name it", async () => {
      const traceId = hex(16);
      const err = await client.chat.completions
        .create({ model: "openai/gpt-4o", messages: [{ role: "user", content: PROMPT }] }, { headers: { traceparent: `00-${traceId}-${hex(8)}-01` } })
        .catch((e: unknown) => e);
      expect((err as { status?: number }).status).toBe(502);
      const t = await chatTrace(receiver, () => traceId, 1, CHAT_RPC);
      expectTree(t);
      expect(t.core.statusCode).toBe(ERROR);
      expect(t.core.attributes["error.type"]).toBe("upstream_failed");
      expect(t.gateway.attributes["http.response.status_code"]).toBe(502);
      expect(t.gateway.statusCode).toBe(ERROR);
      expect(t.attempts[0]!.attributes["portico.attempt.outcome"]).toBe("failed");
    });

    it("a stream the provider breaks after its first chunk: the served attempt and the request end in error", async () => {
      const stream = await client.chat.completions.create({ model: "together/some-model", messages: [{ role: "user", content: PROMPT }], stream: true });
      let id = "";
      // The client throws on the error chunk the stream ends with.
      const err = await (async () => {
        for await (const chunk of stream) id = chunk.id;
      })().catch((e: unknown) => e);
      expect(String(err)).toMatch(/mid-stream/);
      expect(id).toMatch(/^gen-/);
      const traceOf = () => receiver.spans.find((s) => s.attributes["portico.generation_id"] === id)?.traceId;
      const t = await chatTrace(receiver, traceOf, 1, STREAM_RPC);
      expectTree(t);
      expect(t.attempts[0]!.attributes).toMatchObject({ "gen_ai.provider.name": "together", "portico.attempt.outcome": "served", "error.type": "stream_error" });
      expect(t.attempts[0]!.statusCode).toBe(ERROR);
      expect(t.core.attributes).toMatchObject({ "portico.status": "error", "error.type": "stream_error" });
      expect(t.core.statusCode).toBe(ERROR);
      expectNoSecrets(receiver, ["tg-trace-secret-key", PROMPT]);
    });

    it("a path no route matches: the gateway's span is named by the method alone, without http.route", async () => {
      const traceId = hex(16);
      const res = await fetch(`${proc.gatewayUrl}/api/v1/no-such-route?x=1`, { headers: { traceparent: `00-${traceId}-${hex(8)}-01` } });
      expect(res.status).toBe(404);
      const span = await waitFor("the 404's span", () => receiver.spans.find((s) => s.traceId === traceId));
      expect(span.name).toBe("GET");
      expect(span.attributes["http.route"]).toBeUndefined();
      expect(span.attributes["url.path"]).toBe("/api/v1/no-such-route");
      expect(span.attributes["http.response.status_code"]).toBe(404);
    });

    it("a caller's traceparent that is not sampled: no span anywhere (gateway, core, chat, attempts), and no new trace started below it", async () => {
      const body = { model: SERVED_MODEL, messages: [{ role: "user" as const, content: PROMPT }] };
      const unsampled = hex(16);
      const skipped = await client.chat.completions.create(body, { headers: { traceparent: `00-${unsampled}-${hex(8)}-00` } });
      // A sampled request after it: once its spans arrived, the first one's would have too (one queue, in order).
      const sampled = hex(16);
      const traced = await client.chat.completions.create(body, { headers: { traceparent: `00-${sampled}-${hex(8)}-01` } });
      await chatTrace(receiver, () => sampled, 1, CHAT_RPC);
      expect(receiver.spans.filter((s) => s.traceId === unsampled)).toEqual([]);
      // Nor a root of its own further down (its chat span names the generation).
      expect(receiver.spans.filter((s) => s.attributes["portico.generation_id"] === skipped.id)).toEqual([]);
      expect(receiver.spans.filter((s) => s.attributes["portico.generation_id"] === traced.id)).toHaveLength(1);
    });

    it("a response cache hit: the chat span says so and has no attempt span; the hit is counted", async () => {
      const body = { model: SERVED_MODEL, messages: [{ role: "user", content: `${PROMPT} (cached)` }], cache: { ttl_seconds: 60 } } as never;
      await client.chat.completions.create(body);
      const traceId = hex(16);
      const res = await client.chat.completions.create(body, { headers: { traceparent: `00-${traceId}-${hex(8)}-01` } });
      const t = await waitFor("the cache hit's chat span", () => {
        const chat = receiver.spans.find((s) => s.traceId === traceId && s.attributes["rpc.method"] === "CreateChatCompletion");
        return chat?.attributes["portico.generation_id"] === (res as { id: string }).id ? chat : undefined;
      });
      expect(t.attributes).toMatchObject({ "portico.cache": "hit", "portico.attempts": 0, "portico.status": "success" });
      expect(receiver.spans.filter((s) => s.traceId === traceId && s.kind === CLIENT && s.scope === "portico")).toEqual([]);
    });

    it("Prometheus: per provider and catalog model, requests, errors, latency, time to first token, tokens and cost", async () => {
      const res = await fetch(`${proc.gatewayUrl}/metrics`);
      const text = await res.text();
      const value = (prefix: string) => {
        const line = text.split("\n").find((l) => l.startsWith(prefix));
        return line ? Number(line.split(" ").at(-1)) : undefined;
      };
      const served = 'provider="groq",model="meta-llama/llama-3.3-70b-instruct"';
      expect(value(`portico_generations_total{${served},status="success"}`)).toBeGreaterThanOrEqual(2);
      expect(value(`portico_generation_errors_total{provider="none",model="none",code="502"}`)).toBeGreaterThanOrEqual(1);
      expect(value(`portico_generation_duration_seconds_count{${served}}`)).toBeGreaterThanOrEqual(2);
      expect(value(`portico_generation_time_to_first_token_seconds_count{${served}}`)).toBeGreaterThanOrEqual(1);
      expect(value(`portico_generation_tokens_total{${served},kind="input"}`)).toBeGreaterThan(0);
      expect(value(`portico_generation_tokens_total{${served},kind="output"}`)).toBeGreaterThan(0);
      expect(value(`portico_generation_cost_usd_total{${served},paid_by="byok"}`)).toBeGreaterThan(0);
      expect(value(`portico_generation_cache_hits_total{${served}}`)).toBe(1);
      // The failed attempts by reason: openai's upstream answered 500 (an outage) to the fallback request and to the
      // request that failed; nothing failed on groq.
      expect(value(`portico_generation_attempt_failures_total{provider="openai",model="openai/gpt-4o",reason="outage"}`)).toBeGreaterThanOrEqual(2);
      expect(text.split("\n").filter((l) => l.startsWith(`portico_generation_attempt_failures_total{provider="groq"`))).toEqual([]);
    });
  });

  // Exported as OTLP/protobuf (Portico's span encoder, src/lib/otlp-trace-encoder.ts), which the receiver decodes.
  describe("split core and gateway (real gRPC between them), on PostgreSQL, exported as http/protobuf", () => {
    let core: RunningProcess;
    let gateway: RunningProcess;
    let client: OpenAI;
    let apiKey: string;
    let pg: Awaited<ReturnType<typeof createTestPgDatabase>>;

    beforeAll(async () => {
      pg = await createTestPgDatabase();
      const cfg = loadConfig({ ...env("http/protobuf"), DATABASE_URL: pg.url });
      const { logger } = quietLogger();
      core = await startCoreProcess(cfg, logger);
      gateway = await startSplitGateway(cfg, logger, core.coreServer!.url);
      const boot = await bootstrap(core.database!.db, []);
      apiKey = boot.api_key!;
      await addKeys(gateway.gatewayUrl!, boot.management_key!);
      client = new OpenAI({ baseURL: `${gateway.gatewayUrl}/api/v1`, apiKey, maxRetries: 0 });
    });
    afterAll(async () => {
      await gateway?.close();
      await core?.close();
      await pg?.drop();
    });

    it("the trace context crosses the gRPC call: one trace, the core's spans children of the gateway's", async () => {
      const traceId = hex(16);
      const parentId = hex(8);
      const res = await client.chat.completions.create(
        { model: SERVED_MODEL, messages: [{ role: "user", content: PROMPT }] },
        { headers: { traceparent: `00-${traceId}-${parentId}-01` } },
      );
      expect(res.choices[0]!.message.content).toBe("Hello, world");
      const t = await chatTrace(receiver, () => traceId, 1, CHAT_RPC);
      expectTree(t);
      expect(t.gateway.parentSpanId).toBe(parentId);
      expect(t.gateway.attributes).toMatchObject({ "http.request.method": "POST", "url.path": "/api/v1/chat/completions", "http.response.status_code": 200 });
      expect(t.gateway.resource["service.name"]).toBe("portico-test");
      expectServedAttempt(t.attempts[0]!);
      expect(t.attempts[0]!.attributes["gen_ai.response.finish_reasons"]).toEqual(["stop"]);
      expect(t.core.attributes).toMatchObject({ "gen_ai.provider.name": "groq", "gen_ai.request.model": SERVED_MODEL, "portico.attempts": 1, "portico.status": "success", "portico.streamed": false });
      expect(t.core.attributes["portico.generation_id"]).toBe(res.id);
      // The spans came as OTLP/protobuf, with the configured headers.
      const exp = receiver.exports.find((e) => e.contentType.startsWith("application/x-protobuf") && e.body.includes(Buffer.from(traceId, "hex")))!;
      expect(exp.path).toBe("/v1/traces");
      expect(exp.headers["x-collector-token"]).toBe("trace token");
      expectNoSecrets(receiver, [apiKey, GROQ_KEY, PROMPT, "Hello, world"]);
    });
  });
});
