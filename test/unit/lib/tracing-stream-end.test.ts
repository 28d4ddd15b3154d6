/**
 * The spans of a streamed answer end however the stream ends (issue 29): the core's tracing interceptor's RPC span
 * and the trace stage's request and served-attempt spans, when the consumer stops reading (a client that went away)
 * and when the stream fails after its first event; and the interceptor's span of a failed unary call. Spans go to an
 * in-memory exporter (tracing.test.ts checks the exported trees of whole requests).
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { SpanStatusCode, trace } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createTracingInterceptor } from "../../../src/core/tracing-interceptor.js";
import { createTraceStage, attemptSpan } from "../../../src/core/chat/pipeline/trace.js";
import { newCall, type Attempt } from "../../../src/core/chat/pipeline/stage.js";
import { requestSpan } from "../../../src/lib/tracing.js";
import type { StreamEvent } from "../../../src/core/chat/model.js";

const exporter = new InMemorySpanExporter();
const ended = () => exporter.getFinishedSpans();

beforeAll(() => {
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
});
afterAll(() => trace.disable());
beforeEach(() => exporter.reset());

/** A source of `n` events that fails after them when `fail` is given; `closed` says whether its `finally` ran. */
function source(n: number, fail?: Error) {
  const state = { closed: false };
  async function* events(): AsyncGenerator<StreamEvent> {
    try {
      for (let i = 0; i < n; i++) yield { model: "served-model", choices: [] } as unknown as StreamEvent;
      if (fail) throw fail;
    } finally {
      state.closed = true;
    }
  }
  return { events: events(), state };
}

/** Runs the interceptor on a server-streaming call whose handler answers `message`. */
async function interceptStream(message: AsyncIterable<unknown>, signal = new AbortController().signal) {
  const run = createTracingInterceptor()((async () => ({ stream: true, message, header: new Headers(), trailer: new Headers() })) as never);
  const res = (await run({ header: new Headers(), contextValues: undefined, signal, service: { typeName: "portico.test.v1.Test" }, method: { name: "Stream", methodKind: "server_streaming" } } as never)) as unknown as { message: AsyncIterable<unknown> };
  return res.message;
}

describe("the core's tracing interceptor", () => {
  it("a stream its consumer stops reading: the source is closed and the span ends, not in error", async () => {
    const src = source(5);
    for await (const _ of await interceptStream(src.events)) break;
    expect(src.state.closed).toBe(true);
    expect(ended().map((s) => s.name)).toEqual(["portico.test.v1.Test/Stream"]);
    expect(ended()[0]!.status.code).toBe(SpanStatusCode.UNSET);
  });

  it("a stream failing after its first event: the span ends in error with the Connect code, the error goes on", async () => {
    const src = source(1, new ConnectError("boom", Code.Unavailable));
    const seen: unknown[] = [];
    await expect(
      (async () => {
        for await (const m of await interceptStream(src.events)) seen.push(m);
      })(),
    ).rejects.toThrow("boom");
    expect(seen).toHaveLength(1);
    const [span] = ended();
    expect(span!.status).toEqual({ code: SpanStatusCode.ERROR, message: "unavailable" });
    expect(span!.attributes["rpc.connect_rpc.error_code"]).toBe("unavailable");
  });

  it("a unary call that fails: the span ends in error and the call rejects with the same error", async () => {
    const err = new ConnectError("no", Code.PermissionDenied);
    const run = createTracingInterceptor()((async () => Promise.reject(err)) as never);
    await expect(run({ header: new Headers(), contextValues: undefined, signal: new AbortController().signal, service: { typeName: "portico.test.v1.Test" }, method: { name: "Call", methodKind: "unary" } } as never)).rejects.toBe(err);
    expect(ended().map((s) => [s.name, s.status.code])).toEqual([["portico.test.v1.Test/Call", SpanStatusCode.ERROR]]);
  });
});

/** A traced chat call (its RPC span filed by the interceptor) run through the trace stage with one served attempt streaming `events`. */
async function traceStream(events: AsyncIterable<StreamEvent>, signal: AbortSignal) {
  const interceptor = createTracingInterceptor()((async () => {
    const call = newCall({} as never, signal, true, { model: "asked-model", messages: [] } as never);
    call.track.requestedModel = "asked-model";
    expect(requestSpan(signal)).toBeDefined();
    const outcome = await createTraceStage().run(call, async () => {
      attemptSpan(call, { call: { model: "asked-model" }, provider: "groq", credentialSource: "platform", credentialId: "c1" } as unknown as Attempt, 1)!.served();
      return { kind: "stream", events };
    });
    if (outcome.kind !== "stream") throw new Error("expected a stream");
    return { stream: true, message: outcome.events, header: new Headers(), trailer: new Headers() };
  }) as never);
  const res = (await interceptor({ header: new Headers(), contextValues: undefined, signal, service: { typeName: "portico.chat.v1.Chat" }, method: { name: "Stream", methodKind: "server_streaming" } } as never)) as unknown as { message: AsyncIterable<unknown> };
  return res.message;
}

describe("the trace stage's spans", () => {
  it("a stream the client stops reading: the served attempt's span and the request's end", async () => {
    const src = source(5);
    const ac = new AbortController();
    for await (const _ of await traceStream(src.events, ac.signal)) {
      ac.abort();
      break;
    }
    expect(src.state.closed).toBe(true);
    const names = ended().map((s) => [s.name, s.kind]);
    expect(names).toEqual([
      ["chat asked-model", 2], // the attempt (CLIENT), ended by the stage
      ["chat asked-model", 1], // the request (the RPC's SERVER span, renamed), ended by the interceptor
    ]);
    const [attempt, request] = ended();
    expect(attempt!.attributes["gen_ai.response.model"]).toBe("served-model");
    expect(request!.attributes["gen_ai.operation.name"]).toBe("chat");
    expect(request!.status.code).toBe(SpanStatusCode.UNSET);
  });

  it("a stream failing after its first event: both spans end, the request's in error", async () => {
    const src = source(1, new ConnectError("broke", Code.Internal));
    await expect(
      (async () => {
        for await (const _ of await traceStream(src.events, new AbortController().signal));
      })(),
    ).rejects.toThrow("broke");
    const [attempt, request] = ended();
    expect(attempt!.kind).toBe(2);
    expect(request!.name).toBe("chat asked-model");
    expect(request!.status.code).toBe(SpanStatusCode.ERROR);
    expect(request!.attributes["error.type"]).toBeDefined();
  });
});
