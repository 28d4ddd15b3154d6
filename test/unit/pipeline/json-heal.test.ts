/** The response-healing plugin's JSON repair (src/core/chat/pipeline/plugins/json-heal.ts), without a server. */
import { describe, expect, it } from "vitest";
import { createSchemaChecker, cutJson, healJson } from "../../../src/core/chat/pipeline/plugins/json-heal.js";

const checker = createSchemaChecker();
const object = { kind: "object" } as const;
const person = {
  kind: "schema",
  schema: { $schema: "https://json-schema.org/draft/2020-12/schema", type: "object", properties: { name: { type: "string" }, age: { type: "integer" } }, required: ["name", "age"], additionalProperties: false },
} as const;

describe("healJson", () => {
  it.each([
    ["a code fence with prose around it", 'Sure! Here it is:\n```json\n{"name": "Ada", "age": 36}\n```\nAnything else?', ["extracted"]],
    ["prose before and after, no fence", 'The answer is {"name": "Ada", "age": 36} as requested.', ["extracted"]],
    ["a trailing comma", '{"name": "Ada", "age": 36,}', ["repaired"]],
    ["single quotes", "{'name': 'Ada', 'age': 36}", ["repaired"]],
    ["a truncated object", '{"name": "Ada", "age": 36', ["repaired"]],
    ["a fence, single quotes and a trailing comma", "```json\n{'name': 'Ada', 'age': 36,}\n```", ["extracted", "repaired"]],
    ["braces inside strings", 'Result: {"name": "A}d{a", "age": 36} done', ["extracted"]],
  ])("%s", (_name, answer, actions) => {
    const r = healJson(answer, object, checker);
    expect(r.healed).toBe(true);
    expect(r.valid).toBe(true);
    expect(r.actions).toEqual(actions);
    expect(typeof JSON.parse(r.text)).toBe("object");
  });

  it("valid JSON is left alone", () => {
    expect(healJson('{"a":1}', object, checker)).toEqual({ text: '{"a":1}', healed: false, valid: true, actions: [] });
  });

  it("checks the schema: paths and rules, no values", () => {
    expect(healJson('{"name": "Ada", "age": 36}', person, checker)).toMatchObject({ healed: false, valid: true });
    const r = healJson("```json\n{'name': 'Ada', 'age': 'old',}\n```", person, checker);
    expect(r).toMatchObject({ healed: true, valid: false });
    expect(r.errors).toEqual(["/age must be integer"]);
  });

  it("nothing to repair: the answer unchanged, not valid", () => {
    expect(healJson("I cannot help with that.", object, checker)).toMatchObject({ text: "I cannot help with that.", healed: false, valid: false });
  });

  it("a JSON array is not a json_object answer", () => {
    expect(healJson("[1, 2]", object, checker)).toMatchObject({ healed: false, valid: false });
  });

  it("cutJson takes arrays only when allowed", () => {
    expect(cutJson("x [1, {\"a\": 2}] y", true)).toBe('[1, {"a": 2}]');
    expect(cutJson("x [1, {\"a\": 2}] y", false)).toBe('{"a": 2}');
  });
});
