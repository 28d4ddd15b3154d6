import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger, scrubSecrets } from "../../../src/log.js";
import { generateApiKey, generateHostToken, labelForSecret, hashSecret, digestsEqual, bearerToken, generateSecret, RUN_TOKEN_PREFIX } from "../../../src/core/identity/keys.js";

function capture() {
  const lines: string[] = [];
  const dest = new Writable({
    write(c, _e, cb) {
      lines.push(String(c));
      cb();
    },
  });
  return { lines, logger: createLogger({ level: "debug", destination: dest }) };
}

describe("logging redaction", () => {
  it("censors authorization headers and key fields wherever they are nested", () => {
    const { lines, logger } = capture();
    const key = generateApiKey();
    logger.info({ req: { headers: { authorization: `Bearer ${key}` } }, key, nested: { token: key, api_key: key } }, "x");
    const out = lines.join("");
    expect(out).not.toContain(key);
    expect(out).toContain("[REDACTED]");
  });

  it("scrubs key-shaped strings from messages and errors", () => {
    const { lines, logger } = capture();
    const key = generateApiKey();
    const token = generateHostToken();
    logger.warn(`saw ${key} and ${token}`);
    logger.error({ err: new Error(`boom ${key}`) }, "failed");
    const out = lines.join("");
    expect(out).not.toContain(key);
    expect(out).not.toContain(token);
    expect(scrubSecrets(`a ${key} b`)).toBe("a pk-v1-[REDACTED] b");
  });

  it("scrubs intern run credentials (prt-v1-) and the x-api-key / x-goog-api-key headers", () => {
    const { lines, logger } = capture();
    const token = generateSecret(RUN_TOKEN_PREFIX);
    logger.info({ req: { headers: { "x-api-key": "secret-a", "x-goog-api-key": "secret-b" } } }, `saw ${token}`);
    const out = lines.join("");
    expect(out).not.toContain(token);
    expect(out).not.toContain("secret-a");
    expect(out).not.toContain("secret-b");
    expect(scrubSecrets(`a ${token} b`)).toBe("a prt-v1-[REDACTED] b");
  });
});

describe("API keys", () => {
  it("are pk-v1- plus 256 random bits, hashed to 64 hex, labelled with 7 hex digits", () => {
    const a = generateApiKey();
    const b = generateApiKey();
    expect(a).toMatch(/^pk-v1-[0-9a-f]{64}$/);
    expect(a).not.toBe(b);
    expect(hashSecret(a)).toMatch(/^[a-f0-9]{64}$/);
    expect(labelForSecret(a)).toBe(`${a.slice(0, 9)}...${a.slice(-4)}`);
    expect(labelForSecret("short")).toBe("***");
  });

  it("compares digests in constant time and parses bearer headers strictly", () => {
    const h = hashSecret("x");
    expect(digestsEqual(h, hashSecret("x"))).toBe(true);
    expect(digestsEqual(h, hashSecret("y"))).toBe(false);
    expect(digestsEqual(h, "")).toBe(false);
    expect(bearerToken("Bearer abc")).toBe("abc");
    expect(bearerToken("bearer abc")).toBe("abc");
    expect(bearerToken("Basic abc")).toBeUndefined();
    expect(bearerToken("Bearer a b")).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });
});
