/**
 * The split gateway's gRPC client on node:http2 (src/gateway/h2-grpc-transport.ts) against the core's gRPC fast path
 * (src/core/grpc-fast-path.ts, the in-process transport behind it) on a real HTTP/2 server, with a chat service whose
 * answers each test picks. Every outcome is also taken through the @grpc/grpc-js client it replaces
 * (src/gateway/grpc-js-transport.ts) and must read the same: code, message, details, metadata. Then what only the
 * new client does itself: the session reused, reconnection after the core restarts on the same port, a refused
 * connection as Unavailable with ECONNREFUSED as its cause (and the failover of createCoreTransport on it).
 */
import { AsyncResource } from "node:async_hooks";
import http2 from "node:http2";
import { once } from "node:events";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type ConnectRouter, type HandlerContext, type Transport } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDirectTransport } from "../../../src/core/direct-transport.js";
import { createGrpcFastPath } from "../../../src/core/grpc-fast-path.js";
import { createCoreTransport } from "../../../src/gateway/core-transport.js";
import { createGrpcJsTransport } from "../../helpers/grpc-js-transport.js";
import { createH2GrpcTransport } from "../../../src/gateway/h2-grpc-transport.js";
import { createHopChannel } from "../../../src/gateway/hop-channel.js";
import { ChatService, StreamChatCompletionRequestSchema } from "../../../src/gen/portico/chat/v1/chat_service_pb.js";
import { createAsyncIterable } from "@connectrpc/connect/protocol";
import { ErrorDetailSchema } from "../../../src/gen/portico/errors/v1/error_detail_pb.js";
import { failureOf, h2Cores, servedAgain, type Core } from "./h2-core.js";

type Behaviour = (req: { bodyJson: string }, ctx: { signal: AbortSignal; responseHeader: Headers; responseTrailer: Headers }) => Promise<unknown> | unknown;
type StreamBehaviour = (req: { bodyJson: string }, ctx: { signal: AbortSignal }) => AsyncIterable<unknown>;

/** What each test makes the core answer, by `bodyJson`. */
const unary = new Map<string, Behaviour>();
const streams = new Map<string, StreamBehaviour>();
/** Signals of the calls the core saw, by `bodyJson`, to see a cancel arrive. */
const seen = new Map<string, AbortSignal>();
const aborted = new Map<string, Promise<void>>();

function record(req: { bodyJson: string }, signal: AbortSignal) {
  seen.set(req.bodyJson, signal);
  aborted.set(req.bodyJson, signal.aborted ? Promise.resolve() : new Promise((r) => signal.addEventListener("abort", () => r(), { once: true })));
}

const routes = (router: ConnectRouter) =>
  router.service(ChatService, {
    async createChatCompletion(req: { bodyJson: string }, ctx: HandlerContext) {
      record(req, ctx.signal);
      const b = unary.get(req.bodyJson);
      if (!b) throw new ConnectError(`no behaviour for ${req.bodyJson}`, Code.NotFound);
      return (await b(req, ctx as never)) as never;
    },
    async *streamChatCompletion(req: { bodyJson: string }, ctx: HandlerContext) {
      record(req, ctx.signal);
      const b = streams.get(req.bodyJson);
      if (!b) throw new ConnectError(`no behaviour for ${req.bodyJson}`, Code.NotFound);
      yield* b(req, ctx) as AsyncIterable<never>;
    },
  } as never);

/** Cores as `portico core` serves (./h2-core.ts), and node:http2 clients on them. */
const { start: startCore, withClient } = h2Cores(routes);

let core: Core;
let h2: Transport & { close(): void };
let grpcJs: Transport & { close(): void };
/** The node:http2 client with unary calls on the hop channel (src/gateway/hop-channel.ts): every comparison holds for it too. */
let hop: Transport & { close(): void };
beforeAll(async () => {
  core = await startCore();
  h2 = createH2GrpcTransport({ baseUrl: `http://127.0.0.1:${core.port}` });
  hop = createH2GrpcTransport({ baseUrl: `http://127.0.0.1:${core.port}`, unaryChannel: createHopChannel });
  grpcJs = createGrpcJsTransport({ baseUrl: `http://127.0.0.1:${core.port}` });
});
afterAll(async () => {
  h2.close();
  grpcJs.close();
  hop.close();
  await core.kill();
});

