/**
 * The hop channel (proto/portico/hop/v1/hop_service.proto): the split gateway's unary calls on one long-lived stream,
 * the gateway's side (src/gateway/hop-channel.ts) against the core's (src/core/grpc-fast-path.ts) on a real HTTP/2
 * server. What a call reads (answers, errors, metadata, deadlines, cancels, refused and dropped connections) is
 * compared with the other clients in h2-grpc-transport.test.ts; here is what the channel does of its own: many calls
 * on one stream, a core without the channel, a core that stops, idle close, and the core's side taken through a raw
 * HTTP/2 client (calls it refuses, cancels, a reset, a malformed envelope).
 */
import http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config.js";
import { createCoreTransport } from "../../../src/gateway/core-transport.js";
import { createHopChannel } from "../../../src/gateway/hop-channel.js";
import { decodeReply, encodeCallFrame, type HopCall, type HopReply } from "../../../src/lib/hop-codec.js";
import { ChatService, CreateChatCompletionRequestSchema } from "../../../src/gen/portico/chat/v1/chat_service_pb.js";
import { waitFor } from "../../helpers/wait.js";
import { CHAT_PATH, HOP_PATH, failureOf, h2Cores, servedAgain, type Core } from "./h2-core.js";

type Behaviour = (req: { bodyJson: string }, ctx: HandlerContext) => Promise<unknown> | unknown;
const unary = new Map<string, Behaviour>();
/** The calls the core ran, by `bodyJson`, with their signals. */
const ran = new Map<string, AbortSignal>();

const routes = (router: ConnectRouter) =>
  router.service(ChatService, {
    async createChatCompletion(req: { bodyJson: string }, ctx: HandlerContext) {
      ran.set(req.bodyJson, ctx.signal);
      const b = unary.get(req.bodyJson);
      if (!b) throw new ConnectError(`no behaviour for ${req.bodyJson}`, Code.NotFound);
      return (await b(req, ctx)) as never;
    },
    async *streamChatCompletion() {},
  } as never);

/** Cores as `portico core` serves (./h2-core.ts), and node:http2 clients on them with unary calls on the channel. */
const { start: startCore, withClient } = h2Cores(routes);
const onChannel = { unaryChannel: createHopChannel };

let n = 0;
const key = (what: string) => `${what}-${++n}`;

/** A handler that waits for `release()`, and tells when it started. */
function held() {
  let started!: () => void;
  let release!: (v: unknown) => void;
  const inCore = new Promise<void>((r) => (started = r));
  const released = new Promise((r) => (release = r));
  const behaviour: Behaviour = () => {
    started();
    return released;
  };
  return { behaviour, inCore, release };
}

let core: Core;
beforeAll(async () => {
  core = await startCore();
});
afterAll(async () => {
  await core.kill();
});

