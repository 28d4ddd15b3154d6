/**
 * Property-based fuzzing of the public surface, generated from what the service itself publishes:
 * every HTTP operation of the served OpenAPI document (bodies built from its request schemas, then
 * mutated with hostile values) and every gRPC method of the proto files (random and truncated bytes).
 *
 * Properties: no 5xx except documented, retryable upstream states (502/503/504 carrying a reason);
 * every error in the {error: {code, message, metadata?}} envelope with code = status; no secret
 * echoed. Used by test/integration/fuzz (a short run in CI) and `npm run fuzz` (the long run).
 */
import { readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import fc from "fast-check";
import type { Harness } from "../helpers/harness.js";

type Schema = { type?: string | string[]; properties?: Record<string, Schema>; items?: Schema; enum?: unknown[]; required?: string[] };

export interface Operation {
  method: string;
  template: string;
  params: string[];
  body?: Schema;
}

export interface Finding {
  request: string;
  status: number;
  problem: string;
}

const HOSTILE_STRINGS = [
  "\ud800", "a\udfffb", "\u0000", "x".repeat(5000), "../../etc/passwd", "%E0%A4%A", "'; DROP TABLE x; --", "😀", "\u202e",
  "pk-v1-" + "0".repeat(64), "null", "",
];

function deep(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { a: v };
  return v;
}

const hostile: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(...HOSTILE_STRINGS),
  fc.constantFrom(1e308, -1, 0, 2 ** 53 + 1, -0, 3.5, Number.MAX_SAFE_INTEGER),
  fc.constantFrom(deep(40), deep(200), [], {}, null, true),
  fc.jsonValue({ maxDepth: 3 }),
  fc.string({ unit: "binary", maxLength: 40 }),
);

function typesOf(s: Schema): string[] {
  return Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
}

/** A plausible value for a schema (right type, often valid), or a hostile one. */
function valueFor(s: Schema | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (!s || depth > 3) return hostile;
  const options: fc.Arbitrary<unknown>[] = [hostile];
  if (s.enum) options.push(fc.constantFrom(...s.enum));
  for (const t of typesOf(s)) {
    if (t === "string") options.push(fc.string({ maxLength: 30 }), fc.constantFrom("openai", "openai/gpt-4o", "user", "assistant", "system", "tool"));
    if (t === "integer") options.push(fc.integer({ min: -5, max: 200 }));
    if (t === "number") options.push(fc.double({ noNaN: true, min: -10, max: 10 }));
    if (t === "boolean") options.push(fc.boolean());
    if (t === "null") options.push(fc.constant(null));
    if (t === "array") options.push(fc.array(valueFor(s.items, depth + 1), { maxLength: 3 }));
    if (t === "object" && s.properties) options.push(objectFor(s, depth + 1));
  }
  return fc.oneof(...options);
}

function objectFor(s: Schema, depth = 0): fc.Arbitrary<Record<string, unknown>> {
  const props = Object.entries(s.properties ?? {});
  const model = Object.fromEntries(props.map(([k, v]) => [k, valueFor(v, depth)]));
  return fc
    .tuple(fc.record(model, { requiredKeys: [] }), fc.dictionary(fc.string({ maxLength: 12 }), hostile, { maxKeys: 2 }))
    .map(([known, extra]) => ({ ...extra, ...known }));
}

/** Chat-completion bodies that pass validation often enough to reach deeper code. */
const chatish = fc.record({
  model: fc.oneof(fc.constant("openai/gpt-4o"), hostile),
  messages: fc.oneof(
    fc.constant([{ role: "user", content: "hi" }]),
    fc.array(fc.record({ role: fc.constantFrom("system", "user", "assistant", "tool", "developer"), content: fc.oneof(fc.string({ maxLength: 20 }), hostile) }), { maxLength: 3 }),
    hostile,
  ),
  stream: fc.oneof(fc.constant(true), hostile),
  temperature: fc.oneof(fc.double({ min: 0, max: 2, noNaN: true }), hostile),
  session_id: fc.oneof(fc.string({ maxLength: 10 }), hostile),
}, { requiredKeys: [] });

export function operationsOf(doc: { paths: Record<string, Record<string, any>> }): Operation[] {
  const ops: Operation[] = [];
  for (const [template, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      ops.push({
        method: method.toUpperCase(),
        template,
        params: [...template.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!),
        body: op.requestBody?.content?.["application/json"]?.schema,
      });
    }
  }
  return ops;
}

