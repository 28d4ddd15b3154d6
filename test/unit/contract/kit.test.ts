import { describe, expect, it } from "vitest";
import { ChatRequest } from "../../../src/contract/requests/chat-request.js";
import {
  array,
  byType,
  closedObject,
  integer,
  number,
  object,
  oneOf,
  record,
  RuleViolation,
  string,
  validate,
} from "../../../src/contract/requests/kit.js";

function violation(fn: () => unknown): { field: string; message: string } | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof RuleViolation) return { field: err.field, message: err.message };
    throw err;
  }
  return undefined;
}

describe("request definition kit", () => {
  const body = object(
    {
      name: string({ min: 1, max: 3 }),
      size: integer({ min: 1, max: 9 }),
      ratio: number({ min: 0, max: 1 }),
      kind: oneOf(["a", "b"]),
      tags: array(string(), { max: 2 }),
      price: byType([string({ pattern: /^\d+$/, patternText: "must be digits" }), number({ min: 0 })], "must be digits or a number"),
      meta: record(string(), { maxEntries: 1, maxKeyLength: 2 }),
      strict: closedObject({ x: integer() }),
    },
    { required: ["name"] },
  );

  it.each<[unknown, string, string]>([
    [{}, "name", "name is required"],
    [{ name: 1 }, "name", "name must be a string, got a number"],
    [{ name: "" }, "name", "name must be at least 1 character long"],
    [{ name: "abcd" }, "name", "name must be at most 3 characters long"],
    [{ name: "a", size: 1.5 }, "size", "size must be an integer between 1 and 9, got 1.5"],
    [{ name: "a", size: "2" }, "size", "size must be an integer between 1 and 9, got a string"],
    [{ name: "a", ratio: 2 }, "ratio", "ratio must be a number between 0 and 1, got 2"],
    [{ name: "a", kind: "c" }, "kind", 'kind must be one of "a", "b", got "c"'],
    [{ name: "a", tags: ["x", 1] }, "tags[1]", "tags[1] must be a string, got a number"],
    [{ name: "a", tags: ["x", "y", "z"] }, "tags", "tags must contain at most 2 items"],
    [{ name: "a", price: "1x" }, "price", "price must be digits"],
    [{ name: "a", price: -1 }, "price", "price must be a number of at least 0, got -1"],
    [{ name: "a", price: true }, "price", "price must be digits or a number"],
    [{ name: "a", meta: { a: "1", b: "2" } }, "meta", "meta must have at most 1 entries, got 2"],
    [{ name: "a", meta: { abc: "1" } }, "meta", "meta keys must be at most 2 characters long"],
    [{ name: "a", strict: { x: 1, y: 2 } }, "strict.y", "strict.y is not a recognised property"],
    ["text", "body", "body must be an object, got a string"],
  ])("%j → %s", (input, field, message) => {
    expect(violation(() => validate(body, input))).toEqual({ field, message });
  });

  it("accepts a valid body and keeps unknown keys", () => {
    expect(validate(body, { name: "a", extra: [1] })).toEqual({ name: "a", extra: [1] });
  });
});

describe("ChatRequest", () => {
  it("parses into a typed request, keeping unknown fields", () => {
    const req = ChatRequest.parse({ messages: [{ role: "user", content: "hi" }], temperature: 0.5, custom: 1 }, { brand: "service" });
    expect(req.messages[0]!.role).toBe("user");
    expect(req.temperature).toBe(0.5);
    expect((req as Record<string, unknown>).custom).toBe(1);
  });

  it("names the first broken field, the cross-field rule included", () => {
    expect(violation(() => ChatRequest.parse([], { brand: "service" }))).toEqual({ field: "body", message: "body must be a JSON object" });
    expect(
      violation(() =>
        ChatRequest.parse({ messages: [{ role: "user", content: "x" }], reasoning_effort: "low", reasoning: { effort: "high" } }, { brand: "service" }),
      ),
    ).toEqual({ field: "reasoning_effort", message: 'reasoning_effort must not differ from reasoning.effort ("low" vs "high")' });
    expect(violation(() => ChatRequest.parse({ messages: [{ role: "robot", content: "x" }] }, { brand: "service" }))?.field).toBe("messages[0].role");
  });
});
