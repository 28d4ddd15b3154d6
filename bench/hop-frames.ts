/**
 * The split hop's HTTP/2 frames and socket writes per call (issue 24, "split ≤ 1.5× in-process"): the gateway's
 * client (src/gateway/h2-grpc-transport.ts) calling `CreateChatCompletion` on the core's fast path
 * (src/core/grpc-fast-path.ts, a stub chat service as in bench/split-hop.ts) through a counting TCP relay on loopback,
 * and the same through the bare exchange of bench/hop-floor.ts (node:http2 both ends, no Portico code). The relay
 * decodes each direction's frames (type, flags) and counts the chunks each side wrote (one `read` on the relay is at
 * least one write of the sender's; frames' payload bytes in brackets; writes that arrive together count once, so at c>1 it is a lower bound).
 *
 *   node bin/run-ts.mjs bench/hop-frames.ts [--calls 2000] [--concurrency 1|32]
 */
import http2 from "node:http2";
import net from "node:net";
import { once } from "node:events";
import type { ConnectRouter } from "@connectrpc/connect";
import { createClient } from "@connectrpc/connect";
import { num } from "./lib/args.js";
import { bareGrpcServer, grpcFrame } from "./lib/bare-h2.js";
import { ChatService } from "../src/gen/portico/chat/v1/chat_service_pb.js";
import { createGrpcFastPath } from "../src/core/grpc-fast-path.js";
import { createDirectTransport } from "../src/core/direct-transport.js";
import { createH2GrpcTransport } from "../src/gateway/h2-grpc-transport.js";
import { bodyOf } from "../src/core/chat/request-body.js";
import { codecOf } from "../src/lib/proto-codec.js";

const calls = num("calls", 2000);
const concurrency = num("concurrency", 1);
const body = { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "Say hello." }], stream: false };
const bodyText = JSON.stringify(body);
const COMPLETION = JSON.stringify({ id: "chatcmpl-1", object: "chat.completion", created: 1, model: "llama-3.3-70b", provider: "groq", choices: [{ index: 0, message: { role: "assistant", content: "Hello, world" }, finish_reason: "stop" }], usage: { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 } });
const headers = { authorization: "Bearer pk-test", "x-request-id": "1" };
const TYPES = ["DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS", "PUSH_PROMISE", "PING", "GOAWAY", "WINDOW_UPDATE", "CONTINUATION"];

/** Counts one direction's frames: a byte stream parsed frame by frame (after the client's 24-byte preface). */
function counter(preface: boolean) {
  const frames = new Map<string, number>();
  const bytes = new Map<string, number>();
  let reads = 0;
  let buf = Buffer.alloc(0);
  let skip = preface ? 24 : 0;
  return {
    frames,
    bytes,
    get reads() {
      return reads;
    },
    feed(chunk: Buffer) {
      reads++;
      buf = Buffer.concat([buf, chunk]);
      if (skip) {
        const n = Math.min(skip, buf.length);
        buf = buf.subarray(n);
        skip -= n;
      }
      while (buf.length >= 9) {
        const len = buf.readUIntBE(0, 3);
        if (buf.length < 9 + len) break;
        const type = TYPES[buf[3]!] ?? `type ${buf[3]}`;
        const flags = buf[4]!;
        const name = type === "DATA" || type === "HEADERS" ? `${type}${flags & 1 ? " END_STREAM" : ""}` : type;
        frames.set(name, (frames.get(name) ?? 0) + 1);
        bytes.set(name, (bytes.get(name) ?? 0) + len);
        buf = buf.subarray(9 + len);
      }
    },
    reset() {
      frames.clear();
      bytes.clear();
      reads = 0;
    },
  };
}

async function relay(target: number) {
  const up = counter(true);
  const down = counter(false);
  const server = net.createServer((c) => {
    c.setNoDelay(true);
    const s = net.connect(target, "127.0.0.1");
    s.setNoDelay(true);
    c.on("data", (d) => (up.feed(d), s.write(d)));
    s.on("data", (d) => (down.feed(d), c.write(d)));
    c.on("close", () => s.destroy());
    s.on("close", () => c.destroy());
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { port: (server.address() as net.AddressInfo).port, up, down, close: () => server.close() };
}

async function portico() {
  const routes = (router: ConnectRouter) =>
    router.service(ChatService, {
      async createChatCompletion(req: { bodyJson?: string }) {
        if ((bodyOf(req) as { model?: string } | undefined)?.model !== body.model) throw new Error("the body did not arrive");
        return { completionJson: COMPLETION, upstreamMs: 1.5, provider: "groq" };
      },
    } as never);
  const fast = createGrpcFastPath(routes, createDirectTransport(routes, []), 4 * 1024 * 1024);
  const server = http2.createServer();
  server.on("stream", (stream, h) => {
    if (!fast.handle(stream, h)) stream.respond({ ":status": 404 }, { endStream: true });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const r = await relay((server.address() as net.AddressInfo).port);
  const transport = createH2GrpcTransport({ baseUrl: `http://127.0.0.1:${r.port}` });
  const client = createClient(ChatService, transport);
  const input = { bodyJson: bodyText, jsonText: true };
  return { r, call: () => client.createChatCompletion(input, { headers }), close: () => (transport.close(), r.close(), server.close()) };
}

async function bare() {
  const method = ChatService.method.createChatCompletion;
  const answer = grpcFrame(codecOf(method.output).encode({ completionJson: COMPLETION, upstreamMs: 1.5, provider: "groq" }, 0).length);
  const reqBody = grpcFrame(codecOf(method.input).encode({ bodyJson: bodyText, jsonText: true }, 0).length);
  const server = bareGrpcServer(answer);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const r = await relay((server.address() as net.AddressInfo).port);
  const session = http2.connect(`http://127.0.0.1:${r.port}`);
  const h = { ":method": "POST", ":path": "/portico.chat.v1.ChatService/CreateChatCompletion", "content-type": "application/grpc", te: "trailers", ...headers };
  const call = () =>
    new Promise<void>((resolve, reject) => {
      const s = session.request(h);
      s.on("data", () => undefined);
      s.on("error", reject);
      s.on("close", resolve);
      s.end(reqBody);
    });
  return { r, call, close: () => (session.close(), r.close(), server.close()) };
}

async function measure(name: string, hop: Awaited<ReturnType<typeof portico>>) {
  for (let i = 0; i < 200; i++) await hop.call();
  await new Promise((r) => setTimeout(r, 50));
  hop.r.up.reset();
  hop.r.down.reset();
  let left = calls;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (left-- > 0) await hop.call();
  }));
  await new Promise((r) => setTimeout(r, 50));
  const per = (c: ReturnType<typeof counter>) => [...c.frames].map(([k, v]) => `${k} ${(v / calls).toFixed(3)} (${((c.bytes.get(k) ?? 0) / v).toFixed(1)} B)`).join(", ");
  console.log(`${name}, c=${concurrency}, ${calls} calls; per call:`);
  console.log(`  client → server: ${(hop.r.up.reads / calls).toFixed(3)} reads; ${per(hop.r.up)}`);
  console.log(`  server → client: ${(hop.r.down.reads / calls).toFixed(3)} reads; ${per(hop.r.down)}`);
  hop.close();
}

await measure("Portico hop (h2-grpc-transport → grpc-fast-path)", await portico());
await measure("bare node:http2 exchange", (await bare()) as never);