const segment = fc.oneof(
  fc.constantFrom("x", "my-preset", "1", "0", "-1", "00000000-0000-4000-8000-000000000000", "%E0%A4%A", "%00", "..", "~", "a".repeat(300)),
  fc.string({ maxLength: 20 }).map((s) => encodeURIComponent(s.toWellFormed())),
  fc.uuid(),
);

/**
 * Identifiers that exist in the fuzzed service (an intern, a BYOK credential, a preset slug, a workspace, a
 * key hash, a session, a generation), so that path parameters and queries also reach the code behind the
 * lookup, not only its 404.
 */
export interface Known {
  segments: string[];
  queries: string[];
}

/** Runs `runs` random requests against one operation; returns what broke the properties. */
export async function fuzzOperation(h: Harness, op: Operation, runs: number, seed: number, known: Known = { segments: [], queries: [] }): Promise<Finding[]> {
  const findings: Finding[] = [];
  const secrets = [h.tenant.managementKey, h.tenant.apiKey, "sk-fuzz-secret-0123456789"];
  const bodyArb: fc.Arbitrary<string | undefined> = fc.oneof(
    { weight: 3, arbitrary: (op.body ? objectFor(op.body) : chatish).map((b) => safeJson(b)) },
    { weight: 2, arbitrary: chatish.map((b) => safeJson(b)) },
    { weight: 1, arbitrary: fc.string({ maxLength: 60 }) },
    { weight: 1, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.constant('{"provider":"openai","key":"sk-fuzz-secret-0123456789","name":"\\ud800"}') },
  );
  const auth = fc.constantFrom(h.tenant.managementKey, h.tenant.apiKey, "", "pk-v1-nope", "Basic x");
  const param = known.segments.length ? fc.oneof(segment, fc.constantFrom(...known.segments.map(encodeURIComponent))) : segment;
  const params = fc.tuple(...op.params.map(() => param));
  const queries = ["", "?offset=1&limit=2", "?limit=-1", "?offset=abc&workspace_id=%00", "?id=\ud800".toWellFormed(), ...known.queries];
  await fc.assert(
    fc.asyncProperty(auth, params, bodyArb, fc.constantFrom(...queries), async (key, values, body, query) => {
      let path = op.template;
      op.params.forEach((p, i) => (path = path.replace(`{${p}}`, values[i] as string)));
      const headers: Record<string, string> = {};
      if (key) headers.authorization = key.startsWith("Basic") ? key : `Bearer ${key}`;
      if (body !== undefined) headers["content-type"] = "application/json";
      const request = `${op.method} ${path}${query} ${body?.slice(0, 200) ?? ""}`;
      let res: Response;
      try {
        res = await fetch(`${h.baseUrl}${path}${query}`, { method: op.method, headers, ...(body !== undefined && op.method !== "GET" ? { body } : {}) });
      } catch (err) {
        findings.push({ request, status: 0, problem: `request failed: ${(err as Error).message}` });
        return;
      }
      const text = await res.text();
      // The envelope is the one of the route the request reaches: a parameter such as `..` moves it
      // (`/presets/../messages` is `/messages`, as fetch normalises the path).
      const reached = new URL(`${h.baseUrl}${path}`).pathname;
      const problem = judge(res.status, res.headers.get("content-type") ?? "", text, secrets, ANTHROPIC_DIALECT.test(reached) ? "anthropic" : OPENAI_DIALECT.test(reached) ? "openai" : "portico");
      if (problem) findings.push({ request, status: res.status, problem });
    }),
    { numRuns: runs, seed, endOnFailure: false },
  );
  return findings;
}

function safeJson(v: unknown): string {
  return JSON.stringify(v);
}

const RETRYABLE_5XX = new Set([502, 503, 504]);

/** The operations of the Anthropic Messages dialect answer errors in Anthropic's envelope (docs/dialects.md). */
const ANTHROPIC_DIALECT = /^\/api\/v1\/messages(\/|$)/;
/** The OpenAI Responses dialect answers errors in OpenAI's envelope `{error: {message, type, param, code}}`. */
const OPENAI_DIALECT = /^\/api\/v1\/responses$/;

