/**
 * A short fuzzing run of every public HTTP operation and gRPC method (the long run is `npm run fuzz`).
 * The seed is printed with any finding so a failure can be replayed with PORTICO_FUZZ_SEED.
 *
 * The operations are read from the served OpenAPI document and the gRPC services from proto/, so a new
 * one is fuzzed without a change here. Before fuzzing, the tenant gets one of each resource (a BYOK
 * credential, a preset, an intern and a session, a workspace, a key, a generation record) whose
 * identifiers are offered as path parameters and queries, and chat completions reach a fake provider.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashSecret } from "../../../src/core/identity/keys.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { createTestIntern } from "../interns/sse-client.js";
import { fuzzGrpc, fuzzOperation, grpcMethods, operationsOf, serviceFiles, type Known, type Operation } from "../../fuzz/public-surface.js";

const RUNS = Number(process.env.PORTICO_FUZZ_RUNS ?? 60);
const SEED = Number(process.env.PORTICO_FUZZ_SEED ?? Date.now() % 2 ** 31);
const PROVIDERS = (process.env.PORTICO_FUZZ_PROVIDERS ?? "sqlite").split(",") as Array<"sqlite" | "postgresql">;

describe.each(PROVIDERS)(`fuzzing the public surface on %s (seed ${SEED}, ${RUNS} runs per operation)`, (provider) => {
  let h: Harness;
  let fake: FakeUpstream;
  let ops: Operation[] = [];
  const known: Known = { segments: [], queries: [] };
  beforeAll(async () => {
    fake = await startFakeOpenAI({ text: ["fuzzed ", "answer"], finish: "stop", usage: { input: 2, output: 2 } });
    h = await startHarness({ provider, env: { PORTICO_INTERN_RATE_LIMIT: "1000000", PORTICO_PROVIDER_OPENAI_BASE_URL: `${fake.url}/v1` } });
    ops = operationsOf((await api(h, "GET", "/openapi.json")).json);
    const key = h.tenant.managementKey;
    const byok = await api(h, "POST", "/byok", { key, body: { provider: "openai", key: "sk-fuzz-secret-0123456789" } });
    const preset = await api(h, "POST", "/presets/my-preset/chat/completions", { key, body: { model: "openai/gpt-4o", messages: [{ role: "user", content: "x" }] } });
    const workspace = await api(h, "POST", "/workspaces", { key, body: { name: "fuzzed", slug: "fuzzed" } });
    const apiKey = await api(h, "POST", "/keys", { key, body: { name: "fuzzed" } });
    const chat = await api(h, "POST", "/chat/completions", { key, body: { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }] } });
    for (const [what, res] of Object.entries({ byok, preset, workspace, apiKey, chat })) expect([200, 201], `${what}: ${res.text}`).toContain(res.status);
    const { internId } = await createTestIntern(h);
    known.segments.push(
      byok.json.data.id,
      "my-preset",
      workspace.json.data.id,
      hashSecret(apiKey.json.key),
      internId,
      h.tenant.workspaceId,
      "fuzz-session",
      String(preset.json.data.designated_version.version),
    );
    known.queries.push(`?id=${encodeURIComponent(chat.json.id)}`, `?workspace_id=${workspace.json.data.id}`, "?provider=openai&limit=1");
  });
  afterAll(async () => {
    await h?.close();
    await fake?.close();
  });

  it("every HTTP operation answers in the envelope, without 5xx or echoed secrets", async () => {
    expect(ops.length).toBeGreaterThanOrEqual(42);
    const findings = [];
    for (const op of ops) findings.push(...(await fuzzOperation(h, op, RUNS, SEED, known)));
    expect(findings, `seed ${SEED}`).toEqual([]);
  }, 3_600_000);

  it("every gRPC method refuses random bytes without INTERNAL or UNKNOWN", async () => {
    expect(serviceFiles().length).toBeGreaterThanOrEqual(13);
    expect(grpcMethods().length).toBeGreaterThanOrEqual(45);
    expect(await fuzzGrpc(h, RUNS * 4, SEED), `seed ${SEED}`).toEqual([]);
  }, 3_600_000);
});
