import { describe, expect, it } from "vitest";
import { copyOf } from "../../../src/lib/copy.js";

describe("copyOf", () => {
  it("copies what a spread copies, in the same order, into a new object", () => {
    const sym = Symbol("s");
    const source: Record<string | symbol, unknown> = { b: 1, a: undefined, 2: "two", 1: "one", nested: { x: 1 } };
    source[sym] = "symbol";
    Object.defineProperty(source, "hidden", { value: 1, enumerable: false });
    Object.defineProperty(source, "got", { get: () => "read", enumerable: true });
    const copy = copyOf(source);
    const spread = { ...source };
    expect(copy).not.toBe(source);
    expect(Reflect.ownKeys(copy)).toEqual(Reflect.ownKeys(spread));
    for (const k of Reflect.ownKeys(spread)) expect(Object.getOwnPropertyDescriptor(copy, k)).toEqual(Object.getOwnPropertyDescriptor(spread, k));
    expect(copy.nested).toBe(source.nested);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
  });

  it("keeps a parsed __proto__ key as a key, as the spread does", () => {
    const parsed = JSON.parse('{"prompt_tokens":1,"__proto__":{"polluted":true}}') as Record<string, unknown>;
    const copy = copyOf(parsed);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toEqual(["prompt_tokens", "__proto__"]);
    expect((copy as { polluted?: unknown }).polluted).toBeUndefined();
    (copy as Record<string, unknown>).cost = 1;
    expect(JSON.stringify(copy)).toBe('{"prompt_tokens":1,"__proto__":{"polluted":true},"cost":1}');
  });

  it("later keys go after the copied ones, an existing key keeps its place", () => {
    const copy = copyOf({ a: 1, cost: 5 }) as Record<string, unknown>;
    copy.b = 2;
    copy.cost = 7;
    expect(JSON.stringify(copy)).toBe('{"a":1,"cost":7,"b":2}');
    expect(JSON.stringify({ ...{ a: 1, cost: 5 }, b: 2, cost: 7 })).toBe(JSON.stringify(copy));
  });
});
