import { ROOT_CONTEXT, SpanKind } from "@opentelemetry/api";
import { BasicTracerProvider, BatchSpanProcessor, RandomIdGenerator, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { randomFillSync } from "node:crypto";
const nullExp: SpanExporter = { export: (s, d) => d({ code: 0 }), shutdown: async () => undefined };
class PooledIds {
  private pool = Buffer.allocUnsafe(4096);
  private at = 4096;
  private take(n: number): string {
    if (this.at + n > this.pool.length) { randomFillSync(this.pool); this.at = 0; }
    const s = this.pool.toString("hex", this.at, this.at + n);
    this.at += n;
    return s;
  }
  generateTraceId = () => this.take(16);
  generateSpanId = () => this.take(8);
}
const mk = (ids?: object) => new BasicTracerProvider({ ...(ids ? { idGenerator: ids as never } : {}), spanProcessors: [new BatchSpanProcessor(nullExp, { maxExportBatchSize: 512, maxQueueSize: 2048 })] }).getTracer("portico");
const cpu = () => { const u = process.cpuUsage(); return u.user + u.system; };
const N = 200000;
const variants: Record<string, () => void> = {};
const t1 = mk(), t2 = mk(new PooledIds());
variants["options attrs (3)"] = () => { const s = t1.startSpan("x", { kind: SpanKind.SERVER, attributes: { "rpc.system": "connect_rpc", "rpc.service": "portico.chat.v1.ChatService", "rpc.method": "CreateChatCompletion" } }, ROOT_CONTEXT); s.end(); };
variants["setAttribute (3)"] = () => { const s = t1.startSpan("x", { kind: SpanKind.SERVER }, ROOT_CONTEXT); s.setAttribute("rpc.system", "connect_rpc"); s.setAttribute("rpc.service", "portico.chat.v1.ChatService"); s.setAttribute("rpc.method", "CreateChatCompletion"); s.end(); };
variants["no attrs"] = () => { const s = t1.startSpan("x", { kind: SpanKind.SERVER }, ROOT_CONTEXT); s.end(); };
variants["no attrs, pooled ids"] = () => { const s = t2.startSpan("x", { kind: SpanKind.SERVER }, ROOT_CONTEXT); s.end(); };
const sdkIds = new RandomIdGenerator(); const pooled = new PooledIds();
variants["ids: sdk trace+span"] = () => { sdkIds.generateTraceId(); sdkIds.generateSpanId(); };
variants["ids: pooled trace+span"] = () => { pooled.generateTraceId(); pooled.generateSpanId(); };
const res: Record<string, number[]> = {};
for (let r = 0; r < 5; r++) for (const [k, f] of Object.entries(variants)) { const t = cpu(); for (let i = 0; i < N; i++) f(); (res[k] ??= []).push((cpu() - t) / N); }
for (const [k, v] of Object.entries(res)) console.log(k.padEnd(28), v.slice(1).sort((a, b) => a - b).map((x) => x.toFixed(3)).join(" "), "µs");
process.exit(0);
