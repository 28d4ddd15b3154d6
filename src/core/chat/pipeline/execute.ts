/**
 * Stage "execute": the attempt loop. Calls the planned attempts in order until one answers; an upstream error
 * before the first byte (401/403/408/429/5xx, connect error) moves on to the next attempt, a non-retryable one
 * ends the loop. Streams: the outcome begins with the first event of the attempt that answered; an error after
 * it ends the stream with a `finish_reason: "error"` chunk carrying the error. Answers carry the generation id
 * as `id` and the provider that served them.
 */
import type { Logger } from "pino";
import { Reason, serviceError } from "../../errors.js";
import type { StreamEvent } from "../model.js";
import { UpstreamError, type ChatChunk } from "../providers/index.js";
import type { Attempt, ChatCall, ChatOutcome, ChatStage, Tracking } from "./stage.js";

export function createExecuteStage(deps: { logger: Logger }): ChatStage {
  const log = deps.logger;

  const failedAttempt = (a: Attempt, err: UpstreamError) =>
    log.info({ provider: a.provider, model: a.requestedModel, status: err.status }, "upstream attempt failed");

  async function complete(call: ChatCall): Promise<ChatOutcome> {
    const { track } = call;
    let last: unknown;
    for (const a of call.attempts) {
      track.attempts++;
      try {
        const completion = await a.adapter.complete(a.call);
        served(track, a);
        track.usage = completion.usage ?? null;
        track.finishReason = completion.choices[0]?.finish_reason ?? null;
        track.status = "success";
        return { kind: "completion", completion: { ...completion, id: track.id, provider: a.provider } };
      } catch (err) {
        if (!(err instanceof UpstreamError)) throw err;
        last = err;
        failedAttempt(a, err);
        if (!err.retryable) break;
      }
    }
    throw exhausted(last);
  }

  async function stream(call: ChatCall): Promise<ChatOutcome> {
    const { track } = call;
    let last: unknown;
    for (const a of call.attempts) {
      track.attempts++;
      const iterator = a.adapter.stream(a.call)[Symbol.asyncIterator]();
      let first: IteratorResult<ChatChunk>;
      try {
        first = await iterator.next();
      } catch (err) {
        if (!(err instanceof UpstreamError)) throw err;
        last = err;
        failedAttempt(a, err);
        if (!err.retryable) break;
        continue;
      }
      served(track, a);
      track.timeToFirstTokenMs = performance.now() - track.start;
      return { kind: "stream", events: relay(call, a, iterator, first) };
    }
    throw exhausted(last);
  }

  /** The served attempt's events, stamped with the generation id and provider (one shallow copy each). */
  async function* relay(call: ChatCall, a: Attempt, iterator: AsyncIterator<ChatChunk>, first: IteratorResult<ChatChunk>): AsyncGenerator<StreamEvent> {
    const { track } = call;
    const meta = { id: track.id, created: Math.floor(Date.now() / 1000), model: a.requestedModel };
    try {
      if (isEcho(call.request)) {
        yield { ...meta, object: "chat.completion.chunk", provider: a.provider, choices: [], debug: { echo_upstream_body: a.adapter.upstreamBody(a.call) } };
      }
      if (first.done) return;
      observe(track, first.value);
      yield { ...first.value, id: track.id, provider: a.provider };
      for (;;) {
        let next: IteratorResult<ChatChunk>;
        try {
          next = await iterator.next();
        } catch (err) {
          if (call.signal.aborted) throw err;
          const status = err instanceof UpstreamError && err.status > 0 ? err.status : 502;
          const message = err instanceof UpstreamError ? err.message : "The provider's stream broke";
          log.info({ provider: a.provider, model: a.requestedModel, status }, "upstream stream failed after its first chunk");
          track.status = "error";
          track.errorCode = status;
          track.finishReason = "error";
          yield {
            ...meta,
            object: "chat.completion.chunk",
            provider: a.provider,
            choices: [{ index: 0, delta: {}, finish_reason: "error", native_finish_reason: null }],
            error: { code: status, message },
          };
          return;
        }
        if (next.done) return;
        observe(track, next.value);
        yield { ...next.value, id: track.id, provider: a.provider };
      }
    } finally {
      await iterator.return?.();
    }
  }

  return {
    name: "execute",
    run: (call) => (call.streamed ? stream(call) : complete(call)),
  };
}

function exhausted(last: unknown) {
  return serviceError(Reason.UPSTREAM_FAILED, `Every provider attempt failed; the last: ${last instanceof UpstreamError ? last.message : "provider unreachable"}`, {
    retryable: last instanceof UpstreamError ? last.retryable : true,
  });
}

function served(track: Tracking, a: Attempt): void {
  track.provider = a.provider;
  track.model = a.requestedModel;
  track.credentialId = a.credentialId;
  track.credentialSource = a.credentialSource;
}

function observe(track: Tracking, chunk: ChatChunk): void {
  if (chunk.usage) track.usage = chunk.usage;
  const finish = chunk.choices[0]?.finish_reason;
  if (finish) track.finishReason = finish;
}

function isEcho(body: Readonly<Record<string, unknown>>): boolean {
  const debug = body.debug;
  return typeof debug === "object" && debug !== null && (debug as Record<string, unknown>).echo_upstream_body === true;
}
