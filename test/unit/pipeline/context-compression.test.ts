/** The context-compression plugin's middle-out (src/core/chat/pipeline/plugins/context-compression.ts), with a word counter. */
import { describe, expect, it } from "vitest";
import { middleOut } from "../../../src/core/chat/pipeline/plugins/context-compression.js";

const words = (t: string) => (t.trim() === "" ? 0 : t.trim().split(/\s+/).length);
const text = (n: number, w = "w") => Array.from({ length: n }, () => w).join(" ");

describe("middleOut", () => {
  const conversation = [
    { role: "system", content: text(10, "sys") },
    { role: "user", content: text(10, "u1") },
    { role: "assistant", content: text(10, "a1") },
    { role: "user", content: text(10, "u2") },
    { role: "assistant", content: text(10, "a2") },
    { role: "user", content: text(10, "u3") },
  ];

  it("fits already: unchanged", () => {
    const c = middleOut(conversation, 1000, words);
    expect(c).toMatchObject({ removed: 0, truncated: 0, fits: true, tokensBefore: 84, tokensAfter: 84 });
    expect(c.messages).toEqual(conversation);
  });

  it("drops from the middle, keeping the system prompt and the last turn", () => {
    const c = middleOut(conversation, 50, words); // 14 per message: keep 3
    expect(c.messages.map((m) => (m.content as string).split(" ")[0])).toEqual(["sys", "u1", "u3"]);
    expect(c).toMatchObject({ removed: 3, truncated: 0, fits: true, tokensAfter: 42 });
  });

  it("an assistant tool call and its results go together", () => {
    const msgs = [
      { role: "system", content: "s" },
      { role: "user", content: text(20) },
      { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "c1", content: text(20) },
      { role: "user", content: "last" },
    ];
    const c = middleOut(msgs, 40, words);
    expect(c.messages.map((m) => m.role)).toEqual(["system", "user", "user"]);
    expect(c.removed).toBe(2);
  });

  it("when dropping is not enough, the longest kept text is cut in its middle", () => {
    const c = middleOut([{ role: "system", content: "s" }, { role: "user", content: text(200) }], 60, words);
    expect(c.truncated).toBe(1);
    expect(c.fits).toBe(true);
    expect(c.messages[1]!.content).toContain("…");
    expect(c.tokensAfter).toBeLessThanOrEqual(60);
  });
});
