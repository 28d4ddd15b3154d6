/**
 * CPU of the split hop's protobuf per non-streamed chat call (issue 24): the request encoded by the gateway and decoded
 * by the core, the completion encoded by the core and decoded by the gateway, with protobuf-es (`create` + `toBinary`,
 * `fromBinary`: what the hop used before) and with src/lib/proto-codec.ts, taking turns in each round. Best and median
 * µs per call (all four steps) of the rounds, and protobuf-es / codec per round.
 *
 *   node bin/run-ts.mjs bench/split-codec.ts [--calls 200000] [--rounds 7] [--body small|large]
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { loadavg } from "node:os";
import { CreateChatCompletionRequestSchema, CreateChatCompletionResponseSchema } from "../src/gen/portico/chat/v1/chat_service_pb.js";
import { codecOf } from "../src/lib/proto-codec.js";
import { flag } from "./lib/args.js";

const calls = Number(flag("calls") ?? 200_000);
const rounds = Number(flag("rounds") ?? 7);
const SMALL = { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "Say hello." }], stream: false };
const LARGE = { model: "groq/llama-3.3-70b", messages: Array.from({ length: 12 }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `Turn ${i}: ${"lorem ipsum dolor sit amet ".repeat(18)}` })) };
const bodyJson = JSON.stringify(flag("body") === "large" ? LARGE : SMALL);
const completionJson = JSON.stringify({ id: "chatcmpl-1", object: "chat.completion", created: 1, model: "llama-3.3-70b", provider: "groq", choices: [{ index: 0, message: { role: "assistant", content: "Hello, world" }, finish_reason: "stop" }], usage: { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 } });
// As the gateway passes the request (an init object) and the core's handler answers (a message).
const request = { bodyJson, jsonText: true };
const response = create(CreateChatCompletionResponseSchema, { completionJson, upstreamMs: 312.5, provider: "groq", cache: "" });

let sink = 0;
const variants: Record<string, () => void> = {
  "protobuf-es": () => {
    const req = fromBinary(CreateChatCompletionRequestSchema, toBinary(CreateChatCompletionRequestSchema, create(CreateChatCompletionRequestSchema, request)));
    const res = fromBinary(CreateChatCompletionResponseSchema, toBinary(CreateChatCompletionResponseSchema, response));
    sink += req.bodyJson.length + res.completionJson.length;
  },
  "proto-codec": () => {
    const req = codecOf(CreateChatCompletionRequestSchema).decode(codecOf(CreateChatCompletionRequestSchema).encode(request)) as { bodyJson: string };
    const res = codecOf(CreateChatCompletionResponseSchema).decode(codecOf(CreateChatCompletionResponseSchema).encode(response, 5).subarray(5)) as { completionJson: string };
    sink += req.bodyJson.length + res.completionJson.length;
  },
};

function run(fn: () => void, n: number): number {
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) fn();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / n;
}

const load = loadavg()[0]!.toFixed(2);
for (const fn of Object.values(variants)) run(fn, calls / 4);
const results = new Map<string, number[]>(Object.keys(variants).map((k) => [k, []]));
for (let r = 0; r < rounds; r++) for (const [name, fn] of Object.entries(variants)) results.get(name)!.push(run(fn, calls));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`\n${calls} calls per round, ${rounds} rounds, body ${flag("body") ?? "small"} (${bodyJson.length} B), completion ${completionJson.length} B; load ${load} → ${loadavg()[0]!.toFixed(2)} (sink ${sink % 10})\n`);
console.log("| variant | best µs per call | median µs per call |\n|---|---:|---:|");
for (const [name, xs] of results) console.log(`| ${name} | ${Math.min(...xs).toFixed(2)} | ${median(xs).toFixed(2)} |`);
const ratios = results.get("protobuf-es")!.map((x, i) => x / results.get("proto-codec")![i]!);
console.log(`\nprotobuf-es / proto-codec per round: ${ratios.map((x) => x.toFixed(2)).join(" ")}; median ${median(ratios).toFixed(2)}`);
