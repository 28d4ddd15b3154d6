/**
 * CPU per call of the split path's hop alone (issue 24, "split ≤ 1.5× in-process"): the gateway's gRPC client
 * (test/helpers/grpc-js-transport.ts; src/gateway/ in trees before 2026-11-27) calling `CreateChatCompletion` on the core's gRPC fast path
 * (src/core/grpc-fast-path.ts, the in-process transport behind it) over HTTP/2 on loopback, both in this process,
 * with a stub chat service that reads the request's body as the core's handler does and answers a fixed
 * completion as JSON text. No database, no provider, no Fastify: what remains is the hop (framing, grpc-js's call
 * layers, HTTP/2, protobuf) and the body's encoding. Variants, taking turns in each round:
 *
 * - `Struct body`: the body as a `google.protobuf.Struct` (what the gateway sent until now);
 * - `body_json`: the body as the JSON text the gateway received (parsed and checked by the core);
 * - with `--base DIR`, `base, body_json` (or `base, Struct body` for a base that predates `body_json`): the other
 *   checkout's transport, fast path and generated code.
 *
 * `--bare` adds the floor in this process: a node:http2 client and server with no Portico code exchanging frames of the
 * same sizes (the request's and the response's encoded messages), headers and trailers as the fast path's, so the
 * variants over it are what Portico's hop code (client, fast path, codec, transport) adds to Node's HTTP/2.
 *
 * `--struct` adds the Struct-body variants (only `body_json` otherwise: what the split gateway sends). The client is
 * the tree's node:http2 one (src/gateway/h2-grpc-transport.ts) where it has it, else its @grpc/grpc-js one;
 * `--grpc-js` adds the branch's @grpc/grpc-js client as a variant of its own.
 *
 * CPU of this process (user + system) per call, `--concurrency` calls in flight, `--calls` per round; best and
 * median of the rounds, and each variant over the first per round (their median). `--body small|large`: the chat-hot-path bench's one-message body, or a 12-message
 * conversation with a tool (≈ 6 kB).
 *
 * `--heap-sample <dir>`: a sampling heap profile of the measured rounds (objects already collected included, every
 * `--heap-sample-interval` bytes, default 1024) written to `<dir>/hop-<pid>.heapprofile`, and the calls it covers
 * printed: what each function of both ends allocates per call (`node bench/lib/heap-summary.mjs <file> --units-a <calls>`;
 * run it without `--base` and variants, or the calls of every variant are in it).
 *
 *   node bin/run-ts.mjs bench/split-hop.ts [--calls 4000] [--concurrency 32] [--rounds 7] [--body small|large] [--base DIR] [--struct] [--grpc-js] [--bare] [--heap-sample DIR]
 */
import http2 from "node:http2";
import { once } from "node:events";
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { ConnectRouter, Transport } from "@connectrpc/connect";
import { createClient } from "@connectrpc/connect";
import { flag, num } from "./lib/args.js";
import { bareGrpcServer, grpcFrame } from "./lib/bare-h2.js";
import { startHeapSampling } from "./lib/heap-sample.js";

const calls = num("calls", 4000);
const concurrency = num("concurrency", 32);
const rounds = num("rounds", 7);
const base = flag("base");

const SMALL = { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "Say hello." }], stream: false };
const LARGE = {
  model: "groq/llama-3.3-70b",
  temperature: 0.2,
  max_tokens: 512,
  tools: [{ type: "function", function: { name: "lookup", description: "Looks a word up.", parameters: { type: "object", properties: { word: { type: "string" } }, required: ["word"] } } }],
  messages: Array.from({ length: 12 }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `Turn ${i}: ${"lorem ipsum dolor sit amet ".repeat(18)}` })),
};
const body = flag("body") === "large" ? LARGE : SMALL;
const bodyText = JSON.stringify(body);
const COMPLETION = JSON.stringify({ id: "chatcmpl-1", object: "chat.completion", created: 1, model: "llama-3.3-70b", provider: "groq", choices: [{ index: 0, message: { role: "assistant", content: "Hello, world" }, finish_reason: "stop" }], usage: { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 } });

