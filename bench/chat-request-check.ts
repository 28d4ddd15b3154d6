/**
 * The chat request's validation per request (issue 24): `ChatRequest.parse` (zod, a copy of the body) against
 * `ChatRequest.check` (the common shape checked without zod, zod for anything else), taking turns in one
 * process, CPU µs per call, best of `--repeats`. Bodies: the hot-path bench's, a typical four-message chat with
 * sampling fields, and one with a tool (which `check` leaves to zod). Then the gateway's request message for the
 * core: `create(CreateChatCompletionRequestSchema, { body, jsonText })` (what the transports did with the plain
 * object the route passed) against the route's copy of a zero message (`Object.assign`, then assignments).
 *
 *   node bin/run-ts.mjs bench/chat-request-check.ts [--calls 100000] [--repeats 5]
 */
import { loadavg } from "node:os";
import { num } from "./lib/args.js";
import { create } from "@bufbuild/protobuf";
import { ChatRequest } from "../src/contract/requests/index.js";
import { CreateChatCompletionRequestSchema } from "../src/gen/portico/chat/v1/chat_service_pb.js";

const calls = num("calls", 100_000);
const repeats = num("repeats", 5);
const BODIES: Record<string, Record<string, unknown>> = {
  "hot-path bench's body": { model: "groq/llama-3.3-70b", messages: [{ role: "user", content: "Say hello." }], stream: false },
  "four messages, sampling fields": {
    model: "openai/gpt-4o",
    messages: [{ role: "system", content: "You are helpful." }, { role: "user", content: "Hi" }, { role: "assistant", content: "Hello!" }, { role: "user", content: "Tell me a joke." }],
    temperature: 0.7, max_tokens: 256, stream: false, user: "u-1",
  },
  "a function tool (zod)": { model: "m", messages: [{ role: "user", content: "x" }], tools: [{ type: "function", function: { name: "f", parameters: {} } }] },
};
const opts = { brand: "portico" };
const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
const ways = { parse: (b: unknown) => ChatRequest.parse(b, opts), check: (b: unknown) => ChatRequest.check(b, opts) };

console.log(`Node ${process.version}; ${calls} calls per run, best of ${repeats}; load average at start ${loadavg().map((l) => l.toFixed(2)).join(" ")}\n`);
console.log("| body | parse (zod) µs | check µs |\n|---|---:|---:|");
for (const [name, body] of Object.entries(BODIES)) {
  const best = { parse: Infinity, check: Infinity };
  for (let r = 0; r < repeats; r++) {
    for (const way of (r % 2 === 0 ? ["parse", "check"] : ["check", "parse"]) as Array<keyof typeof ways>) {
      const run = ways[way];
      const t = cpuUs();
      for (let i = 0; i < calls; i++) run(body);
      best[way] = Math.min(best[way], (cpuUs() - t) / calls);
    }
  }
  console.log(`| ${name} | ${best.parse.toFixed(3)} | ${best.check.toFixed(3)} |`);
}
const zero = create(CreateChatCompletionRequestSchema);
const body = BODIES["hot-path bench's body"] as never;
let kept: unknown;
const messageWays = {
  create: () => (kept = create(CreateChatCompletionRequestSchema, { body, jsonText: true })),
  copy: () => {
    const m = Object.assign({}, zero);
    m.body = body;
    m.jsonText = true;
    kept = m;
  },
};
const bestMsg = { create: Infinity, copy: Infinity };
for (let r = 0; r < repeats; r++) {
  for (const way of (r % 2 === 0 ? ["create", "copy"] : ["copy", "create"]) as Array<keyof typeof messageWays>) {
    const run = messageWays[way];
    const t = cpuUs();
    for (let i = 0; i < calls * 3; i++) run();
    bestMsg[way] = Math.min(bestMsg[way], (cpuUs() - t) / (calls * 3));
  }
}
console.log(`\n| the core's request message | create µs | copy µs |\n|---|---:|---:|\n| { body, jsonText: true } | ${bestMsg.create.toFixed(3)} | ${bestMsg.copy.toFixed(3)} |`);
void kept;
console.log(`\nload average at end ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
