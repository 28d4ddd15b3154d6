/**
 * Stage "spend" without a server: the reservation's bound includes the provider's native web search fees (an
 * Anthropic search up to `max_uses` times per provider request and per continuation of a paused turn; one grounded
 * answer on Gemini; one search call on an OpenAI search model), an Anthropic search without `max_uses` under a limit
 * is a 400 naming the field that asked for it, and a BYOK-served attempt reserves nothing.
 */
import { describe, expect, it } from "vitest";
import { ConnectError, Code } from "@connectrpc/connect";
import pino from "pino";
import { compose, newCall, type Attempt, type ChatStage } from "../../../src/core/chat/pipeline/stage.js";
import { createSpendStage } from "../../../src/core/chat/pipeline/spend.js";
import { maxCostOf, nativeSearchBound } from "../../../src/core/spend/max-cost.js";
import { femto } from "../../../src/core/catalog/cost.js";
import { ANTHROPIC_MAX_PAUSE_CONTINUATIONS } from "../../../src/core/chat/providers/anthropic.js";
import { errorDetailOf } from "../../../src/lib/service-error.js";
import type { Catalog } from "../../../src/core/catalog/catalog.js";
import { testEndpoint } from "../../helpers/catalog-file.js";
import type { SpendStore } from "../../../src/core/spend/spend-store.js";
import type { Caller } from "../../../src/core/auth.js";
import type { CanonicalRequest } from "../../../src/core/chat/model.js";
import type { NativeWebSearch } from "../../../src/core/chat/providers/native-search.js";
import type { ProviderAdapter } from "../../../src/core/chat/providers/types.js";

const endpoint = testEndpoint({
  provider: "anthropic",
  model_id: "claude",
  pricing: { prompt: "0.000003", completion: "0.000015", web_search: "0.01" },
  context_length: 200_000,
});
const catalog = { resolve: () => ({ model: { slug: "anthropic/claude" }, endpoint }) } as unknown as Catalog;
const caller: Caller = {
  keyId: "k1", keyHash: "h1", keyLabel: "k", organizationId: "o1", workspaceId: "w1", userId: "u1", isManagement: false, internsProgramme: false,
  limits: { keySpend: true, workspaceSpend: false, keyRpm: null, keyTpm: null, workspaceRpm: null, workspaceTpm: null },
};
const body = { model: "anthropic/claude", messages: [{ role: "user", content: "news?" }], max_tokens: 100 } as unknown as CanonicalRequest;

function attempt(format: ProviderAdapter["format"], webSearch: NativeWebSearch | undefined, source: "byok" | "shared" = "shared"): Attempt {
  return {
    provider: format, requestedModel: "anthropic/claude", credentialId: "c1", credentialSource: source,
    adapter: { format } as ProviderAdapter,
    call: { model: "claude", body, ...(webSearch ? { webSearch } : {}) } as Attempt["call"],
  };
}

/** Runs the stage for `attempts`; returns what it asked the store to reserve (undefined: nothing). */
async function reservedFor(attempts: Attempt[]): Promise<bigint | undefined> {
  let amount: bigint | undefined;
  const store = {
    reserve: async (input: { amount: bigint }) => ((amount = input.amount), { ok: true, id: "r1" }),
    settle: async () => undefined,
    extend: async () => undefined,
  } as unknown as SpendStore;
  const answer: ChatStage = { name: "answer", run: async () => ({ kind: "completion", completion: {} as never }) };
  const chain = compose([createSpendStage({ catalog, store, reservationTtlMs: 60_000, logger: pino({ level: "silent" }) }), answer]);
  const call = newCall(caller, new AbortController().signal, false, body);
  call.attempts = attempts;
  await chain(call);
  return amount;
}

describe("spend stage: native web search fees in the reservation", () => {
  const tokens = maxCostOf(body, endpoint);
  const search = femto("0.01");

  it("bounds the searches each provider can bill for one attempt", () => {
    expect(nativeSearchBound(attempt("anthropic", { maxUses: 3 }).call, "anthropic")).toBe(3 * (1 + ANTHROPIC_MAX_PAUSE_CONTINUATIONS));
    expect(nativeSearchBound(attempt("anthropic", {}).call, "anthropic")).toBeUndefined();
    expect(nativeSearchBound(attempt("anthropic", undefined).call, "anthropic")).toBe(0);
    expect(nativeSearchBound(attempt("gemini", {}).call, "gemini")).toBe(1);
    expect(nativeSearchBound(attempt("openai", {}).call, "openai")).toBe(1);
    const optioned = { ...attempt("openai", undefined).call, body: { ...body, web_search_options: {} } as CanonicalRequest };
    expect(nativeSearchBound(optioned, "openai")).toBe(1);
    expect(nativeSearchBound(attempt("openai", undefined).call, "openai")).toBe(0);
  });

  it("reserves the token bound plus max_uses × (1 + continuations) searches at the endpoint's search price", async () => {
    expect(await reservedFor([attempt("anthropic", undefined)])).toBe(tokens);
    expect(await reservedFor([attempt("anthropic", { maxUses: 2 })])).toBe(tokens + BigInt(2 * (1 + ANTHROPIC_MAX_PAUSE_CONTINUATIONS)) * search);
    expect(await reservedFor([attempt("gemini", {})])).toBe(tokens + search);
    // The largest over the attempts.
    expect(await reservedFor([attempt("gemini", {}), attempt("anthropic", { maxUses: 1 })])).toBe(tokens + BigInt(1 + ANTHROPIC_MAX_PAUSE_CONTINUATIONS) * search);
  });

  it("refuses an Anthropic search without max_uses under a limit, naming the field that asked; BYOK-served attempts reserve nothing", async () => {
    const err = await reservedFor([attempt("anthropic", { askedBy: "plugins[1]" })]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    expect(errorDetailOf(err as ConnectError)).toMatchObject({ field: "plugins[1].max_uses" });
    expect((err as ConnectError).rawMessage).toContain("plugins[1].max_uses is required");
    expect(await reservedFor([attempt("anthropic", {}, "byok")])).toBe(0n);
  });
});
