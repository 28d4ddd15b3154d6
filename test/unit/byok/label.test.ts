import { describe, expect, it } from "vitest";
import { byokLabel, KNOWN_KEY_PREFIXES, LABEL_TAIL } from "../../../src/core/byok/label.js";

describe("BYOK label masking rule", () => {
  it.each([
    ["sk-proj-abcdefghijklmnopqrstuvwxyzAbCd", "sk-proj-...AbCd"],
    ["sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123", "sk-ant-api03-...0123"],
    ["sk-or-v1-0e6f00000000000000000000000000000000001c96", "sk-or-v1-...1c96"],
    ["sk-abcdefghijklmnopqrstuvwxyz9876", "sk-...9876"],
    ["AIzaSyA1234567890abcdefghijklmnopq", "AIza...nopq"],
    ["xai-abcdefghijklmnopqrstuvwxyzWXYZ", "xai-...WXYZ"],
    ["gsk_abcdefghijklmnopqrstuvwxyz1234", "gsk_...1234"],
    ["0123456789abcdefghijklmnopqrstuv", "...stuv"],
  ])("%s → %s", (key, label) => {
    expect(byokLabel(key)).toBe(label);
  });

  it.each(["", "a", "sk-short", "sk-proj-1234567890", "x".repeat(19)])("shows nothing of a short key (%j)", (key) => {
    expect(byokLabel(key)).toBe("***");
  });

  it("shows nothing when the part after a known prefix is short", () => {
    // 21 characters, but only 8 after "sk-ant-api03-".
    expect(byokLabel("sk-ant-api03-12345678")).toBe("***");
  });

  it("omits a tail that is not printable ASCII", () => {
    expect(byokLabel(`sk-${"a".repeat(30)}é\u00e9\n `)).toBe("sk-...");
  });

  it("never carries more than 4 characters of the secret, for random keys of every length and prefix", () => {
    const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
    for (let n = 0; n < 2000; n++) {
      const prefix = n % 3 === 0 ? "" : KNOWN_KEY_PREFIXES[n % KNOWN_KEY_PREFIXES.length]!;
      const len = n % 70;
      let secret = "";
      for (let i = 0; i < len; i++) secret += alphabet[(n * 31 + i * 17) % alphabet.length];
      const key = prefix + secret;
      const label = byokLabel(key);
      if (label === "***") continue;
      const [shownPrefix, tail] = label.split("...") as [string, string];
      expect(key.startsWith(shownPrefix)).toBe(true);
      expect(KNOWN_KEY_PREFIXES.includes(shownPrefix) || shownPrefix === "").toBe(true);
      expect(tail.length).toBeLessThanOrEqual(LABEL_TAIL);
      expect(key.endsWith(tail)).toBe(true);
      expect(key.length - shownPrefix.length).toBeGreaterThanOrEqual(16);
    }
  });
});
