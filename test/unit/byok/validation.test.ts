import { ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { errorDetailOf } from "../../../src/core/errors.js";
import {
  validateFlags,
  validateKey,
  validateKeyHashes,
  validateName,
  validateProvider,
  validateServedProvider,
  validateStringList,
} from "../../../src/core/byok/validation.js";

function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return errorDetailOf(err as ConnectError)?.field;
  }
  return undefined;
}

const h = "a".repeat(64);

describe("BYOK validation rules", () => {
  it("serves-provider check: a slug of the right shape that no adapter serves is refused on provider", () => {
    const serves = (slug: string) => slug === "openai" || slug === "vllm";
    expect(validateServedProvider("vllm", serves)).toBe("vllm");
    expect(fieldOf(() => validateServedProvider("amazon-bedrock", serves))).toBe("provider");
    expect(fieldOf(() => validateServedProvider("OpenAI", serves))).toBe("provider");
  });

  it.each<[string, () => unknown, string | undefined]>([
    ["missing key", () => validateKey(undefined), "key"],
    ["empty key", () => validateKey(""), "key"],
    ["blank key", () => validateKey(" \t\n"), "key"],
    ["32 KiB key", () => validateKey("k".repeat(32768)), undefined],
    ["32 KiB + 1 key", () => validateKey("k".repeat(32769)), "key"],
    ["multi-byte key over 32 KiB in bytes", () => validateKey("é".repeat(16385)), "key"],
    ["known provider", () => validateProvider("openai"), undefined],
    ["provider slug of a bad shape", () => validateProvider("Acme Corp"), "provider"],
    ["key with an ellipsis (U+2026)", () => validateKey("sk-proj-0123456789\u2026"), "key"],
    ["key with a line break", () => validateKey("sk-proj-0123\n456789"), "key"],
    ["empty provider", () => validateProvider(""), "provider"],
    ["255-character name", () => validateName("n".repeat(255)), undefined],
    ["256-character name", () => validateName("n".repeat(256)), "name"],
    ["255 emoji name", () => validateName("😀".repeat(255)), undefined],
    ["null hashes", () => validateKeyHashes(null), undefined],
    ["no hashes", () => validateKeyHashes([]), "allowed_api_key_hashes"],
    ["100 hashes", () => validateKeyHashes(Array(100).fill(h)), undefined],
    ["101 hashes", () => validateKeyHashes(Array(101).fill(h)), "allowed_api_key_hashes"],
    ["upper-case hash", () => validateKeyHashes(["A".repeat(64)]), "allowed_api_key_hashes"],
    ["65-character hash", () => validateKeyHashes(["a".repeat(65)]), "allowed_api_key_hashes"],
    ["100 models", () => validateStringList("allowed_models", Array(100).fill("m")), undefined],
    ["101 models", () => validateStringList("allowed_models", Array(101).fill("m")), "allowed_models"],
    ["empty models list", () => validateStringList("allowed_models", []), undefined],
    ["101 users", () => validateStringList("allowed_user_ids", Array(101).fill("u")), "allowed_user_ids"],
    ["fallback + byok-only", () => validateFlags({ isFallback: true, isByokOnly: true, isRequired: false }), "is_byok_only"],
    ["fallback + required", () => validateFlags({ isFallback: true, isByokOnly: false, isRequired: true }), "is_required"],
    ["required + byok-only", () => validateFlags({ isFallback: false, isByokOnly: true, isRequired: true }), undefined],
    ["fallback alone", () => validateFlags({ isFallback: true, isByokOnly: false, isRequired: false }), undefined],
  ])("%s", (_name, fn, field) => {
    expect(fieldOf(fn)).toBe(field);
  });

  it("never repeats the submitted value in a message", () => {
    const secret = "sk-proj-SECRET-VALUE-1234567890";
    for (const fn of [() => validateProvider(secret), () => validateKeyHashes([secret]), () => validateKey(secret + "x".repeat(40000))]) {
      try {
        fn();
        expect.unreachable();
      } catch (err) {
        expect((err as Error).message).not.toContain("SECRET-VALUE");
      }
    }
  });
});
