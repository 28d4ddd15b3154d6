/**
 * The adapters' HTTP client (src/core/chat/providers/http.ts): an upstream that stays silent past the idle
 * timeout fails the call with a retryable UpstreamError and its connection is closed, before the response
 * headers and in the middle of a stream alike.
 */
import { afterEach, describe, expect, it } from "vitest";
import { linkedController, openedStream, postJson, sseEvents, sseMap, SSE_END, type UpstreamResponse } from "../../../../src/core/chat/providers/http.js";
import { UpstreamError } from "../../../../src/core/chat/providers/types.js";
import { startFakeOpenAI } from "../../../helpers/fake-upstreams/openai.js";
import type { FakeUpstream } from "../../../helpers/fake-upstreams/server.js";
import { waitFor } from "../../../helpers/wait.js";

const open: FakeUpstream[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((f) => f.close()));
});

const post = (fake: FakeUpstream, body: Record<string, unknown>, signal: AbortSignal) =>
  postJson({
    url: `${fake.url}/v1/chat/completions`,
    headers: { authorization: "Bearer sk-test" },
    body: { model: "m", messages: [{ role: "user", content: "hi" }], ...body },
    signal,
    apiKey: "sk-test",
    errorMessage: () => undefined,
    idleTimeoutMs: 200,
  });

