/** The preset merge rules of chat completions (src/core/chat/presets.ts, docs/chat.md), one by one. */
import { describe, expect, it } from "vitest";
import { applyPreset, presetReferenceOf, PresetReferenceError } from "../../../src/core/chat/presets.js";

const user = { role: "user", content: "hi" };

describe("preset references", () => {
  it("reads the three forms", () => {
    expect(presetReferenceOf({ model: "@preset/support", messages: [] })).toEqual({ slug: "support", version: undefined, field: "model" });
    expect(presetReferenceOf({ model: "@preset/support@3", messages: [] })).toEqual({ slug: "support", version: 3, field: "model" });
    expect(presetReferenceOf({ model: "openai/gpt-4o", preset: "support", messages: [] })).toEqual({ slug: "support", version: undefined, field: "preset" });
    expect(presetReferenceOf({ model: "openai/gpt-4o", preset: "support@2", messages: [] })).toEqual({ slug: "support", version: 2, field: "preset" });
    expect(presetReferenceOf({ model: "openai/gpt-4o", preset: "@preset/support", messages: [] })).toEqual({ slug: "support", version: undefined, field: "preset" });
  });

  it("no preset: null", () => {
    expect(presetReferenceOf({ model: "openai/gpt-4o", messages: [] })).toBeNull();
  });

  it("bad slugs and versions name the field", () => {
    for (const [body, field] of [
      [{ model: "@preset/" }, "model"],
      [{ model: "@preset/x@0" }, "model"],
      [{ model: "@preset/x@v2" }, "model"],
      [{ model: "m", preset: "has space" }, "preset"],
      [{ model: "@preset/a", preset: "b" }, "preset"],
    ] as const) {
      const err = (() => {
        try {
          presetReferenceOf(body);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(PresetReferenceError);
      expect((err as PresetReferenceError).field).toBe(field);
    }
    expect(presetReferenceOf({ model: "@preset/a@2", preset: "a@2" })).toEqual({ slug: "a", version: 2, field: "model" });
  });
});

describe("applying a preset", () => {
  const preset = {
    config: { model: "anthropic/claude-sonnet-4", temperature: 0.2, provider: { order: ["anthropic"] }, max_tokens: 500 },
    systemPrompt: "You are terse.",
  };

  it("fills the fields the request does not set, absent or null; set fields win whole", () => {
    const out = applyPreset({ model: "@preset/p", messages: [user], temperature: 0.9, max_tokens: null, provider: { only: ["x"] } }, preset);
    expect(out.temperature).toBe(0.9);
    expect(out.max_tokens).toBe(500);
    expect(out.provider).toEqual({ only: ["x"] }); // not merged key by key
  });

  it("a model reference takes the preset's model; a preset field keeps the request's own model", () => {
    expect(applyPreset({ model: "@preset/p", messages: [user] }, preset).model).toBe("anthropic/claude-sonnet-4");
    expect(applyPreset({ model: "openai/gpt-4o", preset: "p", messages: [user] }, preset).model).toBe("openai/gpt-4o");
    expect(applyPreset({ model: "@preset/p", messages: [user] }, { config: { models: ["a/one", "b/two"] }, systemPrompt: null }).model).toBe("a/one");
    expect(applyPreset({ model: "@preset/p", messages: [user] }, { config: {}, systemPrompt: null }).model).toBeUndefined();
  });

  it("the system prompt is prepended only when the request has no system or developer message", () => {
    expect(applyPreset({ model: "@preset/p", messages: [user] }, preset).messages).toEqual([{ role: "system", content: "You are terse." }, user]);
    const own = [{ role: "system", content: "mine" }, user];
    expect(applyPreset({ model: "@preset/p", messages: own }, preset).messages).toEqual(own);
    const dev = [{ role: "developer", content: "mine" }, user];
    expect(applyPreset({ model: "@preset/p", messages: dev }, preset).messages).toEqual(dev);
    expect(applyPreset({ model: "@preset/p", messages: [user] }, { ...preset, systemPrompt: null }).messages).toEqual([user]);
  });

  it("drops the preset field and leaves the input unchanged", () => {
    const body = { model: "m", preset: "p", messages: [user] };
    const out = applyPreset(body, preset);
    expect("preset" in out).toBe(false);
    expect(body.preset).toBe("p");
    expect(body.messages).toEqual([user]);
  });
});
