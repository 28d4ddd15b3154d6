/**
 * A coding agent's Anthropic Messages body over the split hop, as a `google.protobuf.Struct` (`body`, what the split
 * gateway sent the dialects until now) and as the JSON text it received (`body_json`, as chat completions already do).
 * The body is built by bench/lib/coding-agent-body.ts, deterministic, ≈ 60 kB: a long system prompt, 20 tools with JSON schemas, and a 40-turn
 * history of text, tool_use and tool_result blocks (file contents, command output). Two phases, the variants taking
 * turns in each round:
 *
 * - `codec`: per call, CreateMessageRequest encoded as the gateway's transport does (src/lib/proto-codec.ts, which
 *   hands a message with a Struct to protobuf-es's toBinary), decoded as the core's fast path does (its fromBinary
 *   for a Struct), and the body read as the core's handler reads it (src/core/chat/request-body.ts `bodyOf`: the
 *   Struct as decoded, or the text parsed and checked: JSON.parse + the input limits). Single thread, CPU per call.
 * - `hop`: the whole hop in this process: the split gateway's node:http2 gRPC client (src/gateway/h2-grpc-transport.ts)
 *   calling CreateMessage on the core's gRPC fast path (src/core/grpc-fast-path.ts) over HTTP/2 on loopback, a stub
 *   handler reading the body through `bodyOf` and answering a fixed message as JSON text; CPU of this process (both
 *   ends) per call, `--concurrency` calls in flight.
 *
 * Best and median µs per call of the rounds, and Struct / body_json per round (their median).
 *
 *   node bin/run-ts.mjs bench/dialect-body.ts [--phase codec|hop|both] [--calls 2000] [--hop-calls 1000]
 *       [--concurrency 8] [--rounds 7] [--kb 60]
 */
import http2 from "node:http2";
import { once } from "node:events";
import { loadavg } from "node:os";
import { createClient, type ConnectRouter, type Transport } from "@connectrpc/connect";
import { ChatService, CreateMessageRequestSchema } from "../src/gen/portico/chat/v1/chat_service_pb.js";
import { codecOf } from "../src/lib/proto-codec.js";
import { bodyOf } from "../src/core/chat/request-body.js";
import { createGrpcFastPath } from "../src/core/grpc-fast-path.js";
import { createDirectTransport } from "../src/core/direct-transport.js";
import { createH2GrpcTransport } from "../src/gateway/h2-grpc-transport.js";
import { flag, num } from "./lib/args.js";
import { codingAgentBody } from "./lib/coding-agent-body.js";

const phase = flag("phase") ?? "both";
const calls = num("calls", 2000);
const hopCalls = num("hop-calls", 1000);
const concurrency = num("concurrency", 8);
const rounds = num("rounds", 7);
const targetBytes = num("kb", 60) * 1024;

const body = codingAgentBody(targetBytes);
const bodyText = JSON.stringify(body);
const headers = { anthropicBeta: "claude-code-20250219,interleaved-thinking-2025-05-14", anthropicVersion: "2023-06-01" };
// As the gateway passes them: an init object with the parsed body, or with the text it received.
const structInput = { body, ...headers };
const textInput = { bodyJson: bodyText, ...headers };
const codec = codecOf(CreateMessageRequestSchema);
const structBytes = codec.encode(structInput).length;
const textBytes = codec.encode(textInput).length;

type Req = { body?: Record<string, never>; bodyJson?: string };
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function report(title: string, results: Map<string, number[]>) {
  console.log(`\n${title}\n\n| variant | best µs per call | median µs per call |\n|---|---:|---:|`);
  for (const [name, xs] of results) console.log(`| ${name} | ${Math.min(...xs).toFixed(1)} | ${median(xs).toFixed(1)} |`);
  const [first, ...rest] = [...results.keys()];
  for (const name of rest) {
    const ratios = results.get(first!)!.map((x, i) => x / results.get(name)![i]!);
    console.log(`\n${first} / ${name}, per round: ${ratios.map((r) => r.toFixed(2)).join(" ")}; median ${median(ratios).toFixed(2)}`);
  }
}

