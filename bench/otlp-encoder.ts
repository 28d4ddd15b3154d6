/**
 * CPU per span of the OTLP/protobuf encoding (issue 29): `@opentelemetry/otlp-transformer`'s `ProtobufTraceSerializer`
 * (what the SDK's http/protobuf exporter runs) against Portico's encoder (src/lib/otlp-trace-encoder.ts), on the same
 * ended spans, checking that the bytes are identical; also the CPU of making those spans with the SDK.
 *
 *   node bin/run-ts.mjs bench/otlp-encoder.ts [--requests 4000] [--batch 512] [--rounds 7]
 *
 * The spans are one chat request's three as Portico makes them (gateway SERVER span, the core RPC's span carrying
 * the GenAI request attributes, the served attempt's CLIENT span with tokens and cost), `--requests` times, made by
 * a real tracer provider (always-on sampler, an exporter keeping them in memory). Each round encodes them in batches
 * of `--batch` spans (the batch span processor's export batch) with each encoder in turn; reported: µs per request
 * (three spans), median and best of the rounds, and the load average.
 */
import { loadavg } from "node:os";
import { BasicTracerProvider, SimpleSpanProcessor, type ReadableSpan, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { encodeTraceRequest } from "../src/lib/otlp-trace-encoder.js";
import { chatRequestSpans } from "./lib/chat-spans.js";
import { flag } from "./lib/args.js";

const requests = Number(flag("requests") ?? 4000);
const batch = Number(flag("batch") ?? 512);
const rounds = Number(flag("rounds") ?? 7);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const load = () => loadavg().map((l) => l.toFixed(2)).join(" ");

const ended: ReadableSpan[] = [];
const keep: SpanExporter = {
  export: (spans, done) => {
    ended.push(...spans);
    done({ code: 0 });
  },
  shutdown: async () => undefined,
};
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": "portico", "service.instance.id": "bench-1" }),
  spanProcessors: [new SimpleSpanProcessor(keep)],
});
const tracer = provider.getTracer("portico");
const request = (i: number) => chatRequestSpans(tracer, i);

const cpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
// Warm-up of the span path, then the measured making of the spans.
for (let i = 0; i < 2000; i++) request(i);
ended.length = 0;
const t0 = cpu();
for (let i = 0; i < requests; i++) request(i);
const makeUs = (cpu() - t0) / requests;

const batches: ReadableSpan[][] = [];
for (let i = 0; i < ended.length; i += batch) batches.push(ended.slice(i, i + batch));
let same = 0;
for (const b of batches) {
  const a = ProtobufTraceSerializer.serializeRequest(b)!;
  const m = encodeTraceRequest(b);
  if (Buffer.compare(Buffer.from(a), Buffer.from(m)) === 0) same++;
}
const bytes = batches.reduce((n, b) => n + encodeTraceRequest(b).length, 0);
const time = (encode: (b: ReadableSpan[]) => unknown) => {
  const t = cpu();
  for (const b of batches) encode(b);
  return (cpu() - t) / requests;
};
const sdk: number[] = [];
const ours: number[] = [];
for (let r = 0; r < rounds + 2; r++) {
  const s = time((b) => ProtobufTraceSerializer.serializeRequest(b));
  const o = time(encodeTraceRequest);
  if (r >= 2) {
    sdk.push(s);
    ours.push(o);
  }
}
console.log(`Node ${process.version}; ${requests} requests (${ended.length} spans), batches of ${batch}; load average ${load()}`);
console.log(`identical bytes: ${same} of ${batches.length} batches; ${(bytes / requests).toFixed(0)} bytes per request`);
console.log(`making the spans (SDK: start, attributes, end, processor): ${makeUs.toFixed(2)} µs per request`);
console.log(`| encoder | µs per request (median) | best |`);
console.log(`|---|---:|---:|`);
console.log(`| @opentelemetry/otlp-transformer ProtobufTraceSerializer | ${median(sdk).toFixed(2)} | ${Math.min(...sdk).toFixed(2)} |`);
console.log(`| src/lib/otlp-trace-encoder.ts | ${median(ours).toFixed(2)} | ${Math.min(...ours).toFixed(2)} |`);
console.log(`load average at end ${load()}`);
await provider.shutdown();