/** One checkout's hop: its generated ChatService, fast path, direct transport and gRPC client. */
async function treeOf(root: string) {
  const load = (path: string) => import(pathToFileURL(resolve(root, path)).href);
  const [gen, fast, direct, client, handler, h2] = await Promise.all([
    load("src/gen/portico/chat/v1/chat_service_pb.ts"),
    load("src/core/grpc-fast-path.ts"),
    load("src/core/direct-transport.ts"),
    load("test/helpers/grpc-js-transport.ts").catch(() => load("src/gateway/grpc-js-transport.ts")),
    // The handlers' bodyOf (src/core/chat/chat-handler.ts in trees before the dialects took body_json).
    load("src/core/chat/request-body.ts").catch(() => load("src/core/chat/chat-handler.ts")),
    load("src/gateway/h2-grpc-transport.ts").catch(() => undefined),
  ]);
  const bodyOf: (req: { body?: unknown; bodyJson?: string }) => unknown = handler.bodyOf ?? ((req) => req.body);
  return { ChatService: gen.ChatService, createGrpcFastPath: fast.createGrpcFastPath, createDirectTransport: direct.createDirectTransport, createGrpcJsTransport: client.createGrpcJsTransport, createH2GrpcTransport: h2?.createH2GrpcTransport, bodyOf, readsBodyJson: handler.bodyOf !== undefined };
}