const loadStart = loadavg().map((x) => x.toFixed(2)).join(" ");
console.log(`body ${bodyText.length} B of JSON (${(body.tools as unknown[]).length} tools, ${(body.messages as unknown[]).length} messages); CreateMessageRequest ${structBytes} B as Struct, ${textBytes} B as body_json; load ${loadStart}`);

// ---- codec ----------------------------------------------------------------------------------------------------------

let sink = 0;
if (phase === "codec" || phase === "both") {
  const variants: Record<string, () => void> = {
    "Struct body": () => {
      const req = codec.decode(codec.encode(structInput)) as Req;
      sink += (bodyOf(req) as { max_tokens: number }).max_tokens;
    },
    body_json: () => {
      const req = codec.decode(codec.encode(textInput)) as Req;
      sink += (bodyOf(req) as { max_tokens: number }).max_tokens;
    },
    // The body_json steps without the core's parse and check (what the text alone costs the hop's codec).
    "body_json, codec only": () => {
      const req = codec.decode(codec.encode(textInput)) as Req;
      sink += req.bodyJson!.length;
    },
  };
  const run = (fn: () => void, n: number) => {
    const start = process.cpuUsage();
    for (let i = 0; i < n; i++) fn();
    const used = process.cpuUsage(start);
    return (used.user + used.system) / n;
  };
  for (const fn of Object.values(variants)) run(fn, Math.max(100, calls / 4));
  const results = new Map<string, number[]>(Object.keys(variants).map((k) => [k, []]));
  for (let r = 0; r < rounds; r++) for (const [name, fn] of Object.entries(variants)) results.get(name)!.push(run(fn, calls));
  report(`codec: encode + decode + bodyOf, ${calls} calls per round, ${rounds} rounds; load ${loadavg()[0]!.toFixed(2)} (sink ${sink % 10})`, results);
}

// ---- hop ------------------------------------------------------------------------------------------------------------

if (phase === "hop" || phase === "both") {
  const MESSAGE = JSON.stringify({ id: "gen-1", type: "message", role: "assistant", model: "claude-sonnet-4-20250514", content: [{ type: "text", text: "Running the tests now." }], stop_reason: "end_turn", stop_sequence: null, usage: { input_tokens: 15000, output_tokens: 7 } });
  const routes = (router: ConnectRouter) =>
    router.service(ChatService, {
      async createMessage(req: Req) {
        if ((bodyOf(req) as { model?: string } | undefined)?.model !== body.model) throw new Error("the body did not arrive");
        return { messageJson: MESSAGE, upstreamMs: 1.5, provider: "anthropic", cache: "" };
      },
    } as never);
  const fastPath = createGrpcFastPath(routes, createDirectTransport(routes, []), 4 * 1024 * 1024);
  const server = http2.createServer();
  server.on("stream", (stream, h) => {
    if (!fastPath.handle(stream, h)) stream.respond({ ":status": 404 }, { endStream: true });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const transport: Transport & { close(): void } = createH2GrpcTransport({ baseUrl: `http://127.0.0.1:${(server.address() as { port: number }).port}` });
  const client = createClient(ChatService, transport);
  const callOptions = { headers: { authorization: "Bearer pk-test", "x-request-id": "1" } };
  const run = async (input: object, n: number) => {
    let left = n;
    const worker = async () => {
      while (left-- > 0) await client.createMessage(input as never, callOptions);
    };
    const start = process.cpuUsage();
    await Promise.all(Array.from({ length: concurrency }, worker));
    const used = process.cpuUsage(start);
    return (used.user + used.system) / n;
  };
  const variants: Record<string, object> = { "Struct body": structInput, body_json: textInput };
  for (const input of Object.values(variants)) await run(input, Math.max(100, hopCalls / 4));
  const results = new Map<string, number[]>(Object.keys(variants).map((k) => [k, []]));
  for (let r = 0; r < rounds; r++) for (const [name, input] of Object.entries(variants)) results.get(name)!.push(await run(input, hopCalls));
  transport.close();
  server.close();
  report(`hop: CreateMessage over HTTP/2 on loopback (client + fast path + stub handler in this process), ${hopCalls} calls per round, c=${concurrency}, ${rounds} rounds; load ${loadavg()[0]!.toFixed(2)}`, results);
}
