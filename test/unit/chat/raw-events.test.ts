/**
 * The same-dialect pass-through of streamed events (src/core/chat/raw-events.ts): an event built from its upstream
 * text equals `JSON.parse` of it, and the text given back for it, with `id` and `provider` set, is exactly what
 * `JSON.stringify` of the stamped parsed event writes; events whose text `JSON.stringify` would not write carry none.
 */
import { describe, expect, it } from "vitest";
import { createEventReader, createRawSlot, dropRaw, hasRaw, takeRawJson } from "../../../src/core/chat/raw-events.js";
import { parseEventData } from "../../../src/core/chat/providers/http.js";

/** Reads `lines` as one stream; for each, the event read and the text the chat dialect sends for it after the stamp. */
function relay(lines: string[], provider = "openai") {
  const slot = createRawSlot();
  const read = createEventReader(parseEventData, slot);
  return lines.map((line) => {
    const event = read(line) as Record<string, unknown>;
    expect(event).toEqual(JSON.parse(line));
    expect(JSON.stringify(event)).toBe(JSON.stringify(JSON.parse(line)));
    const raw = hasRaw(slot, event);
    event.id = "gen-123";
    event.provider = provider;
    const expected = JSON.stringify(event);
    const out = takeRawJson(slot, event) ?? JSON.stringify(event);
    expect(out).toBe(expected);
    return { event, raw };
  });
}

const openai = (delta: string, extra = "") =>
  `{"id":"chatcmpl-B9M","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9","choices":[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":null}]${extra}}`;

