/**
 * A provider key spelled out across streamed chunks (src/core/chat/key-guard.ts): after its first
 * KEY_GUARD_PREFIX characters the rest is withheld, whatever the chunk boundaries; other text is untouched.
 */
import { describe, expect, it } from "vitest";
import { createKeyGuard, KEY_GUARD_PREFIX } from "../../../src/core/chat/key-guard.js";
import type { ChatChunk } from "../../../src/core/chat/providers/index.js";

const KEY = "sk-proj-Qx7" + "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOP";
const chunk = (delta: ChatChunk["choices"][number]["delta"], index = 0): ChatChunk => ({
  id: "c", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index, delta, finish_reason: null }],
});

/** Streams `text` in pieces of `size` through one guard and joins what comes out. */
function through(text: string, size: number, field: "content" | "reasoning" = "content"): string {
  const guard = createKeyGuard(KEY)!;
  let out = "";
  for (let i = 0; i < text.length; i += size) {
    const c = chunk({ [field]: text.slice(i, i + size) });
    guard.apply(c);
    out += c.choices[0]!.delta[field] ?? "";
  }
  return out;
}

describe("key guard", () => {
  const said = `Your key is ${KEY}, keep it safe.`;
  const expected = `Your key is ${KEY.slice(0, KEY_GUARD_PREFIX - 1)}[redacted], keep it safe.`;

  it("withholds the key after its first characters, for every piece size", () => {
    for (const size of [1, 2, 3, 4, 7, 16, 1000]) expect(through(said, size)).toBe(expected);
    expect(through(said, 3, "reasoning")).toBe(expected);
  });

  it("twice in one stream, and a near miss (the public prefix alone) passes untouched", () => {
    expect(through(`${said} Again: ${KEY}.`, 5)).toBe(`${expected} Again: ${KEY.slice(0, KEY_GUARD_PREFIX - 1)}[redacted].`);
    const nearMiss = `Keys look like sk-proj-Qx7abcd and so on; sks and sk-s are fine.`;
    expect(through(nearMiss, 4)).toBe(nearMiss);
  });

  it("follows choices and tool-call arguments separately", () => {
    const guard = createKeyGuard(KEY)!;
    const half = KEY.length / 2;
    const a = chunk({ tool_calls: [{ index: 0, function: { arguments: `{"k":"${KEY.slice(0, half)}` } }] }, 0);
    const b = chunk({ content: KEY.slice(half) }, 1); // another choice: not the continuation
    const c = chunk({ tool_calls: [{ index: 0, function: { arguments: `${KEY.slice(half)}"}` } }] }, 0);
    for (const x of [a, b, c]) guard.apply(x);
    expect(b.choices[0]!.delta.content).toBe(KEY.slice(half));
    const args = a.choices[0]!.delta.tool_calls![0]!.function!.arguments! + c.choices[0]!.delta.tool_calls![0]!.function!.arguments!;
    expect(args).toBe(`{"k":"${KEY.slice(0, KEY_GUARD_PREFIX - 1)}[redacted]"}`);
  });

  it("leaves a chunk without the key as it is (same strings), and short keys unguarded", () => {
    const guard = createKeyGuard(KEY)!;
    const text = "nothing to see here";
    const c = chunk({ content: text });
    guard.apply(c);
    expect(c.choices[0]!.delta.content).toBe(text);
    expect(createKeyGuard("short-key")).toBeUndefined();
  });
});
