/**
 * A billable POST is sent at most once unless it provably did not leave (src/core/chat/providers/http.ts):
 * a raw TCP provider answers the first request on a kept-alive connection, then reads the next request on
 * the same connection and resets it. The reset comes after the request was written, so it is not re-sent:
 * the provider counts exactly two requests. Also: the first-byte limit and `Retry-After` parsing.
 */
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { KEEPALIVE_IDLE_MS, postJson, retryAfterMs, keyScrubber } from "../../../../src/core/chat/providers/http.js";
import { UpstreamError } from "../../../../src/core/chat/providers/types.js";

interface RawProvider {
  url: string;
  /** Complete requests read, over every connection. */
  received: number;
  connections: number;
  close(): Promise<void>;
}

/** Reads whole HTTP/1.1 requests; `answer(n, socket)` handles the n-th (1-based). */
async function rawProvider(answer: (n: number, socket: net.Socket) => void): Promise<RawProvider> {
  const sockets = new Set<net.Socket>();
  const p: RawProvider = { url: "", received: 0, connections: 0, close: async () => undefined };
  const server = net.createServer((socket) => {
    p.connections += 1;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
    let buf = Buffer.alloc(0);
    socket.on("data", (data) => {
      buf = Buffer.concat([buf, data]);
      for (;;) {
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buf.subarray(0, end).toString("latin1");
        const length = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
        if (buf.length < end + 4 + length) return;
        buf = buf.subarray(end + 4 + length);
        p.received += 1;
        answer(p.received, socket);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  p.url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  p.close = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
  return p;
}

const OK_BODY = JSON.stringify({ id: "x", object: "chat.completion", choices: [] });
const ok = (socket: net.Socket) =>
  socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(OK_BODY)}\r\nconnection: keep-alive\r\n\r\n${OK_BODY}`);

const post = (url: string, extra: { firstByteTimeoutMs?: number } = {}) =>
  postJson({ url: `${url}/v1/chat/completions`, headers: {}, body: { model: "m" }, signal: new AbortController().signal, apiKey: "sk-test-key", errorMessage: () => undefined, ...extra });

describe("upstream POSTs are not re-sent once written", () => {
  let provider: RawProvider | undefined;
  afterEach(async () => {
    await provider?.close();
    provider = undefined;
  });

  it("a kept-alive connection reset after the provider read the request: one failure, no second copy", async () => {
    provider = await rawProvider((n, socket) => (n === 1 ? ok(socket) : socket.resetAndDestroy()));
    const first = await post(provider.url);
    expect(await first.text()).toBe(OK_BODY);
    await new Promise((resolve) => setImmediate(resolve)); // the connection goes back to the pool
    const err = await post(provider.url).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect((err as UpstreamError).sent).toBe(true);
    expect((err as UpstreamError).message).toMatch(/not re-sent/);
    expect(provider.connections).toBe(1); // the second request went out on the kept-alive connection
    expect(provider.received).toBe(2);
  });

  it("a kept-alive connection is reused while it works", async () => {
    provider = await rawProvider((_n, socket) => ok(socket));
    for (let i = 0; i < 3; i++) {
      await (await post(provider.url)).text();
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(provider.received).toBe(3);
    expect(provider.connections).toBe(1);
  });

  it("a response slower than the pool's idle-connection limit is waited for (the idle limit applies to free connections only)", async () => {
    provider = await rawProvider((n, socket) => (n === 1 ? ok(socket) : setTimeout(() => ok(socket), KEEPALIVE_IDLE_MS + 500)));
    await (await post(provider.url)).text();
    await new Promise((resolve) => setImmediate(resolve));
    const res = await post(provider.url); // on the pooled connection
    expect(await res.text()).toBe(OK_BODY);
    expect(provider.received).toBe(2);
    expect(provider.connections).toBe(1);
  }, 20_000);

  it("a provider that never answers fails at the first-byte limit, retryable and marked timed out", async () => {
    provider = await rawProvider(() => undefined);
    const err = await post(provider.url, { firstByteTimeoutMs: 100 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect((err as UpstreamError).timedOut).toBe(true);
    expect((err as UpstreamError).retryable).toBe(true);
    expect(provider.received).toBe(1);
  });
});

describe("Retry-After and key scrubbing", () => {
  it("reads retry-after-ms, seconds and HTTP dates, capped at an hour", () => {
    expect(retryAfterMs({ "retry-after-ms": "1500" })).toBe(1500);
    expect(retryAfterMs({ "retry-after": "30" })).toBe(30_000);
    expect(retryAfterMs({ "retry-after": new Date(Date.UTC(2030, 0, 1, 0, 0, 10)).toUTCString() }, Date.UTC(2030, 0, 1))).toBe(10_000);
    expect(retryAfterMs({ "retry-after": "999999" })).toBe(3_600_000);
    expect(retryAfterMs({ "retry-after": "soon" })).toBeUndefined();
    expect(retryAfterMs({})).toBeUndefined();
  });

  it("scrubs the key as is and JSON-escaped, and leaves other text untouched (same string)", () => {
    const scrub = keyScrubber("sk-a/b\"c")!;
    expect(scrub(JSON.stringify({ t: "x sk-a/b\"c y" }))).toBe(JSON.stringify({ t: "x [redacted] y" }));
    expect(scrub('{"t":"x sk-a\\/b\\"c"}')).toBe('{"t":"x [redacted]"}');
    const text = '{"t":"nothing here"}';
    expect(scrub(text)).toBe(text);
    expect(keyScrubber("")).toBeUndefined();
  });
});
