/**
 * The SSE writer (src/gateway/sse.ts) over a real HTTP response: the first write of a loop turn leaves at once,
 * the writes after it in the same turn leave together as one `res.write` in the check phase, and ending the
 * response sends what is still waiting; the client reads every event in order.
 */
import { once } from "node:events";
import http, { type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { SseWriter } from "../../../src/gateway/sse.js";

const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** Serves one request with `handle`, counting the response's `write` calls; resolves with the body and the texts written. */
async function serve(handle: (sse: SseWriter, res: ServerResponse) => Promise<void> | void): Promise<{ body: string; writes: string[] }> {
  const writes: string[] = [];
  const server = http.createServer((req, res) => {
    const write = res.write.bind(res) as (chunk: string) => boolean;
    res.write = ((chunk: string) => {
      writes.push(chunk);
      return write(chunk);
    }) as typeof res.write;
    const sse = new SseWriter(res, new AbortController().signal);
    sse.open();
    void Promise.resolve(handle(sse, res)).then(() => sse.end());
  });
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
  return { body: await res.text(), writes };
}

describe("SseWriter", () => {
  it("sends a turn's first write at once and the others of that turn as one write", async () => {
    const { body, writes } = await serve(async (sse) => {
      expect(sse.data("a")).toBe(true);
      expect(sse.data("b")).toBe(true);
      expect(sse.comment("keepalive")).toBe(true);
      expect(sse.data("c")).toBe(true);
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
      expect(sse.data("d")).toBe(true);
    });
    expect(body).toBe("data: a\n\ndata: b\n\n: keepalive\n\ndata: c\n\ndata: d\n\n");
    expect(writes).toEqual(["data: a\n\n", "data: b\n\n: keepalive\n\ndata: c\n\n", "data: d\n\n"]);
  });

  it("a turn's first write, made in a promise job, is handed to the socket before the jobs queued after it run", async () => {
    // Node corks the socket on a response's write and uncorks it in a nextTick, which runs only after the
    // promise jobs: the first event of an upstream read would wait for the rest of the read and the pipeline's work.
    let pendingAfterWrite = -1;
    let pendingInLaterJob = -1;
    const { body } = await serve(async (sse, res) => {
      await Promise.resolve();
      sse.data("a");
      pendingAfterWrite = res.socket!.writableLength;
      await Promise.resolve();
      pendingInLaterJob = res.socket!.writableLength;
      sse.data("b");
    });
    expect(body).toBe("data: a\n\ndata: b\n\n");
    expect(pendingAfterWrite).toBe(0);
    expect(pendingInLaterJob).toBe(0);
  });

  it("ending the response sends what the turn still holds", async () => {
    const { body, writes } = await serve((sse) => {
      sse.data("a");
      sse.data("b");
      sse.write("data: [DONE]\n\n");
    });
    expect(body).toBe("data: a\n\ndata: b\n\ndata: [DONE]\n\n");
    expect(writes).toEqual(["data: a\n\n", "data: b\n\ndata: [DONE]\n\n"]);
  });

  it("backpressure: while the socket drains, a write of the turn waits too, and the joined text still arrives", async () => {
    const big = "x".repeat(256 * 1024);
    const { body } = await serve(async (sse) => {
      const first = sse.data(big);
      expect(first).toBeInstanceOf(Promise);
      const second = sse.data("after");
      expect(second).toBeInstanceOf(Promise);
      expect(await first).toBe(true);
      expect(await second).toBe(true);
    });
    expect(body).toBe(`data: ${big}\n\ndata: after\n\n`);
  });
});