describe("raw events", () => {
  it("passes plain content events through as their text, exactly as JSON.stringify writes them", () => {
    const lines = [
      openai(`{"role":"assistant","content":"","refusal":null}`, `,"obfuscation":"a1"`),
      openai(`{"content":"Hello"}`, `,"obfuscation":"xk3J"`),
      openai(`{"content":" wörld \\"quoted\\" back\\\\slash\\nline\\ttab \\u001f 😀"}`, `,"obfuscation":"Q"`),
      openai(`{"content":""}`, `,"obfuscation":""`),
      `{"id":"chatcmpl-B9M","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"obfuscation":"z"}`,
      `{"id":"chatcmpl-B9M","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12},"obfuscation":"z"}`,
    ];
    const out = relay(lines);
    expect(out.map((o) => o.raw)).toEqual([false, true, true, true, false, false]);
  });

  it("learns the text before choices when a value before it spells `,\"choices\":` or ends with a comma", () => {
    const tricky = (delta: string) =>
      `{"id":"chatcmpl-B9M","object":"chat.completion.chunk","model":"m,\\\",\\\"choices\\\":[1],","system_fingerprint":",","choices":[{"index":0,"delta":${delta},"logprobs":null,"finish_reason":null}]}`;
    const lines = [tricky(`{"role":"assistant","content":"","refusal":null}`), tricky(`{"content":"Hi"}`), tricky(`{"content":" there"}`)];
    expect((JSON.parse(lines[1]!) as { model: string }).model).toContain(',"choices":');
    expect(relay(lines).map((o) => o.raw)).toEqual([false, true, true]);
  });

  it("reads texts sliced out of one read as the SSE parser hands them out, with their prefix and the keys after choices", () => {
    const lines = [
      openai(`{"role":"assistant","content":"","refusal":null}`, `,"obfuscation":"a1"`),
      openai(`{"content":"Hello"}`, `,"obfuscation":"xk3J"`),
      openai(`{"content":" there"}`, `,"obfuscation":"Q"`),
      // Not the stream's prefix (another id), nor its keys after choices: parsed.
      openai(`{"content":"x"}`, `,"obfuscation":"Q"`).replace("chatcmpl-B9M", "chatcmpl-B9N"),
      openai(`{"content":"y"}`, `,"obfuscatio":"Q"`),
    ];
    const read = lines.map((l) => `data: ${l}\n\n`).join("");
    let at = 0;
    const sliced = lines.map((l) => {
      at += 6;
      const text = read.slice(at, at + l.length);
      at += l.length + 2;
      return text;
    });
    expect(sliced).toEqual(lines);
    expect(relay(sliced).map((o) => o.raw)).toEqual([false, true, true, false, false]);
  });

  it("keeps an upstream's own provider key in its place", () => {
    const line = (c: string) => `{"id":"gen-x","provider":"OpenAI","model":"openai/gpt-4o","object":"chat.completion.chunk","created":1,"choices":[{"index":0,"delta":{"role":"assistant","content":${c}},"finish_reason":null,"native_finish_reason":null}]}`;
    const ollama = (c: string) => `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"llama3","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":${c}},"finish_reason":null}]}`;
    expect(relay([line(`"a"`), line(`"b"`)]).map((o) => o.raw)).toEqual([false, false]); // native_finish_reason: not the plain form
    expect(relay([ollama(`"a"`), ollama(`"b"`), ollama(`"c"`)]).map((o) => o.raw)).toEqual([false, true, true]);
    const withProvider = (c: string) => `{"id":"x","provider":"Groq","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":${c}},"finish_reason":null}],"usage":null}`;
    expect(relay([withProvider(`"a"`), withProvider(`"b"`)]).map((o) => o.raw)).toEqual([false, true]);
  });

  it("parses every event whose text JSON.stringify would not write as it is", () => {
    const spaced = (c: string) => `{"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"index": 0, "delta": {"content": ${c}}, "finish_reason": null}]}`;
    expect(relay([spaced(`"a"`), spaced(`"b"`), spaced(`"c"`)]).map((o) => o.raw)).toEqual([false, false, false]);
    const base = (c: string, extra = "") => `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":${c}},"finish_reason":null}]${extra}}`;
    const cases = [
      base(`"caf\\u00e9"`), // an escape JSON.stringify does not write
      base(`"a\\/b"`),
      base(`"\\ud83d\\ude00"`),
      base(`"\\u0008"`), // written as \b
      base(`"a"`, `,"n":1.50`),
      base(`"a"`, `,"n":1e3`),
      base(`"a"`, `,"n":-0`),
      base(`"a"`, `,"n":12345678901234567`),
      base(`"a"`, `,"o":{"k":1}`),
      base(`"a"`, `,"model":"other"`), // a key twice: JSON.parse keeps the last value in the first place
      `{"id":"x","object":"chat.completion.chunk","created":1.0,"model":"m","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}`,
    ];
    for (const c of cases) expect(relay([base(`"first"`), c]).map((o) => o.raw)).toEqual([false, false]);
    expect(relay([base(`"first"`), base(`"plain"`)]).map((o) => o.raw)).toEqual([false, true]);
  });

  it("learns the stream again when its text before choices changes, and reports malformed data as before", () => {
    const ev = (id: string, c: string) => `{"id":"${id}","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"${c}"},"finish_reason":null}]}`;
    expect(relay([ev("a", "1"), ev("a", "2"), ev("b", "3"), ev("b", "4")]).map((o) => o.raw)).toEqual([false, true, false, true]);
    const read = createEventReader(parseEventData, createRawSlot());
    read(ev("a", "1"));
    expect(() => read(`${ev("a", "2").slice(0, -1)},}`)).toThrow(/not a JSON object/);
    expect(() => read(`{"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}x`)).toThrow(/not a JSON object/);
  });

  it("gives no text for an event changed in place (dropRaw), and none for a copy", () => {
    const slot = createRawSlot();
    const read = createEventReader(parseEventData, slot);
    const line = (c: string) => `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"${c}"},"finish_reason":null}]}`;
    read(line("a"));
    const e = read(line("b")) as Record<string, unknown> & { id: string; provider: string };
    expect(hasRaw(slot, e)).toBe(true);
    const copy = { ...e, id: "g", provider: "p" };
    expect(takeRawJson(slot, copy)).toBeUndefined();
    dropRaw(slot, e);
    e.id = "g";
    e.provider = "p";
    expect(takeRawJson(slot, e)).toBeUndefined();
    // Only the event read last has its text: one read before it has none.
    const older = read(line("c")) as Record<string, unknown> & { id: string; provider: string };
    read(line("d"));
    Object.assign(older, { id: "g", provider: "p" });
    expect(takeRawJson(slot, older)).toBeUndefined();
  });
});
