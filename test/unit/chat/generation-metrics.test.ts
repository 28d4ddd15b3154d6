/**
 * The per-provider/model Prometheus series (src/core/chat/generation-metrics.ts): labels stay bounded (a model the
 * catalog does not know is `uncatalogued`, nothing served is `none`), a cache hit counts as a hit and not again as
 * provider tokens or cost, and the record always reaches the recorder behind.
 */
import { describe, expect, it } from "vitest";
import { createMetrics } from "../../../src/lib/metrics.js";
import { withGenerationMetrics } from "../../../src/core/chat/generation-metrics.js";
import type { GenerationRecord } from "../../../src/core/chat/seams.js";

function record(over: Partial<GenerationRecord>): GenerationRecord {
  return {
    id: "gen-1",
    organizationId: "o",
    workspaceId: "w",
    keyHash: "k",
    requestedModel: "groq/whatever-a-caller-typed",
    model: "groq/whatever-a-caller-typed",
    provider: "groq",
    credentialId: "c",
    credentialSource: "byok",
    presetSlug: null,
    presetVersion: null,
    streamed: false,
    promptTokens: 10,
    completionTokens: 5,
    totalTokens: 15,
    latencyMs: 120,
    timeToFirstTokenMs: null,
    status: "success",
    finishReason: "stop",
    errorCode: null,
    attempts: 1,
    createdAt: new Date(),
    cachedTokens: null,
    cacheWriteTokens: null,
    reasoningTokens: null,
    costFemtoUsd: null,
    upstreamCostFemtoUsd: null,
    catalogModel: null,
    ...over,
  };
}

describe("generation metrics", () => {
  it("bounded labels, hits apart, every record passed on", async () => {
    const metrics = createMetrics();
    const seen: string[] = [];
    const recorder = withGenerationMetrics({ record: (r) => seen.push(r.id) }, metrics);
    recorder.record(record({ id: "a" }));
    recorder.record(record({ id: "b", catalogModel: "meta-llama/llama-3.3-70b-instruct", upstreamCostFemtoUsd: 2_500_000_000_000n, timeToFirstTokenMs: 40, streamed: true }));
    recorder.record(record({ id: "c", catalogModel: "meta-llama/llama-3.3-70b-instruct", cacheHit: true, upstreamCostFemtoUsd: 0n }));
    recorder.record(record({ id: "d", provider: null, model: null, status: "error", errorCode: 502, promptTokens: null, completionTokens: null }));
    expect(seen).toEqual(["a", "b", "c", "d"]);
    const text = await metrics.render();
    const value = (series: string) => Number(text.split("\n").find((l) => l.startsWith(series))?.split(" ").at(-1));
    expect(value('portico_generations_total{provider="groq",model="uncatalogued",status="success"}')).toBe(1);
    expect(text).not.toContain("whatever-a-caller-typed");
    const llama = 'provider="groq",model="meta-llama/llama-3.3-70b-instruct"';
    expect(value(`portico_generations_total{${llama},status="success"}`)).toBe(2);
    expect(value(`portico_generation_tokens_total{${llama},kind="input"}`)).toBe(10);
    expect(value(`portico_generation_cache_hits_total{${llama}}`)).toBe(1);
    expect(value(`portico_generation_cost_usd_total{${llama},paid_by="byok"}`)).toBeCloseTo(0.0025);
    expect(value(`portico_generation_time_to_first_token_seconds_count{${llama}}`)).toBe(1);
    expect(value('portico_generation_errors_total{provider="none",model="none",code="502"}')).toBe(1);
  });
});
