/**
 * The dialects' own CPU, apart from the rest of the request (issue 28, "Speed"): per streamed text piece, what the
 * core's stream RPC does with each canonical chunk (chat completions: `encodeEvent` and `JSON.stringify`; Messages
 * and Responses: the stream encoder and the JSON text of each event it gives) and what the gateway's route makes of
 * it (the SSE frame); per request, the body's validation and decoding (the dialect's schema, its decoder, then the
 * canonical ChatRequest validation) and the non-streamed answer's encoding to JSON text. `--base DIR` runs the same
 * against another checkout's `src/` (e.g. /work/main), the trees taking turns `--pairs` times; CPU µs of this
 * process (one thread), best of `--repeats` runs each turn.
 *
 *   node bin/run-ts.mjs bench/dialect-encoders.ts [--base DIR] [--pairs 3] [--repeats 5] [--streams 300]
 */
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { flag, num } from "./lib/args.js";

const pairs = num("pairs", 3);
const repeats = num("repeats", 5);
const streams = num("streams", 300);
const base = flag("base");
const PIECES = 100;

type Case = { name: string; perStream: boolean; run: () => void };

/** One encoded event: the encoder's data object or, when a tree gives it, its JSON text. */
type Encoded = { type: string; data?: unknown; dataJson?: string };
const json = (e: Encoded) => e.dataJson ?? JSON.stringify(e.data);
const frame = (type: string, dataJson: string) => `event: ${type}\ndata: ${dataJson}\n\n`;

async function casesOf(root: string): Promise<Case[]> {
  const m = (p: string) => import(pathToFileURL(resolve(root, "src", p)).href);
  const [chat, am, or, { MessagesRequest }, { ResponsesRequest }, { ChatRequest }] = await Promise.all([
    m("core/chat/dialects/openai-chat.ts"),
    m("core/chat/dialects/anthropic-messages.ts"),
    m("core/chat/dialects/openai-responses.ts"),
    m("contract/requests/messages-request.ts"),
    m("contract/requests/responses-request.ts"),
    m("contract/requests/index.ts"),
  ]);
  const chunk = (i: number) => ({
    id: "gen-0b8f2a8e-6c1d-4d0e-9f0e-3b4c5d6e7f80",
    object: "chat.completion.chunk",
    created: 1_764_000_000,
    model: "llama-3.3-70b",
    provider: "groq",
    choices: [{ index: 0, delta: { content: `w${i} ` }, finish_reason: null }],
  });
  const last = {
    ...chunk(0),
    choices: [{ index: 0, delta: {}, finish_reason: "stop" }],
    usage: { prompt_tokens: 12, completion_tokens: PIECES, total_tokens: 12 + PIECES },
  };
  // Fresh chunks per stream, as the execute stage makes them.
  const stream = () => [...Array.from({ length: PIECES }, (_, i) => chunk(i)), last];
  const prompt = [{ role: "user", content: "Say hello." }];
  const bodies = {
    chat: { model: "groq/llama-3.3-70b", messages: prompt },
    messages: { model: "groq/llama-3.3-70b", max_tokens: 256, messages: prompt },
    responses: { model: "groq/llama-3.3-70b", max_output_tokens: 256, input: prompt },
  };
  const completion = {
    id: "gen-0b8f2a8e-6c1d-4d0e-9f0e-3b4c5d6e7f80",
    object: "chat.completion",
    created: 1_764_000_000,
    model: "llama-3.3-70b",
    provider: "groq",
    choices: [{ index: 0, message: { role: "assistant", content: "Hello, world!" }, finish_reason: "stop" }],
    usage: { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 },
  };
  const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
  const brand = { brand: "portico" };
  let sink = 0;
  const echoBody = ResponsesRequest.parse(clone(bodies.responses));
  return [
    {
      name: "stream: chat/completions",
      perStream: true,
      run() {
        for (const ev of stream()) sink += `data: ${JSON.stringify(chat.encodeEvent(ev))}\n\n`.length;
      },
    },
    {
      name: "stream: messages",
      perStream: true,
      run() {
        const enc = new am.MessagesStreamEncoder("m");
        for (const ev of stream()) for (const e of enc.push(ev) as Encoded[]) sink += frame(e.type, json(e)).length;
        for (const e of enc.end() as Encoded[]) sink += frame(e.type, json(e)).length;
      },
    },
    {
      name: "stream: responses",
      perStream: true,
      run() {
        const enc = new or.ResponsesStreamEncoder("m", or.echoOf(echoBody));
        for (const ev of stream()) for (const e of enc.push(ev) as Encoded[]) sink += frame(e.type, json(e)).length;
        for (const e of enc.end() as Encoded[]) sink += frame(e.type, json(e)).length;
      },
    },
    {
      name: "request: chat/completions (validate, answer JSON)",
      perStream: false,
      run() {
        ChatRequest.parse(chat.decodeRequest(clone(bodies.chat)), brand);
        sink += JSON.stringify(chat.encodeResponse(clone(completion))).length;
      },
    },
    {
      name: "request: messages (parse, decode, validate, answer JSON)",
      perStream: false,
      run() {
        ChatRequest.parse(am.decodeRequest(MessagesRequest.parse(clone(bodies.messages))), brand);
        sink += JSON.stringify(am.encodeResponse(clone(completion))).length;
      },
    },
    {
      name: "request: responses (parse, decode, validate, answer JSON)",
      perStream: false,
      run() {
        const body = ResponsesRequest.parse(clone(bodies.responses));
        ChatRequest.parse(or.decodeRequest(body), brand);
        sink += JSON.stringify(or.encodeResponse(clone(completion), or.echoOf(body))).length;
      },
    },
  ].map((c) => ({ ...c, run: () => void (c.run(), sink) }));
}

