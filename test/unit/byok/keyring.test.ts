import { mkdtempSync, readFileSync, statSync, writeFileSync, chmodSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import {
  Keyring,
  KeyringError,
  SealOpenError,
  derivedKeyId,
  loadKeyring,
  parseKeyringText,
  writeKeyringFile,
} from "../../../src/core/byok/keyring.js";
import {
  CredentialUnusableError,
  credentialAad,
  decryptCredentialKey,
  sealCredentialKey,
} from "../../../src/core/byok/credential-crypto.js";

const material = () => randomBytes(32);
const ring = (ids = ["k1"]) => {
  const keys = new Map(ids.map((id) => [id, material()]));
  return new Keyring({ primaryId: ids[ids.length - 1]!, keys });
};
const tmp = () => mkdtempSync(join(tmpdir(), "portico-keyring-"));

describe("keyring sealing (AES-256-GCM)", () => {
  it("round-trips and records the key id; blob = version ‖ 12-byte nonce ‖ 16-byte tag ‖ ciphertext", () => {
    const k = ring();
    const aad = Buffer.from("row");
    const { keyId, blob } = k.seal(Buffer.from("secret"), aad);
    expect(keyId).toBe("k1");
    expect(blob[0]).toBe(1);
    expect(blob.length).toBe(1 + 12 + 16 + 6);
    expect(k.open(keyId, blob, aad).toString()).toBe("secret");
  });

  it("uses a fresh nonce per encryption", () => {
    const k = ring();
    const nonces = new Set<string>();
    for (let i = 0; i < 500; i++) nonces.add(k.seal(Buffer.from("same"), Buffer.alloc(0)).blob.subarray(1, 13).toString("hex"));
    expect(nonces.size).toBe(500);
  });

  it.each([
    ["a flipped ciphertext bit", (b: Buffer) => (b[b.length - 1]! ^= 1)],
    ["a flipped tag bit", (b: Buffer) => (b[20]! ^= 0x80)],
    ["a flipped nonce bit", (b: Buffer) => (b[3]! ^= 1)],
  ])("refuses %s", (_name, mutate) => {
    const k = ring();
    const { keyId, blob } = k.seal(Buffer.from("secret"), Buffer.from("row"));
    mutate(blob);
    expect(() => k.open(keyId, blob, Buffer.from("row"))).toThrow(SealOpenError);
  });

  it("refuses other associated data, another format version, truncation and unknown key ids", () => {
    const k = ring();
    const { keyId, blob } = k.seal(Buffer.from("secret"), Buffer.from("row-1"));
    expect(() => k.open(keyId, blob, Buffer.from("row-2"))).toThrow(/authentication_failed/);
    const v2 = Buffer.from(blob);
    v2[0] = 2;
    expect(() => k.open(keyId, v2, Buffer.from("row-1"))).toThrow(/malformed/);
    expect(() => k.open(keyId, blob.subarray(0, 20), Buffer.from("row-1"))).toThrow(/malformed/);
    expect(() => k.open("nope", blob, Buffer.from("row-1"))).toThrow(/unknown_key/);
  });

  it("seals under the primary and still opens blobs of older keys", () => {
    const old = ring(["k1"]);
    const sealed = old.seal(Buffer.from("x"), Buffer.alloc(0));
    const state = old.exportState();
    state.keys.set("k2", material());
    state.primaryId = "k2";
    const both = new Keyring(state);
    expect(both.seal(Buffer.from("y"), Buffer.alloc(0)).keyId).toBe("k2");
    expect(both.open("k1", sealed.blob, Buffer.alloc(0)).toString()).toBe("x");
  });

  it("never shows key material when inspected or serialized", () => {
    const k = ring();
    const secretHex = k.exportState().keys.get("k1")!.toString("hex");
    const secretB64 = k.exportState().keys.get("k1")!.toString("base64");
    for (const text of [inspect(k), JSON.stringify(k), String(k)]) {
      expect(text).not.toContain(secretHex);
      expect(text).not.toContain(secretB64);
    }
  });
});

describe("credential binding", () => {
  const binding = { id: "c1", workspaceId: "w1", provider: "openai" };
  it("binds a sealed key to its credential id, workspace and provider", () => {
    const k = ring();
    const sealed = sealCredentialKey(k, binding, "sk-secret");
    const row = { ...binding, keyId: sealed.keyId, ciphertext: sealed.ciphertext };
    expect(decryptCredentialKey(k, row)).toBe("sk-secret");
    for (const other of [{ id: "c2" }, { workspaceId: "w2" }, { provider: "groq" }]) {
      expect(() => decryptCredentialKey(k, { ...row, ...other })).toThrow(CredentialUnusableError);
    }
  });

  it("length-prefixes the associated data so field boundaries cannot shift", () => {
    expect(credentialAad({ id: "ab", workspaceId: "c", provider: "d" }).equals(credentialAad({ id: "a", workspaceId: "bc", provider: "d" }))).toBe(false);
  });

  it("reports deleted, empty and missing material explicitly, never an empty key", () => {
    const k = ring();
    expect(() => decryptCredentialKey(k, { ...binding, keyId: null, ciphertext: null })).toThrow(/unusable: the credential has no stored key material/);
    expect(() => decryptCredentialKey(k, { ...binding, keyId: "k1", ciphertext: new Uint8Array() })).toThrow(CredentialUnusableError);
    expect(() => decryptCredentialKey(k, { ...binding, keyId: null, ciphertext: null, deletedAt: new Date() })).toThrow(/deleted/);
    const err = (() => {
      try {
        decryptCredentialKey(k, { ...binding, keyId: "gone", ciphertext: sealCredentialKey(k, binding, "x").ciphertext });
      } catch (e) {
        return e as CredentialUnusableError;
      }
    })();
    expect(err?.reason).toBe("unknown_key");
  });
});

describe("keyring configuration", () => {
  it("accepts 32 bytes as hex, base64 or base64url, with a stable derived id", () => {
    const key = material();
    const ids = [key.toString("hex"), key.toString("base64"), key.toString("base64url")].map((t) => parseKeyringText(t, "k").primaryId);
    expect(new Set(ids).size).toBe(1);
    expect(ids[0]).toBe(derivedKeyId(key));
  });

  it.each([
    ["a short hex key", randomBytes(16).toString("hex")],
    ["a short base64 key", randomBytes(31).toString("base64")],
    ["a long key", randomBytes(33).toString("base64")],
    ["garbage", "not a key!"],
    ["JSON without primary", JSON.stringify({ keys: {} })],
    ["JSON whose primary is missing", JSON.stringify({ primary: "b", keys: { a: randomBytes(32).toString("base64") } })],
    ["JSON with a short key", JSON.stringify({ primary: "a", keys: { a: randomBytes(8).toString("base64") } })],
  ])("refuses %s without echoing it", (_name, text) => {
    let message = "";
    try {
      parseKeyringText(text, "PORTICO_MASTER_KEY");
    } catch (err) {
      expect(err).toBeInstanceOf(KeyringError);
      message = (err as Error).message;
    }
    expect(message).not.toBe("");
    if (text.length > 12) expect(message).not.toContain(text);
  });

  it("creates <dataDir>/master.key with mode 0600 on first run and reuses it afterwards", () => {
    const dir = join(tmp(), "data");
    const first = loadKeyring({ masterKey: undefined, masterKeyFile: undefined, dataDir: dir, production: false });
    expect(first.source).toMatchObject({ kind: "file", created: true });
    const path = join(dir, "master.key");
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    const second = loadKeyring({ masterKey: undefined, masterKeyFile: undefined, dataDir: dir, production: false });
    expect(second.source).toMatchObject({ created: false });
    expect(second.primaryId).toBe(first.primaryId);
    const blob = first.seal(Buffer.from("x"), Buffer.alloc(0));
    expect(second.open(blob.keyId, blob.blob, Buffer.alloc(0)).toString()).toBe("x");
  });

  it("in production refuses a missing key, a short key and a key file others can read", () => {
    const dir = tmp();
    expect(() => loadKeyring({ masterKey: undefined, masterKeyFile: undefined, dataDir: dir, production: true })).toThrow(
      /production mode needs a master key/,
    );
    expect(() => loadKeyring({ masterKey: randomBytes(16).toString("hex"), masterKeyFile: undefined, dataDir: dir, production: true })).toThrow(
      /32 bytes/,
    );
    const file = join(dir, "key");
    writeFileSync(file, randomBytes(32).toString("base64"));
    chmodSync(file, 0o644);
    expect(() => loadKeyring({ masterKey: undefined, masterKeyFile: file, dataDir: dir, production: true })).toThrow(/chmod 600/);
    chmodSync(file, 0o600);
    expect(loadKeyring({ masterKey: undefined, masterKeyFile: file, dataDir: dir, production: true }).keyIds()).toHaveLength(1);
    expect(() => loadKeyring({ masterKey: undefined, masterKeyFile: join(dir, "missing"), dataDir: dir, production: false })).toThrow(/does not exist/);
  });

  it("picks up a changed key file (new primary) and refuses a reload that changes existing key material", () => {
    const dir = tmp();
    const file = join(dir, "keyring.json");
    const a = material();
    writeKeyringFile(file, { primaryId: "a", keys: new Map([["a", a]]) });
    const warnings: string[] = [];
    const k = loadKeyring({ masterKey: undefined, masterKeyFile: file, dataDir: dir, production: false, refreshIntervalMs: 0, onWarning: (m) => warnings.push(m) });
    const b = material();
    writeKeyringFile(file, { primaryId: "b", keys: new Map([["a", a], ["b", b]]) });
    expect(k.primaryId).toBe("b");
    writeKeyringFile(file, { primaryId: "a", keys: new Map([["a", material()], ["b", b]]) });
    expect(k.primaryId).toBe("b");
    expect(warnings.join("\n")).toMatch(/changed the material of key "a"; reload refused/);
    expect(readFileSync(file, "utf8")).toContain('"primary": "a"');
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });
});

describe("keyring error messages", () => {
  it("never echo key material, even when ids and keys are swapped in keyring JSON", async () => {
    const { parseKeyringText } = await import("../../../src/core/byok/keyring.js");
    const hexKey = "ab".repeat(32);
    const b64Key = Buffer.alloc(32, 7).toString("base64");
    for (const text of [
      JSON.stringify({ primary: "k1", keys: { [hexKey]: "k1" } }),
      JSON.stringify({ primary: hexKey, keys: { [b64Key]: "k1" } }),
      JSON.stringify({ primary: hexKey, keys: { k1: 5 } }),
    ]) {
      let message = "";
      try {
        parseKeyringText(text, "PORTICO_MASTER_KEY");
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).not.toBe("");
      expect(message).not.toContain(hexKey);
      expect(message).not.toContain(b64Key);
    }
  });
});
