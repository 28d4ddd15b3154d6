import { describe, expect, it } from "vitest";
import { CreateByokKeyRequest, UpdateByokKeyRequest } from "../../../src/contract/requests/byok.js";
import { RuleViolation, validate } from "../../../src/contract/requests/kit.js";

function messageOf(schema: typeof CreateByokKeyRequest | typeof UpdateByokKeyRequest, body: unknown): string | undefined {
  try {
    validate(schema, body);
    return undefined;
  } catch (err) {
    if (err instanceof RuleViolation) return err.message;
    throw err;
  }
}

const valid = { provider: "openai", key: "sk-0123456789abcdefghij" };

describe("BYOK request bodies: a value of the wrong JSON type gets the service's own sentence", () => {
  it.each<[string, Record<string, unknown>, string]>([
    ["allowed_models as a string", { allowed_models: "gpt-4o" }, "allowed_models must be an array, got a string"],
    ["allowed_user_ids as an object", { allowed_user_ids: { a: 1 } }, "allowed_user_ids must be an array, got an object"],
    ["allowed_api_key_hashes as a number", { allowed_api_key_hashes: 3 }, "allowed_api_key_hashes must be an array, got a number"],
    ["an allowed model that is a number", { allowed_models: ["a", 7] }, "allowed_models[1] must be a string, got a number"],
    ["workspace_id as a number", { workspace_id: 5 }, "workspace_id must be a string, got a number"],
    ["key as a number", { key: 12345 }, "key must be a string, got a number"],
    ["disabled as a string", { disabled: "yes" }, "disabled must be a boolean, got a string"],
  ])("%s", (_, fields, message) => {
    expect(messageOf(CreateByokKeyRequest, { ...valid, ...fields })).toBe(message);
    if (!("workspace_id" in fields)) expect(messageOf(UpdateByokKeyRequest, fields)).toBe(message); // not updatable
  });

  it("never repeats a submitted value in a type error", () => {
    const secret = "sk-live-0123456789abcdefghijklmnop";
    for (const fields of [{ allowed_models: secret }, { workspace_id: [secret] }, { name: { k: secret } }]) {
      const message = messageOf(CreateByokKeyRequest, { ...valid, ...fields });
      expect(message).toBeDefined();
      expect(message).not.toContain(secret);
    }
  });

  it("still accepts null and lists of strings", () => {
    expect(messageOf(CreateByokKeyRequest, { ...valid, allowed_models: null, allowed_user_ids: ["u1"], workspace_id: "w" })).toBeUndefined();
  });
});
