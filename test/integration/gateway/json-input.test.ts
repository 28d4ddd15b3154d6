/**
 * Lone surrogates and deep nesting are 400 naming the field, in every string field of every route, the
 * same in-process (`portico serve`) and split (gateway → core over gRPC), on SQLite and PostgreSQL.
 */
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildGateway } from "../../../src/gateway/app.js";
import { MAX_JSON_DEPTH } from "../../../src/contract/json-input.js";
import { createMetrics } from "../../../src/lib/metrics.js";
import { createLogger } from "../../../src/log.js";
import { startHarness, type Harness } from "../../helpers/harness.js";

const LONE = "\ud800";

/** JSON text of `depth` nested levels (built as text: JSON.stringify itself would overflow the stack). */
function nested(depth: number): string {
  let open = "";
  let close = "";
  for (let i = 0; i < depth; i++) {
    open += i % 2 ? "[" : '{"a":';
    close = (i % 2 ? "]" : "}") + close;
  }
  return `${open}"leaf"${close}`;
}

/** Bodies with a lone surrogate in one string field each (path, body, field named in the error). */
function surrogateCases(internSession: string): Array<{ name: string; path: string; body: unknown; field: string }> {
  const chat = { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }] };
  return [
    { name: "byok name", path: "/byok", body: { provider: "openai", key: "sk-test-1234567890", name: `n${LONE}` }, field: "name" },
    { name: "byok workspace_id", path: "/byok", body: { provider: "openai", key: "sk-test-1234567890", workspace_id: LONE }, field: "workspace_id" },
    { name: "byok allowed_models", path: "/byok", body: { provider: "openai", key: "sk-test-1234567890", allowed_models: ["a", LONE] }, field: "allowed_models[1]" },
    { name: "byok allowed_user_ids", path: "/byok", body: { provider: "openai", key: "sk-test-1234567890", allowed_user_ids: [LONE] }, field: "allowed_user_ids[0]" },
    { name: "preset system message", path: "/presets/p1/chat/completions", body: { ...chat, messages: [{ role: "system", content: `s${LONE}` }] }, field: "messages[0].content" },
    { name: "preset model", path: "/presets/p1/chat/completions", body: { ...chat, model: `m${LONE}` }, field: "model" },
    { name: "preset stop", path: "/presets/p1/chat/completions", body: { ...chat, stop: [LONE] }, field: "stop[0]" },
    { name: "ignored field", path: "/presets/p1/chat/completions", body: { ...chat, whatever: { deep: LONE } }, field: "whatever.deep" },
    { name: "object key", path: "/presets/p1/chat/completions", body: { ...chat, [`k${LONE}`]: 1 }, field: '["k\ufffd"]' },
    {
      name: "intern session_id",
      path: `/interns/${internSession}/chat/completions`,
      body: { stream: true, session_id: `s${LONE}`, messages: [{ role: "user", content: "hi" }] },
      field: "session_id",
    },
    {
      name: "intern tool_call_id",
      path: `/interns/${internSession}/chat/completions`,
      body: { stream: true, session_id: "s1", messages: [{ role: "tool", tool_call_id: `t${LONE}`, content: "allow_once" }] },
      field: "messages[0].tool_call_id",
    },
  ];
}

describe.each(["sqlite", "postgresql"] as const)("JSON input limits (%s)", (provider) => {
  let h: Harness;
  let split: FastifyInstance;
  let splitBase = "";
  beforeAll(async () => {
    h = await startHarness({ provider });
    split = await buildGateway({
      transport: createGrpcTransport({ baseUrl: h.coreUrl }),
      logger: createLogger({ level: "silent" }),
      metrics: createMetrics(),
      bodyLimitBytes: h.config.bodyLimitBytes,
      brand: h.config.brand,
    });
    await split.listen({ host: "127.0.0.1", port: 0 });
    const a = split.server.address();
    splitBase = `http://127.0.0.1:${typeof a === "object" && a ? a.port : 0}`;
  });
  afterAll(async () => {
    await split?.close();
    await h?.close();
  });

  const post = async (base: string, path: string, raw: string) => {
    const res = await fetch(`${base}/api/v1${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.tenant.managementKey}`, "content-type": "application/json" },
      body: raw,
    });
    return { status: res.status, json: (await res.json()) as any };
  };

  for (const topology of ["in-process", "split"] as const) {
    const base = () => (topology === "split" ? splitBase : h.baseUrl);

    it(`refuses a lone surrogate in every string field with 400 naming it (${topology})`, async () => {
      for (const c of surrogateCases("00000000-0000-4000-8000-000000000000")) {
        // JSON.stringify escapes a lone surrogate as \ud800, exactly as a hostile client would send it.
        const res = await post(base(), c.path, JSON.stringify(c.body));
        expect(res.status, c.name).toBe(400);
        expect(res.json.error.code, c.name).toBe(400);
        expect(res.json.error.metadata.field, c.name).toBe(c.field);
        expect(res.json.error.message, c.name).toContain("Unicode");
      }
    });

    it(`refuses nesting beyond ${MAX_JSON_DEPTH} levels with 400 and accepts it at the limit (${topology})`, async () => {
      const chat = { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }] };
      for (const depth of [MAX_JSON_DEPTH + 1, 100, 5_000, 100_000]) {
        for (const path of ["/presets/deep/chat/completions", "/byok", "/interns/00000000-0000-4000-8000-000000000000/chat/completions"]) {
          const res = await post(base(), path, JSON.stringify(chat).replace(/}$/, `,"ignored":${nested(depth)}}`));
          expect(res.status, `${path} at depth ${depth}`).toBe(400);
          expect(res.json.error.message).toContain(`deeper than ${MAX_JSON_DEPTH}`);
          expect(res.json.error.metadata.reason).toBe("bad_request");
        }
      }
      // The body is level 1, so `ignored` may hold MAX_JSON_DEPTH - 1 levels.
      const ok = await post(base(), "/presets/deep/chat/completions", JSON.stringify(chat).replace(/}$/, `,"ignored":${nested(MAX_JSON_DEPTH - 1)}}`));
      expect(ok.status, JSON.stringify(ok.json)).toBe(200);
    });
  }
});
