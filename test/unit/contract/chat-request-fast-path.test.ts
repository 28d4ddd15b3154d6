/**
 * ChatRequest.check's shape checked without zod (fastAccepts) against zod: for every body of a generated set
 * around the common shape (each fast key with valid, edge and wrong values, messages of every role and key mix),
 * `check` must pass or fail exactly as `parse` does (same field, same message), and the common shapes must be
 * taken without zod.
 */
import { describe, expect, it } from "vitest";
import { ChatRequest, FAST_PATH_KEYS, fastAccepts } from "../../../src/contract/requests/chat-request.js";
import { requestJsonSchema, RuleViolation } from "../../../src/contract/requests/kit.js";

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

/** The next double above (`dir` 1) or below (-1) `x`. */
function nextDouble(x: number, dir: 1 | -1): number {
  if (x === 0) return dir * Number.MIN_VALUE;
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const bits = view.getBigUint64(0);
  view.setBigUint64(0, (x > 0) === (dir > 0) ? bits + 1n : bits - 1n);
  return view.getFloat64(0);
}

type Json = Record<string, unknown>;
/**
 * The edges of every bound the schema states on a key fastAccepts checks itself, read from the schema (its JSON
 * Schema): for a number the bound and the nearest double past it, for an integer the bound, one past it and a
 * fraction inside, for a string its longest length and one more. `inside` values must be accepted, `outside`
 * ones refused.
 */
function edgesFromSchema(): Map<string, { inside: unknown[]; outside: unknown[] }> {
  const props = (requestJsonSchema(schema) as Json).properties as Json;
  const out = new Map<string, { inside: unknown[]; outside: unknown[] }>();
  for (const key of FAST_PATH_KEYS) {
    const node = props[key] as Json;
    const alts = ((node.anyOf as Json[]) ?? [node]).filter((n) => n.type !== "null");
    for (const n of alts) {
      const inside: unknown[] = [];
      const outside: unknown[] = [];
      if (n.type === "number" || n.type === "integer") {
        for (const [bound, dir] of [[n.minimum, -1], [n.maximum, 1]] as const) {
          if (typeof bound !== "number") continue;
          inside.push(bound);
          if (n.type === "number") {
            outside.push(nextDouble(bound, dir), bound + dir);
            inside.push(nextDouble(bound, dir === 1 ? -1 : 1));
          } else {
            outside.push(bound + dir, bound + dir / 2);
            if (Math.abs(bound) < Number.MAX_SAFE_INTEGER) inside.push(bound - dir);
          }
        }
      }
      if (n.type === "string" && typeof n.maxLength === "number") {
        inside.push("x".repeat(n.maxLength), "é".repeat(n.maxLength));
        outside.push("x".repeat(n.maxLength + 1));
      }
      if (inside.length + outside.length > 0) out.set(key, { inside, outside });
    }
  }
  return out;
}

describe("ChatRequest.check: the common shape without zod", () => {
  it("holds every bound the schema states on a fast key, at both edges of it", () => {
    const edges = edgesFromSchema();
    // Every bounded key the fast path checks itself is covered (a bound added to the schema is tested here).
    expect([...edges.keys()].sort()).toEqual(["frequency_penalty", "max_completion_tokens", "max_tokens", "presence_penalty", "seed", "temperature", "top_p", "user"]);
    const ok = { role: "user", content: "hi" };
    for (const [key, { inside, outside }] of edges) {
      for (const v of inside) {
        const body = { messages: [ok], [key]: v };
        expect(fastAccepts(schema, body), `${key}: ${v}`).toBe(true);
        expect(outcome(() => ChatRequest.parse(body, opts)), `${key}: ${v}`).toBe("ok");
      }
      for (const v of outside) {
        const body = { messages: [ok], [key]: v };
        expect(fastAccepts(schema, body), `${key}: ${v}`).toBe(false);
        const expected = outcome(() => ChatRequest.parse(body, opts));
        expect(expected, `${key}: ${v}`).toMatch(new RegExp(`^${key}: `));
        expect(outcome(() => ChatRequest.check(body, opts)), `${key}: ${v}`).toBe(expected);
      }
    }
  });

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
