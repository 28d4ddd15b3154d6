/**
 * CPU per relayed chunk of each provider adapter's stream parsing and translation:
 * `node bin/run-ts.mjs bench/provider-streams.ts [--streams N] [--chunks N]`.
 *
 * The upstream body is the fake upstream's own wire framing (test/helpers/fake-upstreams), prepared once and
 * written in one piece by a node:http server in this process over loopback (the adapters call upstreams through
 * undici, not `fetch`, so a replaced `fetch` would never be reached). The figure is the adapter's work (SSE parsing,
 * JSON parsing, translation to chat.completion.chunk) plus the loopback exchange, which costs every row the same.
 * A floor row parses the OpenAI frames with eventsource-parser + JSON.parse and nothing else.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createParser } from "eventsource-parser";
import { num } from "./lib/args.js";
import { AnthropicAdapter } from "../src/core/chat/providers/anthropic.js";
import { GeminiAdapter } from "../src/core/chat/providers/gemini.js";
import { OpenAICompatibleAdapter } from "../src/core/chat/providers/openai-compatible.js";
import type { ProviderAdapter } from "../src/core/chat/providers/types.js";
import { anthropicWire } from "../test/helpers/fake-upstreams/anthropic.js";
import { geminiWire } from "../test/helpers/fake-upstreams/gemini.js";
import { openAiWire } from "../test/helpers/fake-upstreams/openai.js";
import type { Script, Wire } from "../test/helpers/fake-upstreams/server.js";

const streams = num("streams", 300);
const pieces = num("chunks", 200);
const encoder = new TextEncoder();

function frames(wire: Wire, finish: string, url: string, body: unknown): Uint8Array[] {
  const script: Script = { text: Array.from({ length: pieces }, (_, i) => `token${i} `), finish, usage: { input: 50, output: pieces }, model: "m" };
  return wire.streamEvents(script, { method: "POST", url, headers: {}, body }).map((f) => encoder.encode(f));
}

let current: Buffer = Buffer.alloc(0);
const upstream = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(current);
  });
});
await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
const baseUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`;

async function measure(name: string, run: () => Promise<number>): Promise<void> {
  for (let i = 0; i < Math.max(20, streams / 10); i++) await run(); // warm-up
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let chunks = 0;
  for (let i = 0; i < streams; i++) chunks += await run();
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const us = (cpu.user + cpu.system) / chunks;
  console.log(`| ${name} | ${chunks} | ${us.toFixed(2)} | ${((wall * 1000) / chunks).toFixed(2)} |`);
}

const adapterRun = (adapter: ProviderAdapter, bytes: Uint8Array[]) => async () => {
  current = Buffer.concat(bytes);
  let n = 0;
  for await (const _ of adapter.stream({
    model: "m",
    baseUrl,
    apiKey: "sk-bench-key-0000",
    signal: new AbortController().signal,
    body: { model: "m", messages: [{ role: "user", content: "hi" }], stream: true },
  })) n++;
  return n;
};

const openaiFrames = frames(openAiWire, "stop", "/v1/chat/completions", { stream: true, stream_options: { include_usage: true } });
console.log(`Node ${process.version}, ${streams} streams × ${pieces} text pieces each`);
console.log("| stream | chunks relayed | CPU µs / chunk | wall µs / chunk |");
console.log("|---|---:|---:|---:|");
await measure("floor: eventsource-parser + JSON.parse (OpenAI frames)", async () => {
  let n = 0;
  const decoder = new TextDecoder();
  const parser = createParser({
    onEvent: (e) => {
      if (e.data !== "[DONE]") {
        JSON.parse(e.data);
        n++;
      }
    },
  });
  for (const f of openaiFrames) parser.feed(decoder.decode(f, { stream: true }));
  return n;
});
await measure("openai-compatible", adapterRun(new OpenAICompatibleAdapter(), openaiFrames));
await measure("anthropic", adapterRun(new AnthropicAdapter(), frames(anthropicWire, "end_turn", "/v1/messages", { stream: true })));
await measure("gemini", adapterRun(new GeminiAdapter(), frames(geminiWire, "STOP", "/v1beta/models/m:streamGenerateContent?alt=sse", {})));
upstream.close();
