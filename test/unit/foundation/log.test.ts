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

describe("logging redaction, place by place", () => {
  const line = (log: (logger: ReturnType<typeof createLogger>) => void) => {
    const { lines, logger } = capture();
    log(logger);
    return JSON.parse(lines[0]!) as Record<string, any>;
  };

  it("censors the listed names at the top and one level below, leaving the caller's objects as they were", () => {
    const given = { key: "a", body: { text: "b" }, nested: { token: "c", apiKey: "d", keep: 1 }, list: [{ key: "e" }], other: 2 };
    const out = line((l) => l.info(given, "x"));
    expect(out).toMatchObject({ key: "[REDACTED]", body: "[REDACTED]", nested: { token: "[REDACTED]", apiKey: "[REDACTED]", keep: 1 }, other: 2, msg: "x" });
    // Two levels down is not a listed place (as with pino's `*.key`).
    expect(out.list).toEqual([{ key: "e" }]);
    expect(given).toEqual({ key: "a", body: { text: "b" }, nested: { token: "c", apiKey: "d", keep: 1 }, list: [{ key: "e" }], other: 2 });
  });

  it("censors the key headers under headers, req.headers and request.headers", () => {
    const headers = { authorization: "Bearer s1", "x-api-key": "s2", "x-goog-api-key": "s3", accept: "json" };
    const out = line((l) => l.info({ headers, req: { headers, url: "/" }, request: { headers } }, "x"));
    const censoredHeaders = { authorization: "[REDACTED]", "x-api-key": "[REDACTED]", "x-goog-api-key": "[REDACTED]", accept: "json" };
    expect(out.headers).toEqual(censoredHeaders);
    expect(out.req).toEqual({ headers: censoredHeaders, url: "/" });
    expect(out.request).toEqual({ headers: censoredHeaders });
    expect(headers.authorization).toBe("Bearer s1");
  });

  it("censors child loggers' bindings and objects interpolated into the message, and keeps errors whole", () => {
    const key = generateApiKey();
    expect(line((l) => l.child({ key, component: "c" }).info("x"))).toMatchObject({ key: "[REDACTED]", component: "c" });
    expect(JSON.stringify(line((l) => l.info("saw %j", { token: key })))).not.toContain(key);
    const err = Object.assign(new Error(`boom ${key}`), { code: "E_X", body: "raw" });
    const out = line((l) => l.error({ err }, "failed"));
    expect(out.err).toMatchObject({ type: "Error", message: "boom pk-v1-[REDACTED]", code: "E_X" });
    expect(out.err.stack).toContain("boom pk-v1-[REDACTED]");
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
    // The same verdict as comparing the bytes the hex decodes to (the Buffers it compared before its string path).
    const bytesEqual = (a: string, b: string) => {
      const [x, y] = [Buffer.from(a, "hex"), Buffer.from(b, "hex")];
      return x.length === y.length && x.length > 0 && x.equals(y);
    };
    const cases = [h, hashSecret("y"), h.toUpperCase(), h.slice(0, 62), `${h.slice(0, 63)}g`, `${h.slice(0, 63)}/`, `${h.slice(0, 63)}:`, `${h.slice(0, 63)}G`, "", "0", "00", "ff", "FF", "fg", "@`"];
    for (let i = 0; i < 64; i++) cases.push(h.slice(0, i) + (h[i] === "0" ? "1" : "0") + h.slice(i + 1));
    for (const a of cases) for (const b of cases) expect(digestsEqual(a, b), `${a} ${b}`).toBe(bytesEqual(a, b));
    expect(bearerToken("Bearer abc")).toBe("abc");
    expect(bearerToken("bearer abc")).toBe("abc");
    expect(bearerToken("Basic abc")).toBeUndefined();
    expect(bearerToken("Bearer a b")).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });
});
