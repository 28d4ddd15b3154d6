/**
 * Content logging's scrubbing and sealing (src/core/chat/content-log.ts): credential-named fields dropped at any
 * depth, the request's provider keys redacted in every JSON form, key-shaped strings redacted; the associated data
 * binds the generation id and organization.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { contentAad, scrubbedJson } from "../../../src/core/chat/content-log.js";
import { Keyring, SealOpenError } from "../../../src/core/byok/keyring.js";

describe("content log scrubbing", () => {
  it("drops credential-named fields at any depth", () => {
    const text = scrubbedJson(
      { model: "m", headers: { Authorization: "Bearer x", "X-Api-Key": "y", accept: "json" }, extra: [{ api_key: "z", apiKey: "w", keep: 1 }], password: "p" },
      [],
    );
    expect(JSON.parse(text)).toEqual({ model: "m", headers: { accept: "json" }, extra: [{ keep: 1 }] });
  });

  it("redacts the request's provider keys, as is and JSON-escaped", () => {
    const key = 'prov/key"with-escapes-0123456789';
    const text = scrubbedJson({ messages: [{ role: "user", content: `mine: ${key} again ${key}` }] }, [key]);
    expect(text).not.toContain("prov/key");
    expect(text.match(/\[redacted\]/g)?.length).toBe(2);
  });

  it("redacts strings shaped like well-known provider keys", () => {
    const keys = ["sk-proj-abcdefghijklmnopqrstuvwxyz0123", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "AIzaSyA1234567890abcdefghijklmnopqrstuv", "gsk_abcdefghijklmnopqrstuvwxyz", "xai-abcdefghijklmnopqrstuvwxyz"];
    const text = scrubbedJson({ content: keys.join(" | ") }, []);
    for (const k of keys) expect(text).not.toContain(k);
    expect(JSON.parse(text).content).toBe(Array(keys.length).fill("[redacted]").join(" | "));
    // Ordinary words starting alike are kept.
    expect(JSON.parse(scrubbedJson({ content: "sk-short and skiing" }, [])).content).toBe("sk-short and skiing");
  });

  it("binds the sealed content to its generation id and organization", () => {
    const keyring = new Keyring({ primaryId: "k1", keys: new Map([["k1", randomBytes(32)]]) });
    const { keyId, blob } = keyring.seal(Buffer.from("{}"), contentAad("gen-a", "org-1"));
    expect(keyring.open(keyId, blob, contentAad("gen-a", "org-1")).toString()).toBe("{}");
    expect(() => keyring.open(keyId, blob, contentAad("gen-b", "org-1"))).toThrow(SealOpenError);
    expect(() => keyring.open(keyId, blob, contentAad("gen-a", "org-2"))).toThrow(SealOpenError);
    // Length-prefixed: moving a character between the parts changes the bytes.
    expect(contentAad("gen-ab", "c").equals(contentAad("gen-a", "bc"))).toBe(false);
  });
});
