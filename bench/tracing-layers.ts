/**
 * CPU per request of the layers tracing puts around a chat call (issue 29), in process: the core's tracing
 * interceptor (src/core/tracing-interceptor.ts) and the chat pipeline's trace stage (src/core/chat/pipeline/trace.ts),
 * with one served attempt's span, against the same call without them; this tree's and, with `--base <checkout>`,
 * another checkout's (its own interceptor, trace stage, stage and tap modules).
 *
 *   node bin/run-ts.mjs bench/tracing-layers.ts [--base /work/base-main] [--requests 4000] [--rounds 11] [--events 20]
 *
 * A "request": a new signal, the interceptor (when on) around a three-stage chain — trace (when on), a stage that taps
 * the stream's end as the record stage does, an answer (a completion with `--events 0`, else a stream of `--events`
 * events from an async generator) — and the consumer reading the answer to its end. The spans go to a provider
 * without processors (always on: made, recorded and ended; not encoded, bench/span-processor.ts measures that). The
 * modes take turns every `--requests` requests, `--rounds` times, after a warm-up. Reported per mode: CPU µs per
 * request (median and best of rounds) and the added CPU over "off" (median of the rounds' differences).
 */
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { trace } from "@opentelemetry/api";
import { BasicTracerProvider } from "@opentelemetry/sdk-trace-base";
import { flag } from "./lib/args.js";

const requests = Number(flag("requests") ?? 4000);
const rounds = Number(flag("rounds") ?? 11);
const events = Number(flag("events") ?? 20);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const load = () => loadavg().map((l) => l.toFixed(2)).join(" ");

trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [] }));

type Run = () => Promise<void>;

/** One tree's request, with its tracing layers (`on`) or without. */
async function requestOf(root: string, on: boolean): Promise<Run> {
  const mod = (p: string) => import(pathToFileURL(resolve(root, p)).href);
  const [{ createTracingInterceptor }, { createTraceStage, attemptSpan }, { compose, newCall }, { tapEvents }] = await Promise.all([
    mod("src/core/tracing-interceptor.ts"),
    mod("src/core/chat/pipeline/trace.ts"),
    mod("src/core/chat/pipeline/stage.ts"),
    mod("src/core/chat/pipeline/tap.ts"),
  ]);
  const attempt = { call: { model: "bench-model" }, provider: "groq", credentialSource: "platform", credentialId: "c1", catalogModel: "bench/model" };
  async function* stream() {
    for (let i = 0; i < events; i++) yield { model: "bench-model-served", choices: [{ index: 0, delta: { content: "x" } }] };
  }
  const recordLike = {
    name: "record",
    async run(call: { track: { status: string } }, next: () => Promise<{ kind: string; events?: AsyncIterable<unknown> }>) {
      const outcome = await next();
      if (outcome.kind !== "stream") return outcome;
      return { kind: "stream", events: tapEvents(outcome.events, { end: () => void (call.track.status = "success") }) };
    },
  };
  const answer = {
    name: "execute",
    async run(call: unknown) {
      attemptSpan(call, attempt, 1)?.served();
      if (events === 0) return { kind: "completion", completion: { model: "bench-model-served", choices: [] } };
      return { kind: "stream", events: stream() };
    },
  };
  const chain = compose([...(on ? [createTraceStage()] : []), recordLike, answer]);
  const handler = async (req: { signal: AbortSignal }) => {
    const call = newCall({}, req.signal, events > 0, { model: "bench-model", messages: [] });
    call.track.requestedModel = "bench-model";
    const outcome = await chain(call);
    return outcome.kind === "stream" ? { stream: true, message: outcome.events } : { stream: false, message: outcome.completion };
  };
  const served = on ? createTracingInterceptor()(handler) : handler;
  const header = new Headers();
  const service = { typeName: "portico.chat.v1.ChatService" };
  const method = { name: events > 0 ? "StreamChat" : "Chat", methodKind: events > 0 ? "server_streaming" : "unary" };
  return async () => {
    const res = await served({ header, contextValues: undefined, signal: new AbortController().signal, service, method });
    if (res.stream) for await (const _ of res.message);
  };
}

const cpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
const turn = () => new Promise((r) => setImmediate(r));
async function window(run: Run, n: number): Promise<number> {
  await turn();
  const t0 = cpu();
  for (let i = 0; i < n; i++) {
    await run();
    if (i % 64 === 63) await turn();
  }
  return (cpu() - t0) / n;
}

const here = resolve(import.meta.dirname, "..");
const base = flag("base");
const modes: Record<string, Run> = { off: await requestOf(here, false), on: await requestOf(here, true) };
if (base) modes["base on"] = await requestOf(resolve(base), true);
for (const run of Object.values(modes)) await window(run, 4000);
const results = Object.fromEntries(Object.keys(modes).map((m) => [m, [] as number[]]));
const loadStart = load();
for (let r = 0; r < rounds; r++) for (const [m, run] of Object.entries(modes)) results[m]!.push(await window(run, requests));
console.log(`Node ${process.version}; ${requests} requests per window, ${rounds} rounds, ${events} events per answer; load average ${loadStart} at start, ${load()} at end`);
console.log("| mode | CPU µs per request (median; best) | added over off: median of rounds' differences |");
console.log("|---|---:|---:|");
for (const [m, us] of Object.entries(results)) {
  const added = m === "off" ? "—" : median(us.map((x, i) => x - results.off![i]!)).toFixed(2);
  console.log(`| ${m} | ${median(us).toFixed(2)}; ${Math.min(...us).toFixed(2)} | ${added} |`);
}