const clients = () => [
  { name: "node:http2", client: createClient(ChatService, h2), transport: h2 },
  { name: "grpc-js", client: createClient(ChatService, grpcJs), transport: grpcJs },
  { name: "hop channel", client: createClient(ChatService, hop), transport: hop },
];

/** Every client's reading equals the first's. */
function allEqual<T>(readings: T[]): void {
  expect(readings.length).toBe(clients().length);
  for (const r of readings.slice(1)) expect(r).toEqual(readings[0]);
}

/** An error's parts as the gateway reads them (the date header aside: it differs by the second). */
function partsOf(err: unknown) {
  expect(err).toBeInstanceOf(ConnectError);
  const e = err as ConnectError;
  const metadata = [...e.metadata.entries()].filter(([k]) => k !== "date");
  return { code: e.code, message: e.rawMessage, details: e.findDetails(ErrorDetailSchema), metadata };
}

let n = 0;
const key = (what: string) => `${what}-${++n}`;

describe("the node:http2 gRPC client against the core's fast path", () => {
  it("unary: the answer, and the same session for every call", async () => {
    const k = key("ok");
    unary.set(k, () => ({ completionJson: '{"id":"c1"}', upstreamMs: 12.5, provider: "groq" }));
    const before = core.sessions.size;
    const res = await Promise.all(Array.from({ length: 20 }, () => createClient(ChatService, h2).createChatCompletion({ bodyJson: k })));
    for (const r of res) expect(r).toMatchObject({ completionJson: '{"id":"c1"}', upstreamMs: 12.5, provider: "groq" });
    expect(core.sessions.size - before).toBe(1); // one connection, whatever the calls
  });

  it("Node's AsyncResource.prototype.bind is Node's again after each call's request", async () => {
    const nodeBind = AsyncResource.prototype.bind;
    const k = key("bind");
    unary.set(k, () => ({ completionJson: "{}" }));
    const t = createH2GrpcTransport({ baseUrl: `http://127.0.0.1:${core.port}` });
    try {
      // The first call starts while the session connects (its start bound, run on "connect"), the next on it.
      for (let i = 0; i < 2; i++) expect(await createClient(ChatService, t).createChatCompletion({ bodyJson: k })).toMatchObject({ completionJson: "{}" });
      expect(AsyncResource.prototype.bind).toBe(nodeBind);
      const bound = new AsyncResource("test").bind(() => 1);
      expect(Object.getOwnPropertyDescriptor(bound, "asyncResource")?.get).toBeTypeOf("function");
    } finally {
      t.close();
    }
  });

  it("an error with details and metadata (trailers after headers, and trailers-only) reads as through grpc-js", async () => {
    const detail = create(ErrorDetailSchema, { reason: "invalid_model", retryable: true, field: "model" });
    const trailersOnly = key("trailers-only");
    unary.set(trailersOnly, (_req, ctx) => {
      throw new ConnectError("no such model: grøq/x 100% %zz", Code.InvalidArgument, { "x-portico-upstream-ms": "41.5", "x-extra": "1", "trace-bin": "AAEC" }, [{ desc: ErrorDetailSchema, value: detail }]);
    });
    const results = [];
    for (const { client } of clients()) results.push(partsOf(await failureOf(client.createChatCompletion({ bodyJson: trailersOnly }, { headers: { "x-request-id": "r1" } }))));
    allEqual(results);
    expect(results[0]!.code).toBe(Code.InvalidArgument);
    expect(results[0]!.message).toBe("no such model: grøq/x 100% %zz");
    expect(results[0]!.details).toEqual([detail]);
    expect(new Headers(results[0]!.metadata).get("x-portico-upstream-ms")).toBe("41.5");

    // A stream that fails after its first message: headers, then messages, then the status in the trailers.
    const late = key("late");
    streams.set(late, async function* () {
      yield { chunkJson: "1" };
      yield { chunkJson: "2" };
      throw new ConnectError("upstream broke", Code.Unavailable, { "x-portico-upstream-ms": "9" }, [{ desc: ErrorDetailSchema, value: detail }]);
    });
    const got: Array<{ chunks: string[]; err: ReturnType<typeof partsOf> }> = [];
    for (const { client } of clients()) {
      const chunks: string[] = [];
      const err = await failureOf(
        (async () => {
          for await (const m of client.streamChatCompletion({ bodyJson: late })) chunks.push(m.chunkJson);
        })(),
      );
      got.push({ chunks, err: partsOf(err) });
    }
    allEqual(got);
    expect(got[0]!.chunks).toEqual(["1", "2"]);
    expect(got[0]!.err.code).toBe(Code.Unavailable);
    expect(new Headers(got[0]!.err.metadata).get("x-portico-upstream-ms")).toBe("9");
  });

  it("request headers arrive as metadata; a header outside printable ASCII is refused naming it", async () => {
    const k = key("headers");
    let received: Headers | undefined;
    unary.set(k, (_req, ctx) => {
      received = (ctx as unknown as { requestHeader: Headers }).requestHeader;
      return { completionJson: "{}" };
    });
    await createClient(ChatService, h2).createChatCompletion({ bodyJson: k }, { headers: { authorization: "Bearer pk-1", "x-session-id": "s1", "trace-bin": "AAEC" } });
    expect(received?.get("authorization")).toBe("Bearer pk-1");
    expect(received?.get("x-session-id")).toBe("s1");
    expect(received?.get("trace-bin")).toBe("AAEC");
    const parts = [];
    for (const { client } of clients()) parts.push(partsOf(await failureOf(client.createChatCompletion({ bodyJson: k }, { headers: { "x-session-id": "sé" } }))));
    allEqual(parts);
    expect(parts[0]).toMatchObject({ code: Code.InvalidArgument, message: "the x-session-id header has characters outside printable ASCII" });
  });

  it("a deadline: DeadlineExceeded, and the core's call is aborted", async () => {
    for (const { client } of clients()) {
      const k = key("slow");
      unary.set(k, (_req, ctx) => new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason))));
      const err = await failureOf(client.createChatCompletion({ bodyJson: k }, { timeoutMs: 150 }));
      expect((err as ConnectError).code).toBe(Code.DeadlineExceeded);
      await aborted.get(k);
      expect(seen.get(k)?.aborted).toBe(true);
    }
  });

  it("the caller's signal cancels: Canceled with the signal's reason, the core's call aborted (unary and stream)", async () => {
    for (const { client } of clients()) {
      const k = key("cancel");
      let arrived!: () => void;
      const inCore = new Promise<void>((r) => (arrived = r));
      unary.set(k, (_req, ctx) => {
        arrived();
        return new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason)));
      });
      const ac = new AbortController();
      const call = failureOf(client.createChatCompletion({ bodyJson: k }, { signal: ac.signal }));
      await inCore;
      ac.abort(new Error("client left"));
      const err = (await call) as ConnectError;
      expect(err.code).toBe(Code.Canceled);
      expect(err.rawMessage).toBe("client left");
      await aborted.get(k);

      const s = key("cancel-stream");
      streams.set(s, async function* (_req, ctx) {
        yield { chunkJson: "first" };
        await new Promise((r) => ctx.signal.addEventListener("abort", r));
      });
      const ac2 = new AbortController();
      const it = client.streamChatCompletion({ bodyJson: s }, { signal: ac2.signal })[Symbol.asyncIterator]();
      expect((await it.next()).value.chunkJson).toBe("first");
      ac2.abort(new Error("gone"));
      const e2 = (await failureOf(it.next())) as ConnectError;
      expect(e2.code).toBe(Code.Canceled);
      await aborted.get(s);
    }
  });

  it("a reader that stops cancels the stream at the core; a long stream arrives whole and in order", async () => {
    const many = key("many");
    const count = 300;
    streams.set(many, async function* () {
      for (let i = 0; i < count; i++) yield { chunkJson: `${i}:${"x".repeat(200)}` };
    });
    for (const { client, transport } of clients()) {
      const out: string[] = [];
      for await (const m of client.streamChatCompletion({ bodyJson: many })) out.push(m.chunkJson.split(":")[0]!);
      expect(out).toEqual(Array.from({ length: count }, (_, i) => String(i)));

      const s = key("stop");
      let stopped!: () => void;
      const coreStopped = new Promise<void>((r) => (stopped = r));
      streams.set(s, async function* (_req, ctx) {
        try {
          for (let i = 0; i < 4; i++) yield { chunkJson: String(i) };
          // Waits for the client: its reset must abort this call's signal.
          await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
        } finally {
          stopped();
        }
      });
      // The transport's own iterator (the gateway's SSE relay returns it when its client leaves).
      const res = await transport.stream(ChatService.method.streamChatCompletion, undefined, undefined, undefined, createAsyncIterable([create(StreamChatCompletionRequestSchema, { bodyJson: s })]), undefined);
      const it = (res.message as AsyncIterable<{ chunkJson: string }>)[Symbol.asyncIterator]();
      for (let i = 0; i < 4; i++) expect((await it.next()).value.chunkJson).toBe(String(i));
      await it.return!();
      await coreStopped;
    }
  });

  it("frames split across DATA frames anywhere (inside the 5-byte prefix too) read whole, as through grpc-js", async () => {
    // A server that writes its answer `piece` bytes at a time, each write flushed before the next: every frame's
    // prefix and body cross DATA frames at every offset across the pieces tried (a prefix cut after 1-4 bytes
    // once crashed the gateway: its length was read off a buffer shorter than 5 bytes).
    const schema = ChatService.method.streamChatCompletion.output;
    const messages = ["a", "b".repeat(3), "c".repeat(300), "", "d"].map((chunkJson) => create(schema, { chunkJson }));
    const frames = Buffer.concat(
      messages.map((m) => {
        const body = toBinary(schema, m);
        const prefix = Buffer.alloc(5);
        prefix.writeUInt32BE(body.length, 1);
        return Buffer.concat([prefix, body]);
      }),
    );
    for (const piece of [1, 2, 3, 4, 6, 7, 13]) {
      const server = http2.createServer();
      server.on("stream", (stream) => {
        stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
        stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        void (async () => {
          for (let at = 0; at < frames.length; at += piece) {
            stream.write(frames.subarray(at, at + piece));
            await new Promise((r) => setImmediate(r));
          }
          stream.end();
        })();
      });
      server.listen(0, "127.0.0.1");
      await once(server, "listening");
      const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
      const transports = [createH2GrpcTransport({ baseUrl: url }), createGrpcJsTransport({ baseUrl: url })];
      try {
        for (const t of transports) {
          const out: string[] = [];
          for await (const m of createClient(ChatService, t).streamChatCompletion({ bodyJson: "x" })) out.push(m.chunkJson);
          expect(out, `pieces of ${piece} bytes`).toEqual(messages.map((m) => m.chunkJson));
        }
      } finally {
        for (const t of transports) t.close();
        server.close();
      }
    }
  });

  it("the core's fast path reads a request however it arrives and refuses bad ones as before (raw HTTP/2 client)", async () => {
    // A fast path with a small readMaxBytes, on a server of its own.
    const small = 64;
    const fastPath = createGrpcFastPath(routes, createDirectTransport(routes, []), small);
    const server = http2.createServer();
    server.on("stream", (stream, headers) => {
      if (!fastPath.handle(stream, headers)) stream.respond({ ":status": 404 }, { endStream: true });
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const session = http2.connect(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
    const schema = ChatService.method.createChatCompletion.input;
    const frameOf = (bodyJson: string) => {
      const body = toBinary(schema, create(schema, { bodyJson }));
      const prefix = Buffer.alloc(5);
      prefix.writeUInt32BE(body.length, 1);
      return Buffer.concat([prefix, body]);
    };
    /** One call: the request's bytes written in `pieces` (each flushed before the next), then the answer's status and messages. */
    const call = async (pieces: Buffer[], extra: Record<string, string> = {}) => {
      const stream = session.request({ ":method": "POST", ":path": "/portico.chat.v1.ChatService/CreateChatCompletion", "content-type": "application/grpc", te: "trailers", ...extra });
      const status = new Promise<{ status: string | undefined; message: string | undefined; trailersOnly: boolean }>((resolve) => {
        stream.on("response", (h, flags) => {
          if (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) resolve({ status: h["grpc-status"] as string, message: h["grpc-message"] as string, trailersOnly: true });
        });
        stream.on("trailers", (t) => resolve({ status: t["grpc-status"] as string, message: t["grpc-message"] as string, trailersOnly: false }));
      });
      const data: Buffer[] = [];
      stream.on("data", (c: Buffer) => data.push(c));
      for (let i = 0; i < pieces.length; i++) {
        if (i === pieces.length - 1) stream.end(pieces[i]);
        else await new Promise<void>((r) => stream.write(pieces[i], () => r()));
      }
      if (pieces.length === 0) stream.end();
      const out = await status;
      await once(stream, "close");
      return { ...out, bytes: Buffer.concat(data).length };
    };
    try {
      const k = key("pieces");
      unary.set(k, () => ({ completionJson: '{"id":"p"}' }));
      const whole = frameOf(k);
      // The frame across DATA frames, its 5-byte prefix too.
      for (const cuts of [[2], [5], [1, 3, 9]]) {
        const pieces = [...cuts, whole.length].map((end, i, all) => whole.subarray(i === 0 ? 0 : all[i - 1]!, end));
        expect(await call(pieces), `cut at ${cuts}`).toMatchObject({ status: "0", trailersOnly: false });
      }
      expect(await call([whole], { "grpc-timeout": "soon" })).toMatchObject({ status: String(Code.InvalidArgument), message: "protocol error: invalid grpc timeout value: soon", trailersOnly: true, bytes: 0 });
      const large = frameOf("x".repeat(small * 2));
      expect(await call([large.subarray(0, 40), large.subarray(40)])).toMatchObject({ status: String(Code.ResourceExhausted), trailersOnly: true });
      expect((await call([large])).message).toMatch(/^message size \d+ is larger than configured readMaxBytes 64$/);
      expect(await call([Buffer.concat([whole, whole])])).toMatchObject({ status: String(Code.Unimplemented), message: "protocol error: received extra input message for unary method" });
      expect(await call([])).toMatchObject({ status: String(Code.Unimplemented), message: "protocol error: missing input message for unary method" });
      expect(await call([whole.subarray(0, whole.length - 1)])).toMatchObject({ status: String(Code.InvalidArgument), message: "protocol error: missing input message for unary method" });

      // A client that resets the stream halfway through its request: the handler never runs, the next call is served.
      const gone = key("gone");
      unary.set(gone, () => ({ completionJson: "{}" }));
      const half = session.request({ ":method": "POST", ":path": "/portico.chat.v1.ChatService/CreateChatCompletion", "content-type": "application/grpc", te: "trailers" });
      const g = frameOf(gone);
      await new Promise<void>((r) => half.write(g.subarray(0, 7), () => r()));
      half.close(http2.constants.NGHTTP2_CANCEL);
      await once(half, "close");
      expect(await call([whole])).toMatchObject({ status: "0" });
      expect(seen.has(gone)).toBe(false);
    } finally {
      session.close();
      server.close();
    }
  });

  it("refused: Unavailable with ECONNREFUSED as the cause; createCoreTransport fails over to the next core", async () => {
    const dead = await startCore();
    const deadPort = dead.port;
    await dead.kill();
    const t = createH2GrpcTransport({ baseUrl: `http://127.0.0.1:${deadPort}` });
    try {
      const k = key("refused");
      unary.set(k, () => ({ completionJson: "{}" }));
      for (let i = 0; i < 2; i++) {
        // The first call dials; the second, within the backoff, fails at once with the same cause.
        const err = (await failureOf(createClient(ChatService, t).createChatCompletion({ bodyJson: k }))) as ConnectError;
        expect(err.code).toBe(Code.Unavailable);
        expect((err.cause as { code?: string }).code).toBe("ECONNREFUSED");
      }
      const failover = createCoreTransport(`http://127.0.0.1:${deadPort},http://127.0.0.1:${core.port}`);
      expect(await createClient(ChatService, failover).createChatCompletion({ bodyJson: k })).toMatchObject({ completionJson: "{}" });
    } finally {
      t.close();
    }
  });

  it("a core that dies and comes back on the same port: Unavailable meanwhile, then served on a new connection", () =>
    withClient({}, async ({ core: c, client, transport: t }) => {
      const k = key("restart");
      unary.set(k, () => ({ completionJson: '{"ok":1}' }));
      expect((await client.createChatCompletion({ bodyJson: k })).completionJson).toBe('{"ok":1}');
      // A call in flight when the core dies fails Unavailable (never Canceled, never hangs).
      const hang = key("hang");
      let arrived!: () => void;
      const inCore = new Promise<void>((r) => (arrived = r));
      unary.set(hang, () => {
        arrived();
        return new Promise(() => {});
      });
      const inFlight = failureOf(client.createChatCompletion({ bodyJson: hang }));
      await inCore;
      await c.kill();
      expect((await inFlight).code).toBe(Code.Unavailable);
      expect((await failureOf(client.createChatCompletion({ bodyJson: k }))).code).toBe(Code.Unavailable);
      const again = await startCore({ port: c.port });
      try {
        // The backoff lets a dial through within a second: the call then succeeds (meanwhile, each is Unavailable).
        const answer = await servedAgain(() => client.createChatCompletion({ bodyJson: k }));
        expect(answer.completionJson).toBe('{"ok":1}');
        expect(again.sessions.size).toBe(1);
      } finally {
        t.close();
        await again.kill();
      }
    }));
});
