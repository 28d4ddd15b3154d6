/**
 * Trace and span ids for the SDK's tracer provider (its `idGenerator` option; tracing on only, src/lib/tracing.ts):
 * slices of one hex string made from 4 KiB of `randomFillSync` bytes at a time, in place of the SDK's
 * `RandomIdGenerator` (four `Math.random` calls into a shared buffer and a `toString("hex")` call per id). Ids are
 * lowercase hex of 16 (span) or 32 (trace) characters, never all zeros (invalid in W3C trace context).
 */
import { randomFillSync } from "node:crypto";
import type { IdGenerator } from "@opentelemetry/sdk-trace-base";

const POOL_BYTES = 4096;
const ZERO_SPAN_ID = "0".repeat(16);
const ZERO_TRACE_ID = "0".repeat(32);

export class PooledIdGenerator implements IdGenerator {
  private readonly bytes = Buffer.allocUnsafe(POOL_BYTES);
  private hex = "";
  private at = 0;

  private take(chars: number): string {
    if (this.at + chars > this.hex.length) {
      randomFillSync(this.bytes);
      this.hex = this.bytes.toString("hex");
      this.at = 0;
    }
    const id = this.hex.slice(this.at, this.at + chars);
    this.at += chars;
    return id;
  }

  generateTraceId(): string {
    let id = this.take(32);
    while (id === ZERO_TRACE_ID) id = this.take(32);
    return id;
  }

  generateSpanId(): string {
    let id = this.take(16);
    while (id === ZERO_SPAN_ID) id = this.take(16);
    return id;
  }
}