/** Why a response breaks the properties, or undefined. `envelope`: the error shape the operation promises. */
export function judge(status: number, contentType: string, text: string, secrets: string[], envelope: "portico" | "anthropic" | "openai" = "portico"): string | undefined {
  for (const s of secrets) if (text.includes(s)) return "a secret was echoed";
  if (status >= 500 && !RETRYABLE_5XX.has(status)) return `status ${status}`;
  if (status >= 200 && status < 300) return undefined;
  if (contentType.startsWith("text/event-stream")) return undefined;
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    return "error body is not JSON";
  }
  if (envelope === "anthropic") {
    if (!body || body.type !== "error" || typeof body.error?.type !== "string" || typeof body.error?.message !== "string") return "error outside Anthropic's envelope";
    return undefined;
  }
  if (envelope === "openai") {
    if (!body || Object.keys(body).join() !== "error" || typeof body.error?.type !== "string" || typeof body.error?.message !== "string") return "error outside OpenAI's envelope";
    return undefined;
  }
  if (!body || typeof body !== "object" || Object.keys(body).join() !== "error") return "error outside the envelope";
  if (body.error.code !== status) return `envelope code ${body.error.code} differs from status ${status}`;
  if (typeof body.error.message !== "string") return "envelope without a message";
  if (RETRYABLE_5XX.has(status) && !(body.error.metadata?.reason && body.error.metadata.retryable === true)) return `${status} without a retryable reason`;
  return undefined;
}

const PROTO_ROOT = resolve(import.meta.dirname, "../../proto");
/** Every `portico/<domain>/v<n>/*_service.proto` of the contract (a new service is fuzzed without a change here). */
export function serviceFiles(): string[] {
  const root = resolve(PROTO_ROOT, "portico");
  return readdirSync(root, { recursive: true, encoding: "utf8" })
    .filter((f) => /_service\.proto$/.test(f))
    .sort();
}

/** Every gRPC method path (client-streaming ones excepted) with whether the server streams its response. */
export function grpcMethods(): Array<{ path: string; serverStream: boolean }> {
  const out: Array<{ path: string; serverStream: boolean }> = [];
  for (const file of serviceFiles()) {
    const def = protoLoader.loadSync(join(PROTO_ROOT, "portico", file), { includeDirs: [PROTO_ROOT] });
    for (const value of Object.values(def)) {
      if (typeof value !== "object" || value === null || "format" in value) continue;
      for (const m of Object.values(value as Record<string, protoLoader.MethodDefinition<unknown, unknown>>)) {
        if (m && typeof m.path === "string" && !m.requestStream) out.push({ path: m.path, serverStream: m.responseStream });
      }
    }
  }
  return out;
}

/** Sends random bytes as the request message of every method; INTERNAL or UNKNOWN is a finding. */
export async function fuzzGrpc(h: Harness, runs: number, seed: number): Promise<Finding[]> {
  const findings: Finding[] = [];
  const client = new grpc.Client(new URL(h.coreUrl).host, grpc.credentials.createInsecure());
  const methods = grpcMethods();
  try {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...methods), fc.uint8Array({ maxLength: 64 }), fc.constantFrom(h.tenant.managementKey, h.tenant.apiKey, ""), async (m, bytes, key) => {
        const md = new grpc.Metadata();
        if (key) md.set("authorization", `Bearer ${key}`);
        const code = await new Promise<number>((done) => {
          const id = (b: Buffer) => b;
          if (m.serverStream) {
            const call = client.makeServerStreamRequest(m.path, id, id, Buffer.from(bytes), md, { deadline: Date.now() + 10_000 });
            call.on("data", () => call.cancel());
            call.on("status", (s: grpc.StatusObject) => done(s.code));
            call.on("error", () => undefined);
          } else {
            client.makeUnaryRequest(m.path, id, id, Buffer.from(bytes), md, { deadline: Date.now() + 10_000 }, (err) => done(err ? err.code : 0));
          }
        });
        if (code === grpc.status.INTERNAL || code === grpc.status.UNKNOWN) {
          findings.push({ request: `${m.path} ${Buffer.from(bytes).toString("hex")}`, status: code, problem: `gRPC status ${grpc.status[code]}` });
        }
      }),
      { numRuns: runs, seed, endOnFailure: false },
    );
  } finally {
    client.close();
  }
  return findings;
}
