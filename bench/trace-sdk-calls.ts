/**
 * CPU of one chat request's three spans in the SDK's tracer, in process (issue 29), by variant of what Portico hands the
 * SDK through its public interfaces: the RPC span's three attributes (given to `startSpan`, or set after it), with the
 * SDK's `ParentBasedSampler(AlwaysOnSampler)`. (A sampler of Portico's own was measured here at −0.1 to −0.2 µs a
 * request and not kept: bench/README.md, "the SDK's public extension points".) Spans go to a
 * processor whose `onEnd` does nothing (the SDK's span work alone; encoding is bench/otlp-encoder.ts's), ids from
 * src/lib/trace-ids.ts for every variant. The variants take turns every `--requests` requests, `--rounds` times,
 * after a warm-up (a last variant samples nothing: the same calls on non-recording spans); reported: CPU µs per request (median and best of the rounds) and each variant's difference to the
 * first (median of the rounds' differences).
 *
 *   node bin/run-ts.mjs bench/trace-sdk-calls.ts [--requests 20000] [--rounds 15]
 */
import { loadavg } from "node:os";
import type { Tracer } from "@opentelemetry/api";
import { AlwaysOffSampler, AlwaysOnSampler, BasicTracerProvider, ParentBasedSampler, type Sampler } from "@opentelemetry/sdk-trace-base";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { PooledIdGenerator } from "../src/lib/trace-ids.js";
import { flag } from "./lib/args.js";
import { chatRequestSpans } from "./lib/chat-spans.js";

const requests = Number(flag("requests") ?? 20000);
const rounds = Number(flag("rounds") ?? 15);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const load = () => loadavg().map((l) => l.toFixed(2)).join(" ");
const resource = resourceFromAttributes({ "service.name": "portico", "service.instance.id": "bench-1" });
const noop = { onStart() {}, onEnd() {}, forceFlush: async () => undefined, shutdown: async () => undefined };
const tracerWith = (sampler: Sampler): Tracer =>
  new BasicTracerProvider({ resource, sampler, idGenerator: new PooledIdGenerator(), spanProcessors: [noop] }).getTracer("portico");

const sdkSampler = tracerWith(new ParentBasedSampler({ root: new AlwaysOnSampler() }));
const notSampled = tracerWith(new ParentBasedSampler({ root: new AlwaysOffSampler() }));
const variants: Array<[string, (i: number) => void]> = [
  ["RPC attributes given to startSpan (before)", (i) => chatRequestSpans(sdkSampler, i, true)],
  ["RPC attributes set after startSpan (now)", (i) => chatRequestSpans(sdkSampler, i)],
  ["nothing sampled (non-recording spans: the calls without the SDK's span work)", (i) => chatRequestSpans(notSampled, i)],
];
const cpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
function window(f: (i: number) => void, n: number): number {
  const t0 = cpu();
  for (let i = 0; i < n; i++) f(i);
  return (cpu() - t0) / n;
}
for (const [, f] of variants) window(f, 20000);
const results = variants.map(() => [] as number[]);
const loadStart = load();
for (let r = 0; r < rounds; r++) for (let v = 0; v < variants.length; v++) results[v]!.push(window(variants[v]![1], requests));
console.log(`Node ${process.version}; ${requests} requests per window, ${rounds} rounds; load average ${loadStart} at start, ${load()} at end`);
console.log("| variant | CPU µs per request (median; best) | against the first: median of rounds' differences |");
console.log("|---|---:|---:|");
variants.forEach(([name], v) => {
  const us = results[v]!;
  const d = v === 0 ? "—" : median(us.map((x, r) => x - results[0]![r]!)).toFixed(3);
  console.log(`| ${name} | ${median(us).toFixed(3)}; ${Math.min(...us).toFixed(3)} | ${d} |`);
});
