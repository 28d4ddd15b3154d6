/**
 * CPU per chunk of the Gemini adapter's stream, in process, with the upstream's events in one write (so the
 * adapter's first read holds them all, as a fast upstream's burst does):
 * `npm run -s build && node bin/run-ts.mjs bench/gemini-stream.ts [--base <checkout>] [--streams 200] [--chunks 200] [--rounds 5]`.
 *
 * The fake Gemini upstream (test/helpers/fake-upstreams/gemini.ts) runs in this process over loopback HTTP/1.1; the
 * adapter is this checkout's build (dist/) and, with `--base`, the base checkout's build, taking turns round by
 * round (interleaved, so load hits both alike). The reader pulls as the relay does (`[PULL]()` when offered, a
 * promise awaited only when one is returned). Figures: process CPU (user + system, the fake's share included, the
 * same for both) per chunk read, median over rounds (and the median of each round's ratio, this / base); and the
 * share of reads (chunks and the end) answered without a promise.
 */
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { geminiWire, startFakeGemini } from "../test/helpers/fake-upstreams/gemini.js";
import type { RecordedRequest, Script } from "../test/helpers/fake-upstreams/server.js";

const arg = (name: string, fallback: string | undefined) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1]! : fallback;
};
const streams = Number(arg("--streams", "200"));
const pieces = Number(arg("--chunks", "200"));
const rounds = Number(arg("--rounds", "5"));
const base = arg("--base", undefined);

interface Target {
  name: string;
  adapter: { stream(call: unknown): AsyncIterator<unknown> };
  pullSym: symbol;
}
async function load(name: string, root: string): Promise<Target> {
  const dist = join(resolve(root), "dist");
  const { GeminiAdapter } = await import(pathToFileURL(join(dist, "core/chat/providers/gemini.js")).href);
  const { PULL } = await import(pathToFileURL(join(dist, "lib/pull.js")).href);
  return { name, adapter: new GeminiAdapter(), pullSym: PULL };
}

const script: Script = { text: Array.from({ length: pieces }, (_, i) => `token${i} `), finish: "STOP", usage: { input: 50, output: pieces }, model: "m" };
const fake = await startFakeGemini(script);
fake.scriptFor = (req: RecordedRequest) => ({ ...script, raw: { events: [geminiWire.streamEvents(script, req).join("")] } });

async function one(t: Target): Promise<{ chunks: number; atHand: number }> {
  const it = t.adapter.stream({
    model: "m",
    baseUrl: `${fake.url}/v1beta`,
    apiKey: "AIza-bench-key-0000",
    signal: new AbortController().signal,
    body: { model: "m", messages: [{ role: "user", content: "hi" }], stream: true },
  }) as AsyncIterator<unknown> & Record<symbol, (() => unknown) | undefined>;
  const p = it[t.pullSym];
  let chunks = 0;
  let atHand = 0;
  for (;;) {
    let r = (p !== undefined ? p.call(it) : it.next()) as IteratorResult<unknown> | Promise<IteratorResult<unknown>>;
    if (r instanceof Promise) r = await r;
    else atHand++;
    if (r.done) return { chunks, atHand };
    chunks++;
  }
}

async function run(t: Target): Promise<{ us: number; atHandShare: number }> {
  const cpu0 = process.cpuUsage();
  let chunks = 0;
  let atHand = 0;
  for (let i = 0; i < streams; i++) {
    const r = await one(t);
    chunks += r.chunks;
    atHand += r.atHand;
  }
  const cpu = process.cpuUsage(cpu0);
  return { us: (cpu.user + cpu.system) / chunks, atHandShare: atHand / (chunks + streams) };
}

const targets = [await load("this checkout", "."), ...(base ? [await load("base", base)] : [])];
for (const t of targets) for (let i = 0; i < 3; i++) await run(t); // warm-up
const results = new Map<string, Array<{ us: number; atHandShare: number }>>();
for (let r = 0; r < rounds; r++) for (const t of targets) results.set(t.name, [...(results.get(t.name) ?? []), await run(t)]);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`Node ${process.version}, ${rounds} rounds × ${streams} streams × ${pieces} text pieces (+1 finish chunk), events in one write`);
console.log("| adapter | CPU µs / chunk (median) | rounds | results at hand |");
console.log("|---|---:|---|---:|");
for (const t of targets) {
  const rs = results.get(t.name)!;
  console.log(`| ${t.name} | ${median(rs.map((x) => x.us)).toFixed(2)} | ${rs.map((x) => x.us.toFixed(2)).join(", ")} | ${(median(rs.map((x) => x.atHandShare)) * 100).toFixed(0)} % |`);
}
if (targets.length === 2) {
  const a = median(results.get(targets[0]!.name)!.map((x) => x.us));
  const b = median(results.get(targets[1]!.name)!.map((x) => x.us));
  const ra = results.get(targets[0]!.name)!.map((x) => x.us);
  const rb = results.get(targets[1]!.name)!.map((x) => x.us);
  console.log(`this / base: ${(a / b).toFixed(2)} (medians); median of the rounds' ratios ${median(ra.map((x, i) => x / rb[i]!)).toFixed(2)}`);
}
await fake.close();