describe("the hop channel", () => {
  it("many concurrent calls go on one stream, each answered with its own message whatever order they finish in", () =>
    withClient({ core, transport: onChannel }, async ({ client }) => {
      const before = core.streams.length;
      const count = 200;
      const keys = Array.from({ length: count }, (_, i) => key(`many${i}`));
      // Answers finish in the reverse order of the calls: each waits for the one after it.
      const done: Array<() => void> = [];
      const gates = keys.map(() => new Promise<void>((r) => done.push(r)));
      keys.forEach((k, i) =>
        unary.set(k, async () => {
          if (i < count - 1) await gates[i + 1];
          done[i]!();
          return { completionJson: JSON.stringify({ k }), upstreamMs: i };
        }),
      );
      const answers = await Promise.all(keys.map((k) => client.createChatCompletion({ bodyJson: k }, { headers: { "x-request-id": k } })));
      answers.forEach((a, i) => expect(a).toMatchObject({ completionJson: JSON.stringify({ k: keys[i] }), upstreamMs: i }));
      expect(core.streams.slice(before)).toEqual([HOP_PATH]);
    }));

  it("large messages both ways arrive whole, beside small calls on the same channel", () =>
    withClient({ core, transport: onChannel }, async ({ client }) => {
      const big = key("big") + "x".repeat(3 * 1024 * 1024);
      unary.set(big, (req) => ({ completionJson: req.bodyJson.split("").reverse().join("") }));
      const small = key("small");
      unary.set(small, () => ({ completionJson: "s" }));
      const [a, b] = await Promise.all([client.createChatCompletion({ bodyJson: big }), client.createChatCompletion({ bodyJson: small })]);
      expect(a.completionJson).toBe(big.split("").reverse().join(""));
      expect(b.completionJson).toBe("s");
    }));

  it("the split gateway's transport uses the channel unless PORTICO_CORE_HOP_CHANNEL is false", async () => {
    expect(loadConfig({}).coreHopChannel).toBe(true);
    expect(loadConfig({ PORTICO_CORE_HOP_CHANNEL: "false" }).coreHopChannel).toBe(false);
    expect(() => loadConfig({ PORTICO_CORE_HOP_CHANNEL: "sometimes" })).toThrow(/PORTICO_CORE_HOP_CHANNEL/);
    const k = key("setting");
    unary.set(k, () => ({ completionJson: "{}" }));
    for (const hopChannel of [true, false]) {
      const c = await startCore();
      try {
        const client = createClient(ChatService, createCoreTransport(c.url, { hopChannel }));
        for (let i = 0; i < 3; i++) await client.createChatCompletion({ bodyJson: k });
        expect(c.streams).toEqual(hopChannel ? [HOP_PATH] : [CHAT_PATH, CHAT_PATH, CHAT_PATH]);
      } finally {
        await c.kill();
      }
    }
  });

  for (const kind of ["http-404", "grpc-unimplemented"] as const) {
    it(`a core without the channel (${kind}): the calls, and every later one, go on streams of their own`, () =>
      withClient({ start: { withoutChannel: kind }, transport: onChannel }, async ({ core: old, client }) => {
        const keys = [key("old"), key("old"), key("old")];
        for (const k of keys) unary.set(k, () => ({ completionJson: k }));
        // Two calls made together while the channel is being refused, then one more.
        const first = await Promise.all(keys.slice(0, 2).map((k) => client.createChatCompletion({ bodyJson: k })));
        expect(first.map((a) => a.completionJson)).toEqual(keys.slice(0, 2));
        expect((await client.createChatCompletion({ bodyJson: keys[2]! })).completionJson).toBe(keys[2]);
        expect(old.streams).toEqual([HOP_PATH, CHAT_PATH, CHAT_PATH, CHAT_PATH]);
      }));
  }

  it("a core that stops: the call in flight is answered, the core's close completes, a later call is Unavailable as a refused connection", () =>
    withClient({ transport: onChannel }, async ({ core: c, client }) => {
      const warm = key("warm");
      unary.set(warm, () => ({ completionJson: "{}" }));
      await client.createChatCompletion({ bodyJson: warm });
      const h = held();
      const k = key("inflight");
      unary.set(k, h.behaviour);
      const inFlight = client.createChatCompletion({ bodyJson: k });
      await h.inCore;
      const stopped = c.stop();
      h.release({ completionJson: "done" });
      expect((await inFlight).completionJson).toBe("done");
      // The channel ends (the core drained it): the server's close does not wait on it.
      await stopped;
      const err = await failureOf(client.createChatCompletion({ bodyJson: warm }));
      expect(err.code).toBe(Code.Unavailable);
      expect((err.cause as { code?: string }).code).toBe("ECONNREFUSED");
    }));

  it("a core draining while its connection stays open: a new call is refused, sent once more, and never run", () =>
    withClient({ transport: onChannel }, async ({ core: c, client }) => {
      const warm = key("warm");
      unary.set(warm, () => ({ completionJson: "{}" }));
      await client.createChatCompletion({ bodyJson: warm });
      c.fastPath.drain();
      const k = key("refused");
      unary.set(k, () => ({ completionJson: "ran" }));
      const err = await failureOf(client.createChatCompletion({ bodyJson: k }));
      expect(err.code).toBe(Code.Unavailable);
      expect(err.rawMessage).toBe("the core is stopping and did not start the call");
      expect(ran.has(k)).toBe(false);
      // Sent twice, each time on a channel the draining core ended without reading it: the first channel (if its end
      // had not arrived yet) or a new one, then a new one.
      const channels = c.streams.filter((p) => p === HOP_PATH).length;
      expect(channels).toBeGreaterThanOrEqual(2);
      expect(channels).toBeLessThanOrEqual(3);
    }));

  it("an idle connection closes with its channel, and the next call opens a new one", () =>
    withClient({ transport: { ...onChannel, idleConnectionTimeoutMs: 50 } }, async ({ core: c, client }) => {
      const k = key("idle");
      unary.set(k, () => ({ completionJson: "{}" }));
      await client.createChatCompletion({ bodyJson: k });
      await waitFor("the idle session closed", () => (c.sessions.size === 0 && c.closedChannels.length === 1 ? true : undefined));
      await client.createChatCompletion({ bodyJson: k });
      expect(c.streams).toEqual([HOP_PATH, HOP_PATH]);
      expect(c.sessions.size).toBe(1);
    }));

  it("calls in flight when the core dies fail Unavailable, never run twice; calls are served again when it is back", () =>
    withClient({ transport: onChannel }, async ({ core: c, client }) => {
      const holds = [held(), held()];
      const keys = holds.map((h) => {
        const k = key("dies");
        unary.set(k, h.behaviour);
        return k;
      });
      const inFlight = keys.map((k) => failureOf(client.createChatCompletion({ bodyJson: k })));
      await Promise.all(holds.map((h) => h.inCore));
      await c.kill();
      for (const err of await Promise.all(inFlight)) {
        expect(err.code).toBe(Code.Unavailable);
        expect((err.cause as { code?: string } | undefined)?.code).not.toBe("ECONNREFUSED");
      }
      const again = await startCore({ port: c.port });
      try {
        const k = key("back");
        unary.set(k, () => ({ completionJson: "back" }));
        const answer = await servedAgain(() => client.createChatCompletion({ bodyJson: k }));
        expect(answer.completionJson).toBe("back");
        expect(again.streams.filter((p) => p === HOP_PATH).length).toBe(1);
      } finally {
        await again.kill();
      }
    }));
});

