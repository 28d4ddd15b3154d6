import { describe, expect, it } from "vitest";
import { OpenAICompatibleAdapter } from "../../../../src/core/chat/providers/openai-compatible.js";
import type { UpstreamCall } from "../../../../src/core/chat/providers/types.js";

// The body a call sends (`bodyOf(call, stream, true)`) is the JSON text the adapter sent when it built it as
// `upstreamBody({ ...call, body: { ...call.body, stream } })`: same keys, order and values.
describe("OpenAI-compatible upstream body", () => {
  const bodies: Array<Record<string, unknown>> = [
    { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "Say hello." }], stream: false },
    { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "Say hello." }] },
    { messages: [{ role: "user", content: "no model key" }] },
    { messages: [], temperature: 0.2, stream: true, stream_options: { include_usage: false, x: 1 }, provider: { order: ["a"] }, usage: { include: true }, models: ["a/b"] },
    { model: "m", reasoning: { effort: "high" }, session_id: "s", trace: { a: 1 }, cache: true, messages: [] },
    JSON.parse('{"model":"m","__proto__":{"x":1},"messages":[]}') as Record<string, unknown>,
  ];
  for (const unsupported of [undefined, ["temperature"]]) {
    const adapter = new OpenAICompatibleAdapter(unsupported ? { unsupported } : {});
    for (const [i, body] of bodies.entries()) {
      for (const stream of [false, true]) {
        it(`body ${i}, stream ${stream}${unsupported ? ", unsupported fields" : ""}`, () => {
          const call: UpstreamCall = { model: "llama-3.3-70b", body: body as UpstreamCall["body"], baseUrl: "http://x/v1", apiKey: "k", signal: new AbortController().signal };
          const before = JSON.stringify(body);
          const legacy = JSON.stringify(adapter.upstreamBody({ ...call, body: { ...call.body, stream } }));
          const now = JSON.stringify((adapter as unknown as { bodyOf(c: UpstreamCall, s: unknown, f: boolean): unknown }).bodyOf(call, stream, true));
          expect(now).toBe(legacy);
          expect(JSON.stringify(body)).toBe(before);
        });
      }
    }
  }
});
