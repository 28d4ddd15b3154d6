/**
 * The span processor of the http/protobuf exporter (src/lib/tracing.ts, tracing on): the SDK's BatchSpanProcessor's
 * behaviour (batches of `maxExportBatchSize` spans, a batch going at the latest `scheduledDelayMillis` after its first
 * span, at most `maxQueueSize` spans waiting, one export at a time, sampled spans only), except that each span is
 * encoded to its OTLP/protobuf bytes when it ends (src/lib/otlp-trace-encoder.ts `EncodedSpans`) and only those bytes
 * wait for the export. The SDK's processor holds the span objects themselves until their batch goes (up to 512 spans,
 * ~170 requests), long enough for the young generation's collections to copy them and then promote them to the old
 * generation; here a span dies with its request (bench/README.md, "Tracing cost: spans encoded as they end").
 */
import { diag } from "@opentelemetry/api";
import type { ReadableSpan, SpanExporter, SpanProcessor } from "@opentelemetry/sdk-trace-base";
import { EncodedSpans } from "./otlp-trace-encoder.js";

/** A batch of encoded spans as the exporter takes it (what the SDK's export delegate calls its internal representation). */
export interface EncodedBatch {
  /** One OTLP `ExportTraceServiceRequest`. */
  bytes: Uint8Array;
  /** How many spans it holds. */
  count: number;
}

export interface EncodedBatchExporter {
  export(batch: EncodedBatch, done: (result: ExportResult) => void): void;
  shutdown(): Promise<void>;
}

export interface EncodingProcessorOptions {
  maxExportBatchSize: number;
  maxQueueSize: number;
  scheduledDelayMillis: number;
}

/** What an export ends with (`@opentelemetry/core`'s ExportResult: code 0 success, 1 failure). */
type ExportResult = Parameters<Parameters<SpanExporter["export"]>[1]>[0];

/** W3C trace flags' "sampled" bit. */
const SAMPLED = 1;
const SUCCESS = 0;
const FAILED = 1;

export class EncodingSpanProcessor implements SpanProcessor {
  private current = new EncodedSpans();
  /** Sealed batches, oldest first, waiting for their export. */
  private readonly ready: EncodedSpans[] = [];
  /** Spans encoded and not yet exported (the current batch's, the ready ones' and the one being exported). */
  private queued = 0;
  private dropped = 0;
  private exporting = false;
  private timer: NodeJS.Timeout | undefined;
  private idle: Array<() => void> = [];
  private shutdownPromise: Promise<void> | undefined;
  private readonly batchSize: number;

  constructor(
    private readonly exporter: EncodedBatchExporter,
    private readonly opts: EncodingProcessorOptions,
  ) {
    this.batchSize = Math.min(opts.maxExportBatchSize, opts.maxQueueSize);
  }

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if (this.shutdownPromise || (span.spanContext().traceFlags & SAMPLED) === 0) return;
    if (this.queued >= this.opts.maxQueueSize) {
      if (this.dropped++ === 0) diag.debug("maxQueueSize reached, dropping spans");
      return;
    }
    if (this.dropped > 0) {
      diag.warn(`Dropped ${this.dropped} spans because maxQueueSize reached`);
      this.dropped = 0;
    }
    this.current.add(span);
    this.queued++;
    if (this.current.count >= this.batchSize) {
      this.seal();
      this.drain();
    } else this.timer ??= setTimeout(() => this.flushCurrent(), this.opts.scheduledDelayMillis).unref();
  }

  /** Exports every span ended so far; resolves once they are all gone (exported or failed). */
  forceFlush(): Promise<void> {
    this.seal();
    if (!this.exporting && this.ready.length === 0) return Promise.resolve();
    const done = new Promise<void>((resolve) => this.idle.push(resolve));
    this.drain();
    return done;
  }

  shutdown(): Promise<void> {
    this.shutdownPromise ??= this.forceFlush().then(() => this.exporter.shutdown());
    return this.shutdownPromise;
  }

  private flushCurrent(): void {
    this.timer = undefined;
    this.seal();
    this.drain();
  }

  /** The current batch, if it holds any span, goes to the ready queue. */
  private seal(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.current.count === 0) return;
    this.ready.push(this.current);
    this.current = new EncodedSpans();
  }

  /** Exports the oldest ready batch unless one is being exported; each export's end starts the next. */
  private drain(): void {
    if (this.exporting) return;
    const batch = this.ready.shift();
    if (!batch) {
      for (const resolve of this.idle.splice(0)) resolve();
      return;
    }
    this.exporting = true;
    const finished = (result: ExportResult) => {
      this.exporting = false;
      this.queued -= batch.count;
      if (result.code !== SUCCESS) diag.error("span export failed", result.error);
      this.drain();
    };
    const go = () => {
      try {
        this.exporter.export({ bytes: batch.bytes(), count: batch.count }, finished);
      } catch (err) {
        finished({ code: FAILED, error: err as Error });
      }
    };
    const pending = batch.pendingResources();
    if (pending.length === 0) go();
    else Promise.all(pending.map((r) => r.waitForAsyncAttributes?.())).then(go, (err: unknown) => finished({ code: FAILED, error: err as Error }));
  }
}