describe("upstream idle timeout", () => {
  it("no response headers in time: a retryable UpstreamError, and the upstream sees the request dropped", async () => {
    const fake = await startFakeOpenAI(undefined, { headerDelayMs: 60_000 });
    open.push(fake);
    const err = await post(fake, {}, new AbortController().signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err).toMatchObject({ status: 0, retryable: true });
    expect((err as Error).message).toContain("sent nothing");
    await fake.clientAborted();
  });

  it("a stream that stalls mid-body fails instead of hanging", async () => {
    const fake = await startFakeOpenAI({ text: ["a", "b", "c"], finish: "stop", usage: { input: 1, output: 3 } }, { chunkDelayMs: 60_000 });
    open.push(fake);
    const controller = linkedController(new AbortController().signal);
    const res = await post(fake, { stream: true }, controller.signal);
    const events: string[] = [];
    const err = await (async () => {
      for await (const e of sseEvents(res, controller)) events.push(e.data);
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err).toMatchObject({ status: 0, retryable: true });
    await fake.clientAborted();
  });
});

/** A response whose body is the given reads, for the SSE reader alone. */
function bodyOf(reads: Buffer[]): UpstreamResponse {
  return {
    status: 200,
    ok: true,
    headers: {},
    text: async () => Buffer.concat(reads).toString("utf8"),
    chunks: async function* () {
      yield* reads;
    },
    cancel: () => undefined,
    release: () => undefined,
  };
}

describe("the SSE reader", () => {
  it("decodes a character split across two reads, and drops a leading byte-order mark", async () => {
    const bytes = Buffer.from("\ufeffdata: {\"t\":\"h\u00e9llo \u{1F600}\"}\n\ndata: [DONE]\n\n", "utf8");
    const cut = bytes.indexOf(Buffer.from("\u{1F600}", "utf8")) + 2; // inside the emoji's four bytes
    const reads = [bytes.subarray(0, 2), bytes.subarray(2, cut), bytes.subarray(cut)]; // and inside the BOM's three
    const data: string[] = [];
    for await (const e of sseEvents(bodyOf(reads), new AbortController())) data.push(e.data);
    expect(data).toEqual(['{"t":"h\u00e9llo \u{1F600}"}', "[DONE]"]);
  });

  /** A body whose first read brings `first`, with `queued` already received behind it (taken without waiting). */
  function queuedBody(first: Buffer, queued: Buffer[]) {
    const calls = { cancel: 0, release: 0 };
    const rest = [...queued];
    const res: UpstreamResponse = {
      ...bodyOf([first]),
      takeQueued: () => rest.shift(),
      cancel: () => void calls.cancel++,
      release: () => void calls.release++,
    };
    return { res, calls, rest };
  }

  it("parses every piece one read delivered together (a character and an event split across them), in order", async () => {
    const bytes = Buffer.from("\ufeffdata: a\n\ndata: {\"t\":\"\u{1F600}\"}\n\ndata: c\n\ndata: [DONE]\n\n", "utf8");
    const emoji = bytes.indexOf(Buffer.from("\u{1F600}", "utf8")) + 1;
    const { res, calls, rest } = queuedBody(bytes.subarray(0, 1), [bytes.subarray(1, emoji), bytes.subarray(emoji, emoji + 5), bytes.subarray(emoji + 5)]);
    const controller = new AbortController();
    const data: string[] = [];
    for await (const e of sseEvents(res, controller, (ev) => ev.data === "[DONE]")) {
      data.push(e.data);
      if (e.data === "[DONE]") break;
    }
    expect(data).toEqual(["a", '{"t":"\u{1F600}"}', "c", "[DONE]"]);
    expect(rest).toEqual([]);
    // Stopped after the end marker: the rest of the body is read (connection kept), nothing aborted.
    expect(calls).toEqual({ cancel: 0, release: 1 });
    expect(controller.signal.aborted).toBe(false);
  });

  it("an event the map rejects fails the stream after the events before it, and drops the body", async () => {
    const { res, calls } = queuedBody(Buffer.from("data: a\n\n"), [Buffer.from("data: bad\n\ndata: c\n\n")]);
    const controller = new AbortController();
    const it = sseMap(res, controller, (e) => {
      if (e.data === "bad") throw new UpstreamError(502, "bad event", true);
      return e.data;
    });
    expect(await it.next()).toEqual({ done: false, value: "a" });
    await expect(it.next()).rejects.toThrow("bad event");
    expect(await it.next()).toEqual({ done: true, value: undefined });
    expect(calls).toEqual({ cancel: 1, release: 0 });
    expect(controller.signal.aborted).toBe(true);
  });

  it("SSE_END ends the stream there; a reader that returns early drops the body; a body read whole drops nothing", async () => {
    const end = queuedBody(Buffer.from("data: a\n\ndata: [DONE]\n\ndata: late\n\n"), []);
    const ended: string[] = [];
    for await (const v of sseMap(end.res, new AbortController(), (e) => (e.data === "[DONE]" ? SSE_END : e.data), (e) => e.data === "[DONE]")) ended.push(v);
    expect(ended).toEqual(["a"]);
    expect(end.calls).toEqual({ cancel: 0, release: 1 });

    const early = queuedBody(Buffer.from("data: a\n\ndata: b\n\n"), []);
    const controller = new AbortController();
    for await (const e of sseEvents(early.res, controller)) if (e.data === "a") break;
    expect(early.calls).toEqual({ cancel: 1, release: 0 });
    expect(controller.signal.aborted).toBe(true);

    const whole = queuedBody(Buffer.from("data: a\n\ndata: b"), []);
    const all: string[] = [];
    for await (const e of sseEvents(whole.res, new AbortController())) all.push(e.data);
    expect(all).toEqual(["a", "b"]);
    expect(whole.calls).toEqual({ cancel: 0, release: 0 });
  });
});

describe("the request", () => {
  it("the caller's abort before the response rejects with its reason, and the upstream sees the request dropped", async () => {
    const fake = await startFakeOpenAI(undefined, { headerDelayMs: 60_000 });
    open.push(fake);
    const caller = new AbortController();
    const pending = post(fake, {}, caller.signal).catch((e: unknown) => e);
    await waitFor("the request at the fake upstream", () => fake.requests.length > 0);
    const reason = new Error("the caller left");
    caller.abort(reason);
    expect(await pending).toBe(reason);
    await fake.clientAborted();
  });

  it("credentials in the URL go as Basic authorization, unless the call sets its own", async () => {
    const fake = await startFakeOpenAI();
    open.push(fake);
    const url = fake.url.replace("http://", "http://user:p%40ss@");
    const call = (headers: Record<string, string>) =>
      postJson({ url: `${url}/v1/chat/completions`, headers, body: { model: "m", messages: [] }, signal: new AbortController().signal, apiKey: "", errorMessage: () => undefined }).then((r) => r.text());
    await call({});
    await call({ authorization: "Bearer own" });
    expect(fake.requests.map((r) => r.headers.authorization)).toEqual([`Basic ${Buffer.from("user:p@ss").toString("base64")}`, "Bearer own"]);
  });
});

describe("openedStream (an adapter's stream opened with its first read)", () => {
  const numbers = (log: string[]): AsyncIterator<number> => {
    let i = 0;
    return {
      next: async () => (i < 2 ? { done: false, value: i++ } : { done: true, value: undefined }),
      return: async () => {
        log.push("closed");
        return { done: true, value: undefined };
      },
    };
  };

  it("opens with the first read, then hands on the opened iterator's results", async () => {
    const log: string[] = [];
    const s = openedStream(async () => {
      log.push("opened");
      return numbers(log);
    });
    expect(log).toEqual([]);
    const seen: number[] = [];
    for await (const n of s) seen.push(n);
    expect(seen).toEqual([0, 1]);
    expect(log).toEqual(["opened"]);
  });

  it("a reader that stops before reading opens nothing; one that stops while opening closes what opened", async () => {
    const log: string[] = [];
    const never = openedStream(async () => {
      log.push("opened");
      return numbers(log);
    });
    expect(await never.return!()).toEqual({ done: true, value: undefined });
    expect(await never.next()).toEqual({ done: true, value: undefined });
    expect(log).toEqual([]);

    const opening = openedStream(async () => numbers(log));
    const first = opening.next();
    await opening.return!();
    expect(await first).toEqual({ done: true, value: undefined });
    expect(log).toEqual(["closed"]);
  });

  it("an open that fails fails the first read and ends the stream", async () => {
    const s = openedStream<number>(async () => {
      throw new UpstreamError(503, "unavailable", true);
    });
    await expect(s.next()).rejects.toThrow("unavailable");
    expect(await s.next()).toEqual({ done: true, value: undefined });
  });
});

describe("readJsonRedacted", () => {
  const answering = (text: string): UpstreamResponse =>
    ({ status: 200, ok: true, headers: {}, text: async () => text, chunks: () => [][Symbol.iterator]() as never, cancel() {}, release() {} }) as unknown as UpstreamResponse;
  const key = "gsk_Ab3-xY9";
  const texts = [
    `{"id":"c1","choices":[{"message":{"role":"assistant","content":"Hello\\nworld \\/ \\"q\\" \\\\ done"}}],"usage":{"prompt_tokens":1e2,"completion_tokens":1.50}}`,
    `{"content":"your key is ${key}, again ${key}"}`,
    `{"content":"escaped: \\u0067sk_Ab3-xY9"}`,
    `{"content":"split: gsk_Ab3\\u002dxY9"}`,
    `{"${key}":1,"a":"${key}x"}`,
    `{"a":"x","a":"${key}"}`,
    `{"a":"${key}","a":"x"}`,
    `["${key.slice(0, 5)}","${key.slice(5)}"]`,
    `{"n":-0,"t":true,"f":false,"z":null,"s":"\\t\\r\\b\\f"}`,
    `"just ${key}"`,
    `42`,
    `{"emoji":"🚀 日本語 \\ud83d\\ude80"}`,
  ];
  it("answers what redact(readJson(…)) answers, for keys it may skip the search for and keys it may not", async () => {
    const { readJsonRedacted, readJson, redact } = await import("../../../../src/core/chat/providers/http.js");
    for (const k of [key, "sk-test", "1e-7", "12345", "gsk/with/slash", "abc", ""]) {
      for (const text of texts) {
        expect(await readJsonRedacted(answering(text), k), `${k} in ${text}`).toEqual(redact(await readJson(answering(text)), k));
      }
    }
    expect(await readJsonRedacted(answering(`{"content":"escaped: \\u0067sk_Ab3-xY9"}`), key)).toEqual({ content: "escaped: [redacted]" });
  });
  it("fails as readJson fails", async () => {
    const { readJsonRedacted } = await import("../../../../src/core/chat/providers/http.js");
    const err = await readJsonRedacted(answering("not json"), key).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect((err as UpstreamError).message).toBe("upstream returned a body that is not JSON");
  });
});

describe("the body's flow control and the response headers", () => {
  it("a body read slowly, well past the pause threshold, arrives whole and in order; headers are parsed when read", async () => {
    const { createServer } = await import("node:http");
    const piece = 16 * 1024;
    const pieces = 48; // 768 kB: past the 64 kB at which the connection is paused until the reader catches up
    const server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/octet-stream", "x-twice": ["a", "b"], "Retry-After": "7" });
        let i = 0;
        const more = () => {
          while (i < pieces) {
            const ok = res.write(Buffer.alloc(piece, i % 256));
            i++;
            if (!ok) return void res.once("drain", more);
          }
          res.end();
        };
        more();
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const { port } = server.address() as import("node:net").AddressInfo;
      const res = await postJson({ url: `http://127.0.0.1:${port}/v1/x`, headers: {}, body: {}, signal: new AbortController().signal, apiKey: "", errorMessage: () => undefined });
      expect(res.headers["content-type"]).toBe("application/octet-stream");
      expect(res.headers["x-twice"]).toEqual(["a", "b"]);
      expect(res.headers["retry-after"]).toBe("7");
      const got: Buffer[] = [];
      for await (const chunk of res.chunks()) {
        got.push(chunk);
        // A slow reader: the queue grows past the threshold between reads.
        await new Promise((r) => setImmediate(r));
      }
      const all = Buffer.concat(got);
      expect(all.length).toBe(piece * pieces);
      for (let i = 0; i < pieces; i++) expect(all[i * piece], `piece ${i}`).toBe(i % 256);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
