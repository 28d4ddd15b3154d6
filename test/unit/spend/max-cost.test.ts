/** The reservation's bound (src/core/spend/max-cost.ts) and the spend windows (windows.ts). */
import { describe, expect, it } from "vitest";
import { NON_TEXT_PART_TOKENS, maxCostOf, outputTokenBound, promptTokenBound } from "../../../src/core/spend/max-cost.js";
import { windowStart, windowStarts } from "../../../src/core/spend/windows.js";
import { testEndpoint } from "../../helpers/catalog-file.js";

const endpoint = testEndpoint;

describe("maxCostOf", () => {
  const body = { model: "m", messages: [{ role: "user", content: "héllo" }], max_tokens: 100 };

  it("prices the body's UTF-8 bytes at the prompt price and the asked output at the completion price", () => {
    const bytes = Buffer.byteLength(JSON.stringify(body));
    expect(promptTokenBound(body as never)).toBe(bytes);
    expect(maxCostOf(body as never, endpoint())).toBe(BigInt(bytes) * 1_000_000_000n + 100n * 2_000_000_000n);
  });

  it("uses the endpoint's max output without max_tokens, its context length when it states none, and caps a larger ask", () => {
    const { max_tokens: _m, ...open } = body;
    expect(outputTokenBound(open as never, endpoint())).toBe(1000);
    expect(outputTokenBound(open as never, endpoint({ max_completion_tokens: null }))).toBe(8192);
    expect(outputTokenBound({ ...body, max_completion_tokens: 50_000 } as never, endpoint())).toBe(1000);
    expect(outputTokenBound({ ...body, max_completion_tokens: 7 } as never, endpoint())).toBe(7);
  });

  it("takes the highest prompt-side and output-side prices over tiers, cache writes and reasoning", () => {
    const e = endpoint({
      pricing: { prompt: "0.000001", completion: "0.000002", input_cache_write: "0.0000015", internal_reasoning: "0.000003", tiers: [{ above_prompt_tokens: 10, prompt: "0.000004" }], request: "0.01" },
    });
    const bytes = BigInt(promptTokenBound(body as never));
    expect(maxCostOf(body as never, e)).toBe(bytes * 4_000_000_000n + 100n * 3_000_000_000n + 10_000_000_000_000n);
  });

  it("counts each non-text part at its allowance, and images at the per-image price", () => {
    const img = { model: "m", max_tokens: 1, messages: [{ role: "user", content: [{ type: "text", text: "a" }, { type: "image_url", image_url: { url: "https://x/y.png" } }] }] };
    const bytes = Buffer.byteLength(JSON.stringify(img));
    expect(promptTokenBound(img as never)).toBe(bytes + NON_TEXT_PART_TOKENS);
    const e = endpoint({ pricing: { prompt: "0.000001", completion: "0.000002", image: "0.001" } });
    expect(maxCostOf(img as never, e)).toBe(BigInt(bytes + NON_TEXT_PART_TOKENS) * 1_000_000_000n + 2_000_000_000n + 1_000_000_000_000n);
  });
});

describe("spend windows (UTC)", () => {
  it("start at midnight, on Monday and on the 1st; none never resets", () => {
    const t = Date.UTC(2026, 10, 26, 15, 30); // Thursday 26 Nov 2026
    expect(windowStarts(t)).toEqual({ daily: Date.UTC(2026, 10, 26), weekly: Date.UTC(2026, 10, 23), monthly: Date.UTC(2026, 10, 1) });
    expect(windowStart("weekly", Date.UTC(2026, 10, 29, 23))).toBe(Date.UTC(2026, 10, 23)); // Sunday → the Monday before
    expect(windowStart("weekly", Date.UTC(2026, 10, 30))).toBe(Date.UTC(2026, 10, 30)); // Monday
    expect(windowStart("none", t)).toBe(0);
  });
});
