/** One chat request's three spans as Portico makes them, for the span benches (bench/otlp-encoder.ts, bench/span-processor.ts). */
import { ROOT_CONTEXT, SpanKind, trace, type Tracer } from "@opentelemetry/api";

const RPC_ATTRS = { "rpc.system": "connect_rpc", "rpc.service": "portico.chat.v1.ChatService", "rpc.method": "CreateChatCompletion" };
const RPC_START = { kind: SpanKind.SERVER, attributes: RPC_ATTRS };

/**
 * One request's spans, with the attributes Portico sets (src/lib/tracing.ts, src/core/tracing-interceptor.ts,
 * src/core/chat/pipeline/trace.ts). `rpcAttributesAtStart`: the RPC span's three attributes given to `startSpan`, as
 * Portico did before they were set after it (bench/trace-sdk-calls.ts compares both).
 */
export function chatRequestSpans(tracer: Tracer, i: number, rpcAttributesAtStart = false): void {
  const http = tracer.startSpan("POST /api/v1/chat/completions", { kind: SpanKind.SERVER }, ROOT_CONTEXT);
  http.setAttribute("http.request.method", "POST");
  http.setAttribute("http.route", "/api/v1/chat/completions");
  http.setAttribute("url.path", "/api/v1/chat/completions");
  const rpcParent = trace.setSpan(ROOT_CONTEXT, http);
  const rpc = rpcAttributesAtStart
    ? tracer.startSpan("portico.chat.v1.ChatService/CreateChatCompletion", RPC_START, rpcParent)
    : tracer.startSpan("portico.chat.v1.ChatService/CreateChatCompletion", { kind: SpanKind.SERVER }, rpcParent);
  if (!rpcAttributesAtStart) for (const k in RPC_ATTRS) rpc.setAttribute(k, RPC_ATTRS[k as keyof typeof RPC_ATTRS]);
  const attempt = tracer.startSpan("chat llama-3.3-70b", { kind: SpanKind.CLIENT }, trace.setSpan(ROOT_CONTEXT, rpc));
  attempt.setAttribute("gen_ai.operation.name", "chat");
  attempt.setAttribute("gen_ai.provider.name", "groq");
  attempt.setAttribute("gen_ai.request.model", "llama-3.3-70b");
  attempt.setAttribute("portico.attempt", 1);
  attempt.setAttribute("portico.credential_source", "byok");
  attempt.setAttribute("portico.credential_id", "cred-1");
  attempt.setAttribute("portico.catalog_model", "meta-llama/llama-3.3-70b-instruct");
  attempt.setAttribute("portico.attempt.outcome", "served");
  attempt.setAttribute("gen_ai.usage.input_tokens", 12);
  attempt.setAttribute("gen_ai.usage.output_tokens", 4);
  attempt.setAttribute("portico.cost.usd", 0.0000123 * (1 + (i % 7)));
  attempt.setAttribute("portico.cost.paid_by", "byok");
  attempt.setAttribute("gen_ai.response.finish_reasons", ["stop"]);
  attempt.setAttribute("gen_ai.response.model", "llama-3.3-70b");
  attempt.end();
  rpc.updateName("chat groq/llama-3.3-70b");
  rpc.setAttribute("gen_ai.operation.name", "chat");
  rpc.setAttribute("gen_ai.request.model", "groq/llama-3.3-70b");
  rpc.setAttribute("portico.generation_id", `gen-${String(i).padStart(20, "0")}`);
  rpc.setAttribute("portico.streamed", false);
  rpc.setAttribute("portico.attempts", 1);
  rpc.setAttribute("portico.status", "success");
  rpc.setAttribute("gen_ai.provider.name", "groq");
  rpc.end();
  http.setAttribute("http.response.status_code", 200);
  http.end();
}
