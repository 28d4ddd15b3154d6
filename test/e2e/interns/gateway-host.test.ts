/**
 * Interns through the gateway, end to end: a real core and gateway (harness) with a fake OpenAI-compatible
 * upstream behind them, a real intern host (createInternHost over the gRPC link) running the built-in agent
 * as a subprocess. The intern has a model, so each run's StartRun.gateway reaches the host; the built-in
 * agent's chat completions call goes through the host's model relay to Portico with the run token, is
 * served with the intern's model and becomes a generation of the run (whose usage is the run's). Runs once the core fills StartRun.gateway (src/core/interns/run-credentials.ts); skipped before.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createInternHost, type InternHost } from "../../../src/host/link.js";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { chat, chatBody, contentOf, createTestIntern, finalOf } from "../../integration/interns/sse-client.js";
import { REPO_ROOT } from "../../integration/host/helpers.js";
import { writeCatalogFile } from "../../helpers/catalog-file.js";

const MODEL = "acme/m1";

describe("the built-in agent behind a real host, through Portico's gateway", () => {
  let h: Harness;
  let upstream: FakeUpstream;
  let host: InternHost;
  let internId: string;
  let workRoot: string;
  const hostLog: string[] = [];

  beforeAll(async () => {
    upstream = await startFakeOpenAI();
    const catalogFile = writeCatalogFile([{ slug: MODEL, name: MODEL, endpoints: [{ provider: "acme", model_id: "m1", context_length: 100_000, pricing: { prompt: "0.000001", completion: "0.000002" } }] }]);
    h = await startHarness({
      env: {
        PORTICO_INTERN_START_TIMEOUT_MS: "30000",
        PORTICO_OPENAI_COMPATIBLE_PROVIDERS: `acme=${upstream.url}/v1`,
        PORTICO_KEYLESS_PROVIDERS: "acme",
        PORTICO_CATALOG_FILE: catalogFile,
      },
    });
    const created = await createTestIntern(h);
    internId = created.internId;
    const patched = await api(h, "PATCH", `/interns/${internId}`, { key: h.tenant.managementKey, body: { model: MODEL } });
    expect(patched.status, patched.text).toBe(200);
    workRoot = mkdtempSync(join(tmpdir(), "portico-host-gw-"));
    host = createInternHost({
      coreUrl: h.coreUrl,
      token: created.token,
      profile: {
        name: "portico-builtin",
        command: process.execPath,
        args: [join(REPO_ROOT, "bin/run-ts.mjs"), join(REPO_ROOT, "src/agent/builtin-main.ts")],
        inheritEnv: "minimal",
      },
      workRoot,
      logger: pino({ level: "debug" }, { write: (l: string) => void hostLog.push(l) }),
    });
    await host.ready;
  }, 120_000);
  afterAll(async () => {
    await host?.close();
    await h?.close();
    await upstream?.close();
    if (workRoot) rmSync(workRoot, { recursive: true, force: true });
  });

  it("answers a prompt with the intern's model through the relay; each call is a generation of its run; no run token in the host's log", async () => {
    const r = await chat(h, internId, chatBody("Say hello"), { key: h.tenant.apiKey });
    expect(r.status, r.raw).toBe(200);
    expect(contentOf(r.chunks)).toContain("Hello, world");
    const final = finalOf(r.chunks);

    // The upstream was asked for the intern's model, by Portico (not by the host).
    const calls = upstream.requests.filter((q) => q.url.includes("/chat/completions"));
    expect(calls).toHaveLength(1);
    expect(calls[0]!.body.model).toBe("m1");

    // One generation, linked to the intern, its run and session; the run's usage is its usage.
    const gens = (await api(h, "GET", `/generations?intern_id=${internId}`, { key: h.tenant.managementKey })).json.data as any[];
    expect(gens).toHaveLength(1);
    expect(gens[0]).toMatchObject({ intern_id: internId, intern_session_id: final.session_id, model: MODEL, status: "success" });
    expect(final.usage.total_tokens).toBeGreaterThan(0);
    expect(final.usage.cost).toBeCloseTo(gens[0].total_cost as number, 12);

    // A second prompt in the session: same agent, a new run token, the conversation carried.
    const r2 = await chat(h, internId, chatBody("Again", { session_id: final.session_id }), { key: h.tenant.apiKey });
    expect(r2.status, r2.raw).toBe(200);
    const calls2 = upstream.requests.filter((q) => q.url.includes("/chat/completions"));
    expect(calls2).toHaveLength(2);
    expect(calls2[1]!.body.messages.map((m: { role: string }) => m.role)).toEqual(["user", "assistant", "user"]);
    const runs = new Set(((await api(h, "GET", `/generations?intern_id=${internId}`, { key: h.tenant.managementKey })).json.data as any[]).map((g) => g.run_id));
    expect(runs.size).toBe(2);

    // Neither run token was logged by the host.
    expect(hostLog.join("")).toContain("relayed a model call");
    expect(hostLog.join("")).not.toMatch(/prt-v1-/);
  }, 120_000);
});
