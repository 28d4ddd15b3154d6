import { describe, expect, it } from "vitest";
import { autoRoute, betaRoute, classify, codingTier, matches, paretoRoute, weightedPrice, type RouterCandidate } from "../../../src/core/chat/pipeline/plugins/routers.js";
import { BUILTIN_CATALOG } from "../../../src/core/catalog/builtin-catalog.js";
import { mergeCatalogs } from "../../../src/core/catalog/catalog.js";

const c = (slug: string, prompt: number, completion: number, quality: number, coding: number, context = 128_000): RouterCandidate => ({ slug, prompt, completion, quality, coding, context });
const big = c("a/big", 10, 30, 0.9, 0.8);
const mid = c("a/mid", 1, 3, 0.5, 0.5);
const tiny = c("a/tiny", 0.1, 0.3, 0.3, 0.2, 8_000);

describe("router rules", () => {
  it("weighted price is (3·prompt + completion)/4", () => expect(weightedPrice({ prompt: 1, completion: 5 })).toBe(2));

  it("auto-router: 0 = pure quality, 10 = cheapest, the default 7 trades off", () => {
    expect(autoRoute([tiny, mid, big], 0).chosen).toBe("a/big");
    expect(autoRoute([tiny, mid, big], 10).chosen).toBe("a/tiny");
    // t=7: big 0.27-0.7 = -0.43; mid 0.15-0.07 = 0.08; tiny 0.09-0.007 = 0.083
    const r = autoRoute([tiny, mid, big], 7);
    expect(r.chosen).toBe("a/tiny");
    expect(r.ranked.map((x) => x.model)).toEqual(["a/tiny", "a/mid", "a/big"]);
    expect(autoRoute([tiny, mid, big], 5).chosen).toBe("a/mid");
  });

  it("classification: code fences and programming words → coding; long prompts → long_context; else chat", () => {
    expect(classify([{ role: "user", content: "Hello there, how are you?" }]).task).toBe("chat");
    expect(classify([{ role: "user", content: "Why does my Python script fail?" }]).task).toBe("coding");
    expect(classify([{ role: "user", content: [{ type: "text", text: "look:\n```\nx = 1\n```" }] }]).task).toBe("coding");
    expect(classify([{ role: "user", content: "a".repeat(4 * 32_001) }]).task).toBe("long_context");
  });

  it("auto-beta-router: higher tradeoff keeps only cheaper models; the best task score among them wins; the prompt must fit", () => {
    expect(betaRoute([tiny, mid, big], 0, "coding", 100).chosen).toBe("a/big");
    const r = betaRoute([tiny, mid, big], 7, "coding", 100);
    expect(r.kept).toBe(2); // ceil(3·4/11)
    expect(r.chosen).toBe("a/mid");
    expect(betaRoute([tiny, mid, big], 10, "coding", 100).chosen).toBe("a/tiny");
    // a 20k-token prompt does not fit tiny's 8k context
    expect(betaRoute([tiny, mid, big], 10, "chat", 20_000).chosen).toBe("a/mid");
    // an operator's task score wins over the derived one
    expect(betaRoute([{ ...mid, tasks: { chat: 0.95 } }, big], 0, "chat", 10).chosen).toBe("a/mid");
  });

  it("pareto-router: tiers, cheapest in the tier, price source, max_price", () => {
    expect([codingTier(undefined), codingTier(0.66), codingTier(0.5), codingTier(0.33), codingTier(0.1)]).toEqual(["high", "high", "medium", "medium", "low"]);
    expect(paretoRoute([tiny, mid, big], "high", "prompt")!.chosen).toBe("a/big");
    expect(paretoRoute([tiny, mid, big], "medium", "prompt")!.chosen).toBe("a/mid");
    expect(paretoRoute([tiny, mid, big], "low", "prompt")!.chosen).toBe("a/tiny");
    // prompt-cheap but completion-dear: the source decides
    const skew = c("b/skew", 0.5, 40, 0.5, 0.5);
    expect(paretoRoute([mid, skew], "medium", "prompt")!.chosen).toBe("b/skew");
    expect(paretoRoute([mid, skew], "medium", "weighted_avg")!.chosen).toBe("a/mid");
    expect(paretoRoute([tiny, mid, big], "high", "prompt", 5)).toBeUndefined();
  });

  it("patterns: exact and <vendor>/* wildcards", () => {
    expect(matches("openai/*", "openai/gpt-4o")).toBe(true);
    expect(matches("openai/*", "anthropic/claude-sonnet-4")).toBe(false);
    expect(matches("openai/gpt-4o", "openai/gpt-4o-mini")).toBe(false);
    expect(matches("*/gpt-4o*", "openai/gpt-4o-mini")).toBe(true);
  });
});

describe("the quality table", () => {
  it("rates every built-in chat model with a named source, none of the embedding models", () => {
    for (const m of BUILTIN_CATALOG.models) {
      if (m.architecture.output_modalities.includes("embeddings")) expect(m.quality).toBeUndefined();
      else {
        expect(m.quality, m.slug).toBeGreaterThan(0);
        expect(m.coding_score, m.slug).toBeGreaterThan(0);
        expect(m.ratings_source).toContain("not a benchmark");
      }
    }
  });

  it("the operator file replaces ratings; the source then says operator unless given", () => {
    const merged = mergeCatalogs(BUILTIN_CATALOG, { version: 1, models: [{ slug: "openai/gpt-4o", quality: 0.95, task_scores: { chat: 0.4 } }] });
    const m = merged.models.find((x) => x.slug === "openai/gpt-4o")!;
    expect(m.quality).toBe(0.95);
    expect(m.coding_score).toBe(0.5);
    expect(m.task_scores).toEqual({ chat: 0.4 });
    expect(m.ratings_source).toBe("operator");
    expect(() => mergeCatalogs(BUILTIN_CATALOG, { version: 1, models: [{ slug: "openai/gpt-4o", quality: 2 }] })).toThrow(/quality/);
  });
});
