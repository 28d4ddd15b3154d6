/**
 * Every response is in the {error: {code, message, metadata}} envelope, including the ones Fastify
 * and Node's HTTP parser produce before a route runs; none echoes the request path; intern paths
 * carry metadata.reason (an unsupported `Expect` and CONNECT, which Node answers itself, included). A
 * client that never finishes its body is cut off with 408.
 */
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../helpers/harness.js";

/** Sends raw bytes and resolves with everything the server answers before it closes the connection. */
function raw(port: number, request: string): Promise<{ status: number; body: any; text: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(request));
    let out = "";
    socket.on("data", (d) => (out += d));
    socket.on("error", reject);
    socket.on("close", () => {
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(out)?.[1] ?? 0);
      const text = out.slice(out.indexOf("\r\n\r\n") + 4);
      let body: any;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      resolve({ status, body, text });
    });
  });
}

const INTERN = "/api/v1/interns";

describe("HTTP-level errors in the envelope", () => {
  let h: Harness;
  let port = 0;
  beforeAll(async () => {
    h = await startHarness({ env: { PORTICO_REQUEST_TIMEOUT_MS: "1000" } });
    port = Number(new URL(h.baseUrl).port);
  });
  afterAll(() => h?.close());

  const get = (path: string, extra = "") => `GET ${path} HTTP/1.1\r\nHost: x\r\n${extra}Connection: close\r\n\r\n`;
  const post = (path: string) => `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`;

  const cases: Array<[string, string, number, boolean]> = [
    ["bad percent-encoding", get("/api/v1/presets/%E0%A4%A"), 400, false],
    ["bad percent-encoding, intern route", post(`${INTERN}/%E0%A4%A/chat/completions`), 400, true],
    ["path parameter over 1024 characters", get(`/api/v1/presets/${"a".repeat(1100)}`), 414, false],
    ["path parameter over 1024 characters, intern route", post(`${INTERN}/${"a".repeat(1100)}/chat/completions`), 414, true],
    ["oversized headers", get("/api/v1/key", `X-Big: ${"b".repeat(20_000)}\r\n`), 431, false],
    ["not HTTP at all", "HELLO\r\n\r\n", 400, false],
    ["unknown route", get("/nope/secret-looking-path"), 404, false],
    ["unknown route under interns", get(`${INTERN}/abc/nope-path`), 404, true],
    ["unknown method", post("/api/v1/byok-nope"), 404, false],
    ["an Expect other than 100-continue", get("/api/v1/key", "Expect: bogus\r\n"), 417, false],
    ["CONNECT", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 405, false],
  ];

  for (const [name, request, status, intern] of cases) {
    it(`${name}: ${status} in the envelope`, async () => {
      const res = await raw(port, request);
      expect(res.status).toBe(status);
      expect(res.body, res.text).toBeDefined();
      expect(Object.keys(res.body)).toEqual(["error"]);
      expect(res.body.error.code).toBe(status);
      expect(typeof res.body.error.message).toBe("string");
      expect(res.text).not.toContain("aaaaaaaaaa");
      expect(res.text).not.toContain("secret-looking-path");
      expect(res.text).not.toContain("%E0");
      if (intern) expect(res.body.error.metadata).toMatchObject({ reason: expect.any(String), retryable: false });
    });
  }

  it("cuts off a client whose body never completes with 408 in the envelope", async () => {
    const res = await raw(
      port,
      `POST /api/v1/byok HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"provider":`,
    );
    expect(res.status).toBe(408);
    expect(res.body.error.code).toBe(408);
  });

  it("cuts off many unauthenticated slow clients, not only one", async () => {
    const results = await Promise.all(
      Array.from({ length: 50 }, () =>
        raw(port, `POST /api/v1/presets/x/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{`),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(results.map(() => 408));
  });
});
