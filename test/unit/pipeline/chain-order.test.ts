/**
 * The chat pipeline's order per dialect (docs/architecture.md, "The chat pipeline"), from the real composition:
 * the chain chat-handler.ts builds (`createChatStages`) with each dialect's own stages in its slots (the handlers'
 * `messagesEdges`, `responsesEdges`, `geminiEdges`). A stage added, moved or dropped changes these lists.
 */
import { describe, expect, it } from "vitest";
import pino from "pino";
import { createChatStages, type ChatHandlerDeps } from "../../../src/core/chat/chat-handler.js";
import { chainStages, type DialectEdges } from "../../../src/core/chat/pipeline/chain.js";
import { messagesEdges } from "../../../src/core/chat/messages-handler.js";
import { responsesEdges } from "../../../src/core/chat/responses-handler.js";
import { geminiEdges } from "../../../src/core/chat/gemini-handler.js";
import { createCatalog } from "../../../src/core/catalog/catalog.js";
import { BUILTIN_CATALOG } from "../../../src/core/catalog/builtin-catalog.js";
import { ProviderRegistry } from "../../../src/core/chat/providers/index.js";
import { createMemoryHealthMemory } from "../../../src/lib/health-memory.js";

/** Only what building the stages reads; no request runs. */
function deps(tracing: boolean): ChatHandlerDeps {
  return {
    presets: {},
    generations: { record() {} },
    credentials: {},
    providers: new ProviderRegistry(),
    catalog: createCatalog(BUILTIN_CATALOG),
    brand: "portico",
    limits: { maxAttempts: 3, maxConcurrentPerKey: 0, spendReservationTtlMs: 60_000 },
    slots: {},
    spend: {},
    rates: {},
    logger: pino({ level: "silent" }),
    timeouts: {},
    health: createMemoryHealthMemory(),
    keepaliveMs: 1000,
    tracing,
  } as unknown as ChatHandlerDeps;
}

const names = (tracing: boolean, edges?: DialectEdges) => chainStages(createChatStages(deps(tracing)).chain, edges).map((s) => s.name);
const headers = { anthropicBeta: "", anthropicVersion: "" };

const OUTER = ["record", "limits", "rate", "cost"];
const MIDDLE = ["validate", "content", "preset", "route"];
const INNER = ["cache", "plan", "plugins", "spend"];

describe("the chat pipeline's order per dialect", () => {
  it("chat completions: no slot filled, the server-tools stage runs (the body is decoded before the chain)", () => {
    expect(names(false)).toEqual([...OUTER, ...MIDDLE, "server-tools", ...INNER, "execute"]);
  });

  it("Messages: decode after the outer stages, the server-tools refusal, the Anthropic headers before execute", () => {
    expect(names(false, messagesEdges("portico")(headers))).toEqual([
      ...OUTER, "decode", ...MIDDLE, "server-tools-refusal", ...INNER, "anthropic-headers", "execute",
    ]);
  });

  it("Responses and Gemini: decode after the outer stages, the server-tools refusal", () => {
    const expected = [...OUTER, "decode", ...MIDDLE, "server-tools-refusal", ...INNER, "execute"];
    expect(names(false, responsesEdges("portico")({}))).toEqual(expected);
    expect(names(false, geminiEdges("portico")("google/gemini-2.5-flash", {}))).toEqual(expected);
  });

  it("tracing on: the trace stage opens the chain of every dialect", () => {
    for (const edges of [undefined, messagesEdges("portico")(headers), responsesEdges("portico")({}), geminiEdges("portico")("google/gemini-2.5-flash", {})]) {
      const chain = names(true, edges);
      expect(chain[0]).toBe("trace");
      expect(chain.slice(1)).toEqual(names(false, edges));
    }
  });

  it("counting tokens runs validate, preset, route and plan", () => {
    expect(createChatStages(deps(false)).count.map((s) => s.name)).toEqual(["validate", "preset", "route", "plan"]);
  });
});
