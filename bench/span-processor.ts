/**
 * CPU per traced request of the span processor, in process (issue 29): the SDK's BatchSpanProcessor holding the span
 * objects until their batch is encoded (src/lib/otlp-trace-encoder.ts) and exported, against Portico's
 * EncodingSpanProcessor (src/lib/otlp-span-processor.ts) encoding each span as it ends, beside the same requests
 * without spans.
 *
 *   node bin/run-ts.mjs bench/span-processor.ts [--requests 2000] [--rounds 15] [--garbage 300] [--inflight 32]
 *
 * A "request" allocates `--garbage` small objects (≈ 130 bytes each, what the chat pipeline makes and drops per
 * request), keeps them while `--inflight` later requests run (requests overlap in a server), awaits once (as a
 * request does) and, traced, makes one chat request's three spans as Portico makes them (bench/lib/chat-spans.ts).
 * Three tracer providers (always-on sampler, same resource): none (garbage only), the SDK's batch processor, the
 * encoding processor; both exporters take the batch's bytes and answer at once (no HTTP). The modes take turns every
 * `--requests` requests, `--rounds` times, after a warm-up. Reported per mode: CPU µs per request (median and best of
 * rounds), the added CPU over "none" (median of the rounds' differences), and scavenges and mark-compacts per 1,000
 * requests (counts, which the machine's load does not change).
 */
import { loadavg } from "node:os";
import { PerformanceObserver, constants, type PerformanceEntry } from "node:perf_hooks";
import { BasicTracerProvider, BatchSpanProcessor, type SpanProcessor } from "@opentelemetry/sdk-trace-base";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { encodeTraceRequest } from "../src/lib/otlp-trace-encoder.js";
import { EncodingSpanProcessor } from "../src/lib/otlp-span-processor.js";
import { chatRequestSpans } from "./lib/chat-spans.js";
import { flag } from "./lib/args.js";

const requests = Number(flag("requests") ?? 2000);
const rounds = Number(flag("rounds") ?? 15);
const garbage = Number(flag("garbage") ?? 300);
const inflight = Number(flag("inflight") ?? 32);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const load = () => loadavg().map((l) => l.toFixed(2)).join(" ");

const resource = resourceFromAttributes({ "service.name": "portico", "service.instance.id": "bench-1" });
let exportedBytes = 0;
const batchOptions = { maxExportBatchSize: 512, maxQueueSize: 2048, scheduledDelayMillis: 5000 };
const processors: Record<string, SpanProcessor | undefined> = {
  none: undefined,
  batch: new BatchSpanProcessor(
    {
      export: (spans, done) => {
        exportedBytes += encodeTraceRequest(spans).length;
        done({ code: 0 });
      },
      shutdown: async () => undefined,
    },
    batchOptions,
  ),
  encoding: new EncodingSpanProcessor(
    {
      export: (b, done) => {
        exportedBytes += b.bytes.length;
        done({ code: 0 });
      },
      shutdown: async () => undefined,
    },
    batchOptions,
  ),
};
const tracers = Object.fromEntries(
  Object.entries(processors).map(([mode, p]) => [mode, p && new BasicTracerProvider({ resource, spanProcessors: [p] }).getTracer("portico")]),
);

const ring: unknown[][] = Array.from({ length: inflight }, () => []);
function work(i: number): void {
  const kept: unknown[] = [];
  for (let j = 0; j < garbage; j++) kept.push({ i, j, name: `field-${j}`, value: [j, i], nested: { at: j } });
  ring[i % inflight] = kept;
}

const gcs = { minor: 0, major: 0 };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const kind = (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
    if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) gcs.major++;
    else if (kind === constants.NODE_PERFORMANCE_GC_MINOR) gcs.minor++;
  }
}).observe({ entryTypes: ["gc"] });
const turn = () => new Promise((r) => setImmediate(r));

const cpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
async function window(mode: string, n: number) {
  const tracer = tracers[mode];
  await turn();
  gcs.minor = gcs.major = 0;
  const t0 = cpu();
  for (let i = 0; i < n; i++) {
    work(i);
    await null;
    if (tracer) chatRequestSpans(tracer, i);
    if (i % 64 === 63) await turn();
  }
  await processors[mode]?.forceFlush();
  const us = (cpu() - t0) / n;
  await turn();
  return { us, minor: (gcs.minor * 1000) / n, major: (gcs.major * 1000) / n };
}

const modes = Object.keys(processors);
for (const m of modes) await window(m, 4000);
const results = Object.fromEntries(modes.map((m) => [m, [] as Awaited<ReturnType<typeof window>>[]]));
const loadStart = load();
for (let r = 0; r < rounds; r++) for (const m of modes) results[m]!.push(await window(m, requests));
console.log(`Node ${process.version}; ${requests} requests per window, ${rounds} rounds, ${garbage} objects per request kept over ${inflight} requests; load average ${loadStart} at start, ${load()} at end`);
console.log("| processor | CPU µs per request (median; best) | added over none: median of rounds' differences | scavenges / mark-compacts per 1,000 requests (median) |");
console.log("|---|---:|---:|---:|");
for (const m of modes) {
  const rs = results[m]!;
  const us = rs.map((x) => x.us);
  const added = m === "none" ? "—" : median(rs.map((x, i) => x.us - results.none![i]!.us)).toFixed(2);
  console.log(`| ${m} | ${median(us).toFixed(2)}; ${Math.min(...us).toFixed(2)} | ${added} | ${median(rs.map((x) => x.minor)).toFixed(1)} / ${median(rs.map((x) => x.major)).toFixed(2)} |`);
}
console.log(`(${exportedBytes} bytes exported in all)`);
