/**
 * The live figures of `/api/v1/models/{author}/{slug}/endpoints` (docs/catalog.md, "Live figures"): chat
 * requests routed to one endpoint of a catalog model through a fake provider make that endpoint list its
 * latency and throughput percentiles and sample count, as the same core process's routing recorded them; an
 * endpoint that served nothing lists null. Over HTTP, gRPC and @openrouter/sdk. SQLite and PostgreSQL.
 */
import OpenAI from "openai";
import { OpenRouter } from "@openrouter/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, startHarness, type Harness } from "../../helpers/harness.js";
import { startFakeOpenAI } from "../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../helpers/fake-upstreams/server.js";
import { bearer, grpcClient } from "../../helpers/grpc.js";
import { waitFor } from "../../helpers/wait.js";

const LLAMA = "meta-llama/llama-3.3-70b-instruct";

describe.each(["sqlite", "postgresql"] as const)("endpoints' live figures (%s)", (provider) => {
  let h: Harness;
  let up: FakeUpstream;

  beforeAll(async () => {
    up = await startFakeOpenAI({ text: ["Hi", " there"], finish: "stop", usage: { input: 20, output: 40 } });
    h = await startHarness({ provider, env: { PORTICO_PROVIDER_GROQ_BASE_URL: `${up.url}/v1` } });
    const res = await api(h, "POST", "/byok", { key: h.tenant.managementKey, body: { provider: "groq", key: "gsk-test" } });
    expect(res.status, res.text).toBe(200);
  });
  afterAll(async () => {
    await h?.close();
    await up?.close();
  });

  const byProvider = (eps: Array<{ provider: string }>, p: string) => eps.find((e) => e.provider === p) as Record<string, any>;

  it("lists figures for the endpoint that served, null for one that did not", async () => {
    const before = (await api(h, "GET", `/models/${LLAMA}/endpoints`, { key: h.tenant.apiKey })).json.data.endpoints;
    expect(byProvider(before, "groq")).toMatchObject({ latency_last_30m: null, throughput_last_30m: null, live_samples: 0 });

    const client = new OpenAI({ baseURL: `${h.baseUrl}/api/v1`, apiKey: h.tenant.apiKey, maxRetries: 0 });
    const body = { model: LLAMA, messages: [{ role: "user" as const, content: "hello" }], provider: { only: ["groq"] } };
    await client.chat.completions.create(body as never);
    await client.chat.completions.create(body as never);
    const stream = await client.chat.completions.create({ ...body, stream: true } as never);
    for await (const _ of stream as unknown as AsyncIterable<unknown>) void _;
    expect(up.requests.length).toBe(3);

    // The record stage feeds the figures after the answer: wait for the third sample.
    let eps: Array<Record<string, any>> = [];
    await waitFor("three samples on the groq endpoint", async () => {
      eps = (await api(h, "GET", `/models/${LLAMA}/endpoints`, { key: h.tenant.apiKey })).json.data.endpoints;
      return byProvider(eps as never, "groq").live_samples === 3;
    });
    const groq = byProvider(eps as never, "groq");
    for (const k of ["p50", "p75", "p90", "p99"]) {
      expect(groq.throughput_last_30m[k]).toBeGreaterThan(0);
      expect(groq.latency_last_30m[k]).toBeGreaterThan(0);
    }
    expect(groq.throughput_last_30m.p50).toBeLessThanOrEqual(groq.throughput_last_30m.p99);
    expect(groq.latency_last_30m.p50).toBeLessThanOrEqual(groq.latency_last_30m.p99);
    expect(groq.live_window_seconds).toBeGreaterThan(0);
    expect(groq.uptime_last_30m).toBeNull();
    const unused = eps.find((e) => e.provider !== "groq")!;
    expect(unused).toMatchObject({ latency_last_30m: null, throughput_last_30m: null, live_samples: 0, live_window_seconds: null });

    // gRPC: the same figures (latency in milliseconds on both).
    const catalog = grpcClient("portico/catalog/v1/catalog_service.proto", "portico.catalog.v1.CatalogService", h.coreUrl);
    const res = await new Promise<any>((resolve, reject) => catalog.ListModelEndpoints({ slug: LLAMA }, bearer(h.tenant.apiKey), (err: Error | null, r: unknown) => (err ? reject(err) : resolve(r))));
    const g = byProvider(res.endpoints, "groq");
    expect(g.live).toMatchObject({ samples: 3, window_seconds: groq.live_window_seconds });
    expect(g.live.throughput.p50).toBeCloseTo(groq.throughput_last_30m.p50, 6);
    expect(g.live.latency_ms.p99).toBeCloseTo(groq.latency_last_30m.p99, 6);
    expect(byProvider(res.endpoints, unused.provider).live ?? null).toBeNull();

    // @openrouter/sdk parses the answer, figures included.
    const sdk = new OpenRouter({ apiKey: h.tenant.apiKey, serverURL: `${h.baseUrl}/api/v1` });
    const parsed = await sdk.endpoints.list({ author: "meta-llama", slug: "llama-3.3-70b-instruct" });
    const s = parsed.data.endpoints.find((e) => e.tag.startsWith("groq"))!;
    expect(s.throughputLast30m?.p50).toBeCloseTo(groq.throughput_last_30m.p50, 6);
    expect(s.latencyLast30m?.p75).toBeGreaterThan(0);
    expect(parsed.data.endpoints.find((e) => !e.tag.startsWith("groq"))?.latencyLast30m).toBeNull();
  });
});
