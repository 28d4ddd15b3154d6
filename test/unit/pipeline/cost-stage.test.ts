/** The cost stage without a server: what it puts on the usage, on the tracking, and what it leaves alone. */
import { describe, expect, it } from "vitest";
import { createCostStage } from "../../../src/core/chat/pipeline/cost.js";
import { newCall, type Attempt, type ChatOutcome } from "../../../src/core/chat/pipeline/stage.js";
import { createCatalog } from "../../../src/core/catalog/catalog.js";
import { BUILTIN_CATALOG } from "../../../src/core/catalog/builtin-catalog.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest, StreamEvent } from "../../../src/core/chat/model.js";
import type { ProviderAdapter } from "../../../src/core/chat/providers/index.js";

const caller = { keyId: "k", keyHash: "h".repeat(64), keyLabel: "k", organizationId: "o", workspaceId: "w", userId: "u", isManagement: false, internsProgramme: false } as Caller;
const stage = createCostStage({ catalog: createCatalog(BUILTIN_CATALOG) });
const usage = { prompt_tokens: 1000, completion_tokens: 100, total_tokens: 1100, prompt_tokens_details: { cached_tokens: 0 } };

function servedCall(model: string, upstream: string, source: "byok" | "shared") {
  const request = { model, messages: [{ role: "user", content: "hi" }] } as unknown as CanonicalRequest;
  const call = newCall(caller, new AbortController().signal, false, request);
  const provider = model.slice(0, model.indexOf("/"));
  const attempt: Attempt = {
    provider, requestedModel: model, credentialId: "c1", credentialSource: source, adapter: {} as ProviderAdapter,
    call: { model: upstream, body: request, baseUrl: "http://x", apiKey: "", signal: call.signal },
  };
  call.attempts.push(attempt);
  Object.assign(call.track, { provider, model, credentialId: "c1", credentialSource: source });
  return call;
}

describe("cost stage", () => {
  it("a completion: usage.cost, is_byok and cost_details; the cost on the tracking", async () => {
    const call = servedCall("openai/gpt-4o-mini", "gpt-4o-mini", "shared");
    const out = await stage.run(call, async () => ({ kind: "completion", completion: { id: "g", object: "chat.completion", created: 1, model: "m", choices: [], usage } }));
    // 1000 × $0.15/M + 100 × $0.60/M
    expect(out.kind === "completion" && out.completion.usage).toEqual({
      ...usage, cost: 0.00021, is_byok: false,
      cost_details: { upstream_inference_cost: 0.00021, upstream_inference_prompt_cost: 0.00015, upstream_inference_completions_cost: 0.00006 },
    });
    expect(call.track).toMatchObject({ catalogModel: "openai/gpt-4o-mini", cost: { femtoUsd: 210_000_000_000n, paidBy: "platform" } });
  });

  it("BYOK: paid by the customer's key, cost 0 on the wire, the price kept", async () => {
    const call = servedCall("anthropic/claude-sonnet-4", "claude-sonnet-4", "byok");
    const out = await stage.run(call, async () => ({ kind: "completion", completion: { id: "g", object: "chat.completion", created: 1, model: "m", choices: [], usage } }));
    expect(out.kind === "completion" && out.completion.usage).toMatchObject({ cost: 0, is_byok: true, cost_details: { upstream_inference_cost: 0.0045 } });
    expect(call.track.cost).toEqual({ femtoUsd: 4_500_000_000_000n, paidBy: "byok" });
  });

  it("a stream: only the event with usage is copied and priced; the others pass through as they are", async () => {
    const call = servedCall("openai/gpt-4o-mini", "gpt-4o-mini", "shared");
    const a: StreamEvent = { id: "g", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content: "x" }, finish_reason: null }] };
    const b: StreamEvent = { id: "g", object: "chat.completion.chunk", created: 1, model: "m", choices: [], usage };
    async function* events() {
      yield a;
      yield b;
    }
    const out = (await stage.run(call, async () => ({ kind: "stream", events: events() }))) as Extract<ChatOutcome, { kind: "stream" }>;
    const seen: StreamEvent[] = [];
    for await (const e of out.events) seen.push(e);
    expect(seen[0]).toBe(a);
    expect(seen[1]).not.toBe(b);
    expect(seen[1]!.usage).toMatchObject({ cost: 0.00021 });
    expect(b.usage).toBe(usage); // the upstream's object is not changed
  });

  it("uncatalogued: cost null, nothing on the tracking", async () => {
    const call = servedCall("openai/gpt-99", "gpt-99", "shared");
    const out = await stage.run(call, async () => ({ kind: "completion", completion: { id: "g", object: "chat.completion", created: 1, model: "m", choices: [], usage } }));
    expect(out.kind === "completion" && out.completion.usage).toEqual({ ...usage, cost: null });
    expect(call.track).toMatchObject({ catalogModel: null, cost: null });
  });

  it("the provider's native searches: priced at the endpoint's web_search, on the prompt side of cost_details", async () => {
    const call = servedCall("anthropic/claude-sonnet-4", "claude-sonnet-4", "shared");
    const searched = { ...usage, server_tool_use: { web_search_requests: 2 } };
    const out = await stage.run(call, async () => ({ kind: "completion", completion: { id: "g", object: "chat.completion", created: 1, model: "m", choices: [], usage: searched } }));
    // 1000 × $3/M + 100 × $15/M + 2 × $0.01
    expect(out.kind === "completion" && out.completion.usage).toEqual({
      ...searched, cost: 0.0245, is_byok: false,
      cost_details: { upstream_inference_cost: 0.0245, upstream_inference_prompt_cost: 0.023, upstream_inference_completions_cost: 0.0015 },
    });
    expect(call.track.cost).toEqual({ femtoUsd: 24_500_000_000_000n, paidBy: "platform" });
  });

  it("Portico's own searches (the web_search server tool's, track.porticoSearches) are counted, not priced at the provider's price", async () => {
    const call = servedCall("anthropic/claude-sonnet-4", "claude-sonnet-4", "shared");
    call.track.porticoSearches = 2;
    const searched = { ...usage, server_tool_use: { web_search_requests: 3 } };
    const out = await stage.run(call, async () => ({ kind: "completion", completion: { id: "g", object: "chat.completion", created: 1, model: "m", choices: [], usage: searched } }));
    // 1000 × $3/M + 100 × $15/M + 1 provider search × $0.01
    expect(out.kind === "completion" && out.completion.usage).toMatchObject({ server_tool_use: { web_search_requests: 3 }, cost: 0.0145 });
  });

  it("errors pass through untouched and leave no cost", async () => {
    const call = servedCall("openai/gpt-4o-mini", "gpt-4o-mini", "shared");
    await expect(stage.run(call, async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(call.track.cost).toBeNull();
  });
});