/** CPU µs per text piece (stream cases) or per request. */
function measure(c: Case): number {
  const n = c.perStream ? streams : streams * 20;
  let best = Infinity;
  for (let r = 0; r < repeats; r++) {
    const t0 = process.cpuUsage();
    for (let i = 0; i < n; i++) c.run();
    const d = process.cpuUsage(t0);
    best = Math.min(best, (d.user + d.system) / (c.perStream ? n * PIECES : n));
  }
  return best;
}

async function main(): Promise<void> {
  const trees = [{ name: "this tree", cases: await casesOf(process.cwd()) }];
  if (base) trees.unshift({ name: `base (${base})`, cases: await casesOf(base) });
  for (const t of trees) for (const c of t.cases) for (let i = 0; i < 3; i++) c.run(); // warm up
  for (const t of trees) for (const c of t.cases) measure(c);
  const figures = trees.map(() => new Map<string, number[]>());
  const load0 = loadavg().map((v) => v.toFixed(2)).join(" ");
  for (let p = 0; p < pairs; p++) {
    for (const [i, t] of trees.entries()) {
      for (const c of t.cases) {
        const f = figures[i]!;
        f.set(c.name, [...(f.get(c.name) ?? []), measure(c)]);
      }
    }
  }
  const load1 = loadavg().map((v) => v.toFixed(2)).join(" ");
  console.log(`\nNode ${process.version}; ${pairs} turns, best of ${repeats} each; load average ${load0} at start, ${load1} at end.`);
  console.log(`CPU µs per text piece (streams of ${PIECES}) or per request; each turn's figure, then the smallest.\n`);
  console.log(`| case | ${trees.map((t) => t.name).join(" | ")} |`);
  console.log(`|---|${trees.map(() => "---:").join("|")}|`);
  for (const c of trees[0]!.cases) {
    const cells = figures.map((f) => {
      const xs = f.get(c.name) ?? [];
      return `${xs.map((x) => x.toFixed(2)).join(" / ")} → **${Math.min(...xs).toFixed(2)}**`;
    });
    console.log(`| ${c.name} | ${cells.join(" | ")} |`);
  }
}

await main();