/** The tree's split-gateway client: its node:http2 one where it has it (`grpcJs` for the @grpc/grpc-js one). */
async function startHop(tree: Awaited<ReturnType<typeof treeOf>>, grpcJs = false) {
  const routes = (router: ConnectRouter) =>
    router.service(tree.ChatService, {
      async createChatCompletion(req: { body?: unknown; bodyJson?: string }) {
        const read = tree.bodyOf(req) as { model?: string } | undefined;
        if (read?.model !== body.model) throw new Error("the body did not arrive");
        return { completionJson: COMPLETION, upstreamMs: 1.5, provider: "groq" };
      },
    } as never);
  const fastPath = tree.createGrpcFastPath(routes, tree.createDirectTransport(routes, []), 4 * 1024 * 1024);
  const server = http2.createServer();
  server.on("stream", (stream, headers) => {
    if (!fastPath.handle(stream, headers)) stream.respond({ ":status": 404 }, { endStream: true });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as { port: number }).port;
  const make = !grpcJs && tree.createH2GrpcTransport ? tree.createH2GrpcTransport : tree.createGrpcJsTransport;
  const transport: Transport & { close(): void } = make({ baseUrl: `http://127.0.0.1:${port}` });
  const client = createClient(tree.ChatService, transport) as unknown as { createChatCompletion(input: unknown, opts: unknown): Promise<{ completionJson: string }> };
  return {
    client,
    close: () => {
      transport.close();
      server.close();
    },
  };
}

/** The bare exchange (`--bare`): node:http2 on both ends in this process, `reqBytes` and `resBytes` message frames. */
async function startBare(reqBytes: number, resBytes: number) {
  const answer = grpcFrame(resBytes);
  const server = bareGrpcServer(answer);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const session = http2.connect(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
  const reqBody = grpcFrame(reqBytes);
  const h = { ":method": "POST", ":path": "/portico.chat.v1.ChatService/CreateChatCompletion", "content-type": "application/grpc", te: "trailers", "user-agent": "portico-gateway", "grpc-accept-encoding": "identity", ...headers };
  const call = () =>
    new Promise<void>((resolve, reject) => {
      const s = session.request(h);
      let status: string | undefined;
      s.on("data", () => undefined);
      s.on("trailers", (t) => (status = t["grpc-status"] as string));
      s.on("error", reject);
      s.on("close", () => (status === "0" ? resolve() : reject(new Error(`grpc-status ${status}`))));
      s.end(reqBody);
    });
  return { call, close: () => (session.close(), server.close()) };
}

async function run(call: () => Promise<unknown>, n: number): Promise<number> {
  let left = n;
  const worker = async () => {
    while (left-- > 0) await call();
  };
  const start = process.cpuUsage();
  await Promise.all(Array.from({ length: concurrency }, worker));
  const used = process.cpuUsage(start);
  return (used.user + used.system) / n;
}

const branch = await treeOf(resolve(import.meta.dirname, ".."));
const headers = { authorization: "Bearer pk-test", "x-request-id": "1" };
const variants: Array<{ name: string; hop: { client: { createChatCompletion(input: unknown, opts: unknown): Promise<unknown> }; close(): void }; input: unknown }> = [];
const branchHop = await startHop(branch);
const withStruct = process.argv.includes("--struct");
if (withStruct) variants.push({ name: "Struct body", hop: branchHop, input: { body, jsonText: true } });
variants.push({ name: "body_json", hop: branchHop, input: { bodyJson: bodyText, jsonText: true } });
// `--grpc-js`: the branch's @grpc/grpc-js client beside its node:http2 one (same fast path, same process).
if (process.argv.includes("--grpc-js") && branch.createH2GrpcTransport) variants.push({ name: "body_json, grpc-js client", hop: await startHop(branch, true), input: { bodyJson: bodyText, jsonText: true } });
if (process.argv.includes("--bare")) {
  const { codecOf } = await import(pathToFileURL(resolve(import.meta.dirname, "../src/lib/proto-codec.ts")).href);
  const method = branch.ChatService.method.createChatCompletion;
  const reqBytes = codecOf(method.input).encode({ bodyJson: bodyText, jsonText: true }, 0).length;
  const resBytes = codecOf(method.output).encode({ completionJson: COMPLETION, upstreamMs: 1.5, provider: "groq" }, 0).length;
  const bare = await startBare(reqBytes, resBytes);
  variants.unshift({ name: `bare node:http2 (${reqBytes} B / ${resBytes} B)`, hop: { client: { createChatCompletion: bare.call }, close: bare.close }, input: undefined });
}
if (base) {
  const baseTree = await treeOf(resolve(base));
  const baseHop = await startHop(baseTree);
  // A base that reads `body_json` (it has the handlers' bodyOf) is measured with it; an older one with the Struct.
  const baseJson = baseTree.readsBodyJson;
  if (withStruct || !baseJson) variants.push({ name: "base, Struct body", hop: baseHop, input: { body, jsonText: true } });
  if (baseJson) variants.push({ name: "base, body_json", hop: baseHop, input: { bodyJson: bodyText, jsonText: true } });
}

const loadStart = loadavg()[0]!.toFixed(2);
const results = new Map<string, number[]>(variants.map((v) => [v.name, []]));
for (const v of variants) await run(() => v.hop.client.createChatCompletion(v.input, { headers }), Math.min(calls, 1000)); // warm-up
const heap = await startHeapSampling();
for (let r = 0; r < rounds; r++) {
  for (const v of variants) results.get(v.name)!.push(await run(() => v.hop.client.createChatCompletion(v.input, { headers }), calls));
}
if (heap) {
  const file = await heap.stop(`hop-${process.pid}`);
  console.log(`heap profile: ${file} (${calls * rounds * variants.length} calls)`);
}
for (const v of new Set(variants.map((x) => x.hop))) v.close();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`\n${calls} calls per round, c=${concurrency}, ${rounds} rounds, body ${flag("body") ?? "small"} (${Buffer.byteLength(bodyText)} B); load ${loadStart} → ${loadavg()[0]!.toFixed(2)}\n`);
console.log("| variant | best µs per call | median µs per call |\n|---|---:|---:|");
for (const [name, xs] of results) console.log(`| ${name} | ${Math.min(...xs).toFixed(1)} | ${median(xs).toFixed(1)} |`);
// Per round, each variant over the first (the rounds take turns, so a round's variants ran under the same load).
const [first, ...rest] = [...results.keys()];
for (const name of rest) {
  const ratios = results.get(name)!.map((x, i) => x / results.get(first!)![i]!);
  console.log(`\n${name} / ${first}, per round: ${ratios.map((r) => r.toFixed(3)).join(" ")}; median ${median(ratios).toFixed(3)}`);
}