/** A raw HTTP/2 client on the channel: writes call envelopes, reads answers and the channel's own status. */
async function rawChannel(url: string) {
  const session = http2.connect(url);
  const stream = session.request({ ":method": "POST", ":path": HOP_PATH, "content-type": "application/grpc", te: "trailers" });
  const replies: HopReply[] = [];
  const waiters: Array<() => void> = [];
  let rest = Buffer.alloc(0);
  stream.on("data", (chunk: Buffer) => {
    rest = Buffer.concat([rest, chunk]);
    while (rest.length >= 5 && rest.length >= 5 + rest.readUInt32BE(1)) {
      const len = rest.readUInt32BE(1);
      replies.push(decodeReply(Buffer.from(rest.subarray(5, 5 + len))));
      rest = rest.subarray(5 + len);
    }
    for (const w of waiters.splice(0)) w();
  });
  const status = new Promise<Record<string, unknown>>((resolve) => {
    stream.on("trailers", (t) => resolve(t));
    stream.on("response", (h, flags) => {
      if (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) resolve(h);
    });
  });
  const call = (c: Partial<HopCall>) => stream.write(encodeCallFrame({ id: 0, method: "", input: new Uint8Array(), timeoutMs: 0, headers: {}, cancel: false, ...c }));
  const input = (bodyJson: string) => toBinary(CreateChatCompletionRequestSchema, create(CreateChatCompletionRequestSchema, { bodyJson }));
  /** The answer to call `id`, when it arrives. */
  const reply = async (id: number): Promise<HopReply> => {
    for (;;) {
      const r = replies.find((x) => x.id === id);
      if (r) return r;
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  };
  const trailer = (r: HopReply, name: string) => r.trailers.find(([k]) => k === name)?.[1];
  return { session, stream, call, input, reply, replies, status, trailer };
}

describe("the core's side of the channel, through a raw HTTP/2 client", () => {
  it("answers each call by id; refuses what a call on its own stream would be refused, with the same status", async () => {
    const c = await startCore({ readMaxBytes: 256 });
    const raw = await rawChannel(c.url);
    try {
      const ok = key("raw-ok");
      unary.set(ok, (_req, ctx) => {
        ctx.responseHeader.set("x-answer", "1");
        ctx.responseTrailer.set("x-after", "2");
        return { completionJson: "fine" };
      });
      raw.call({ id: 1, method: CHAT_PATH, input: raw.input(ok), headers: { "x-request-id": "r1" } });
      raw.call({ id: 2, method: "/portico.chat.v1.ChatService/NoSuchMethod", input: raw.input(ok) });
      raw.call({ id: 3, method: CHAT_PATH, input: raw.input("x".repeat(300)) });
      raw.call({ id: 4, method: CHAT_PATH, input: Buffer.from([0x0a, 0x05, 0x61]) });
      const streamingPath = `/${ChatService.typeName}/${ChatService.method.streamChatCompletion.name}`;
      raw.call({ id: 5, method: streamingPath, input: raw.input(ok) });
      const r1 = await raw.reply(1);
      expect(raw.trailer(r1, "grpc-status")).toBe("0");
      expect(raw.trailer(r1, "x-after")).toBe("2");
      expect(r1.headers).toEqual([["x-answer", "1"]]);
      expect(Buffer.from(r1.output).toString()).toContain("fine");
      expect(raw.trailer(await raw.reply(2), "grpc-status")).toBe(String(Code.Unimplemented));
      const r3 = await raw.reply(3);
      expect(raw.trailer(r3, "grpc-status")).toBe(String(Code.ResourceExhausted));
      expect(decodeURIComponent(raw.trailer(r3, "grpc-message")!)).toMatch(/^message size \d+ is larger than configured readMaxBytes 256$/);
      expect(raw.trailer(await raw.reply(4), "grpc-status")).toBe(String(Code.InvalidArgument));
      // A server-streaming method needs a stream of its own.
      expect(raw.trailer(await raw.reply(5), "grpc-status")).toBe(String(Code.Unimplemented));
      // Metadata no HTTP/2 header could carry: refused as a call, the core goes on (no crash, no unanswered call).
      raw.call({ id: 6, method: CHAT_PATH, input: raw.input(ok), headers: { "x-bad": "a\r\nb", "Bad Name": "1" } });
      const r6 = await raw.reply(6);
      expect(raw.trailer(r6, "grpc-status")).toBe(String(Code.InvalidArgument));
      raw.call({ id: 9, method: CHAT_PATH, input: raw.input(ok) });
      expect(raw.trailer(await raw.reply(9), "grpc-status")).toBe("0");
    } finally {
      raw.session.destroy();
      await c.kill();
    }
  });

  it("a cancel aborts the call it names, a duplicate id is refused, and a reset channel aborts every call still open", async () => {
    const c = await startCore();
    const raw = await rawChannel(c.url);
    try {
      const a = held();
      const b = held();
      const ka = key("raw-cancel");
      const kb = key("raw-reset");
      unary.set(ka, a.behaviour);
      unary.set(kb, b.behaviour);
      raw.call({ id: 7, method: CHAT_PATH, input: raw.input(ka) });
      raw.call({ id: 8, method: CHAT_PATH, input: raw.input(kb) });
      await Promise.all([a.inCore, b.inCore]);
      raw.call({ id: 8, method: CHAT_PATH, input: raw.input(kb) });
      expect(raw.trailer(await raw.reply(8), "grpc-status")).toBe(String(Code.InvalidArgument));
      raw.call({ id: 7, cancel: true });
      await waitFor("call 7 aborted", () => (ran.get(ka)?.aborted ? true : undefined));
      expect(ran.get(kb)?.aborted).toBe(false);
      raw.stream.close(http2.constants.NGHTTP2_CANCEL);
      await waitFor("call 8 aborted by the reset", () => (ran.get(kb)?.aborted ? true : undefined));
    } finally {
      raw.session.destroy();
      await c.kill();
    }
  });

  it("a malformed envelope ends the channel with InvalidArgument; the gateway's end ends it with OK once calls are answered", async () => {
    const c = await startCore();
    try {
      const bad = await rawChannel(c.url);
      // A frame whose content is a length running past its end.
      bad.stream.write(Buffer.from([0, 0, 0, 0, 2, 0x12, 0x7f]));
      expect((await bad.status)["grpc-status"]).toBe(String(Code.InvalidArgument));
      bad.session.destroy();

      const raw = await rawChannel(c.url);
      const h = held();
      const k = key("raw-end");
      unary.set(k, h.behaviour);
      raw.call({ id: 1, method: CHAT_PATH, input: raw.input(k) });
      await h.inCore;
      raw.stream.end();
      h.release({ completionJson: "last" });
      expect(raw.trailer(await raw.reply(1), "grpc-status")).toBe("0");
      expect((await raw.status)["grpc-status"]).toBe("0");
      raw.session.destroy();
    } finally {
      await c.kill();
    }
  });
});
