/**
 * ChatRequest.check's shape checked without zod (fastAccepts) against zod: for every body of a generated set
 * around the common shape (each fast key with valid, edge and wrong values, messages of every role and key mix),
 * `check` must pass or fail exactly as `parse` does (same field, same message), and the common shapes must be
 * taken without zod.
 */
import { describe, expect, it } from "vitest";
import { ChatRequest, fastAccepts } from "../../../src/contract/requests/chat-request.js";
import { RuleViolation } from "../../../src/contract/requests/kit.js";

const opts = { brand: "service" };
const schema = ChatRequest.schema("service");

function outcome(run: () => unknown): string {
  try {
    run();
    return "ok";
  } catch (err) {
    if (err instanceof RuleViolation) return `${err.field}: ${err.message}`;
    throw err;
  }
}

const NUMBERS = [null, 0, -0, 1, 2, 2.0000001, -2, -2.5, 0.5, 1.5, 3, -1, 256, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 1, Number.MIN_SAFE_INTEGER, Number.MIN_SAFE_INTEGER - 1, 1e300, NaN, Infinity, -Infinity, "1", true, [], {}, undefined];
const VALUES: Record<string, unknown[]> = {
  model: ["groq/llama-3.3-70b", "", 1, null, ["a"], undefined],
  stream: [true, false, null, "true", 0, undefined],
  temperature: NUMBERS,
  top_p: NUMBERS,
  frequency_penalty: NUMBERS,
  presence_penalty: NUMBERS,
  max_tokens: NUMBERS,
  max_completion_tokens: NUMBERS,
  seed: NUMBERS,
  user: ["u", "", "x".repeat(256), "x".repeat(257), "é".repeat(256), 1, null, undefined],
  stream_options: [null, {}, { include_usage: true }, { include_usage: false }, { include_usage: null }, { include_usage: "yes" }, { include_usage: undefined }, { other: 1 }, { include_usage: true, other: 1 }, [], "x", undefined],
  reasoning_effort: ["low", null, "bogus"],
  custom_field: [1, null, "x", { a: 1 }, undefined],
};
const CONTENTS = ["hi", "", null, undefined, 1, [{ type: "text", text: "x" }], [], {}];
const ROLES = ["system", "developer", "user", "assistant", "tool", "robot", 1, undefined];

function messageVariants(): unknown[] {
  const out: unknown[] = [null, "hi", [], 1];
  for (const role of ROLES) {
    for (const content of CONTENTS) {
      out.push({ role, content });
      out.push({ role, content, name: "n" });
      out.push({ role, content, name: 1 });
      out.push({ content, role });
    }
    out.push({ role });
    out.push({ role, content: "x", tool_call_id: "t1" });
    out.push({ role, content: "x", extra: 1 });
    out.push({ role, content: "x", name: undefined });
  }
  out.push(JSON.parse('{"role":"user","content":"x","__proto__":{"a":1}}'));
  out.push(Object.assign(Object.create(null), { role: "user", content: "x" }));
  return out;
}

function bodies(): unknown[] {
  const out: unknown[] = [null, [], "x", 1, {}];
  const ok = { role: "user", content: "Say hello." };
  for (const m of messageVariants()) {
    out.push({ messages: [m] });
    out.push({ model: "m", messages: [ok, m], stream: false });
  }
  for (const messages of [undefined, null, [], "x", [ok], [ok, ok, ok]]) out.push({ messages, model: "m" });
  for (const [key, values] of Object.entries(VALUES)) {
    for (const v of values) {
      out.push({ messages: [ok], [key]: v });
      out.push({ model: "m", [key]: v, messages: [ok], stream: false });
      out.push({ [key]: v });
    }
  }
  // Two fast keys at once, and keys the subset leaves to zod.
  for (const t of NUMBERS) for (const m of VALUES.max_tokens!) out.push({ messages: [ok], temperature: t, max_tokens: m });
  for (const extra of [{ tools: [] }, { provider: { bogus: 1 } }, { provider: null }, { plugins: [{ id: "web" }] }, { reasoning: { effort: "high" }, reasoning_effort: "low" }, { metadata: { a: "b" } }]) {
    out.push({ messages: [ok], ...extra });
  }
  out.push(JSON.parse('{"messages":[{"role":"user","content":"x"}],"__proto__":{"temperature":5}}'));
  out.push(Object.assign(Object.create(null), { messages: [ok] }));
  return out;
}

describe("ChatRequest.check: the common shape without zod", () => {
  it("passes and fails exactly as zod's parse does, for every generated body", () => {
    const all = bodies();
    expect(all.length).toBeGreaterThan(1000);
    let fast = 0;
    for (const body of all) {
      const expected = outcome(() => ChatRequest.parse(body, opts));
      expect(outcome(() => ChatRequest.check(body, opts)), JSON.stringify(body)).toBe(expected);
      if (body !== null && typeof body === "object" && !Array.isArray(body) && fastAccepts(schema, body as Record<string, unknown>)) {
        fast++;
        expect(expected, JSON.stringify(body)).toBe("ok");
      }
    }
    expect(fast).toBeGreaterThan(100);
  });

  it("takes the common shapes without zod", () => {
    for (const body of [
      { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "Say hello." }], stream: false },
      { model: "m", messages: [{ role: "system", content: "s" }, { role: "user", content: "u", name: "a" }, { role: "assistant", content: null }], temperature: 0.7, max_tokens: 256, stream: true, stream_options: { include_usage: true }, user: "u-1", seed: 7, custom: { x: 1 } },
    ]) {
      expect(fastAccepts(schema, body)).toBe(true);
    }
    for (const body of [
      { messages: [{ role: "tool", content: "x", tool_call_id: "t" }] },
      { messages: [{ role: "user", content: [{ type: "text", text: "x" }] }] },
      { messages: [{ role: "user", content: "x" }], tools: [] },
    ]) {
      expect(fastAccepts(schema, body)).toBe(false);
    }
  });
});
