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
import { ROOT_CONTEXT, SpanKind, trace, type Tracer } from "@opentelemetry/api";
import { AlwaysOffSampler, AlwaysOnSampler, BasicTracerProvider, ParentBasedSampler, type Sampler } from "@opentelemetry/sdk-trace-base";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { PooledIdGenerator } from "../src/lib/trace-ids.js";
import { flag } from "./lib/args.js";

const requests = Number(flag("requests") ?? 20000);
const rounds = Number(flag("rounds") ?? 15);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const load = () => loadavg().map((l) => l.toFixed(2)).join(" ");
const resource = resourceFromAttributes({ "service.name": "portico", "service.instance.id": "bench-1" });
const noop = { onStart() {}, onEnd() {}, forceFlush: async () => undefined, shutdown: async () => undefined };
const tracerWith = (sampler: Sampler): Tracer =>
  new BasicTracerProvider({ resource, sampler, idGenerator: new PooledIdGenerator(), spanProcessors: [noop] }).getTracer("portico");

const RPC_ATTRS = { "rpc.system": "connect_rpc", "rpc.service": "portico.chat.v1.ChatService", "rpc.method": "CreateChatCompletion" };
const RPC_START = { kind: SpanKind.SERVER, attributes: RPC_ATTRS };
const SERVER = { kind: SpanKind.SERVER };
const CLIENT = { kind: SpanKind.CLIENT };

function spans(t: Tracer, i: number, rpcAttributesAtStart: boolean): void {
  const http = t.startSpan("POST /api/v1/chat/completions", SERVER, ROOT_CONTEXT);
  http.setAttribute("http.request.method", "POST");
  http.setAttribute("http.route", "/api/v1/chat/completions");
  http.setAttribute("url.path", "/api/v1/chat/completions");
  let rpc;
  if (rpcAttributesAtStart) rpc = t.startSpan("portico.chat.v1.ChatService/CreateChatCompletion", RPC_START, trace.setSpan(ROOT_CONTEXT, http));
  else {
    rpc = t.startSpan("portico.chat.v1.ChatService/CreateChatCompletion", SERVER, trace.setSpan(ROOT_CONTEXT, http));
    for (const k in RPC_ATTRS) rpc.setAttribute(k, RPC_ATTRS[k as keyof typeof RPC_ATTRS]);
  }
  const attempt = t.startSpan("chat llama-3.3-70b", CLIENT, trace.setSpan(ROOT_CONTEXT, rpc));
  attempt.setAttribute("gen_ai.operation.name", "chat");
  attempt.setAttribute("gen_ai.provider.name", "groq");
  attempt.setAttribute("gen_ai.request.model", "llama-3.3-70b");
  attempt.setAttribute("portico.attempt", 1);
  attempt.setAttribute("portico.credential_source", "byok");
  attempt.setAttribute("portico.credential_id", "cred-1");
  attempt.setAttribute("portico.attempt.outcome", "served");
  attempt.setAttribute("gen_ai.usage.input_tokens", 12);
  attempt.setAttribute("gen_ai.usage.output_tokens", 4);
  attempt.setAttribute("portico.cost.usd", 0.0000123 * (1 + (i % 7)));
  attempt.end();
  rpc.setAttribute("gen_ai.operation.name", "chat");
  rpc.setAttribute("portico.generation_id", `gen-${i}`);
  rpc.setAttribute("portico.attempts", 1);
  rpc.setAttribute("portico.status", "success");
  rpc.end();
  http.setAttribute("http.response.status_code", 200);
  http.end();
}

const sdkSampler = tracerWith(new ParentBasedSampler({ root: new AlwaysOnSampler() }));
const notSampled = tracerWith(new ParentBasedSampler({ root: new AlwaysOffSampler() }));
const variants: Array<[string, (i: number) => void]> = [
  ["SDK sampler, RPC attributes at start (main)", (i) => spans(sdkSampler, i, true)],
  ["SDK sampler, RPC attributes set after start", (i) => spans(sdkSampler, i, false)],
  ["nothing sampled (non-recording spans: the calls without the SDK's span work)", (i) => spans(notSampled, i, false)],
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
