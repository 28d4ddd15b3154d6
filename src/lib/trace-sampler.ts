/**
 * The sampler of the SDK's tracer provider (its `sampler` option, a public extension point; tracing on only,
 * src/lib/tracing.ts): the decisions of the SDK's `AlwaysOnSampler`, `AlwaysOffSampler`, `TraceIdRatioBasedSampler`
 * and `ParentBasedSampler` (with its default delegates: a sampled parent, remote or local, is followed, an unsampled
 * one is not), made with no object per call: the SDK's samplers return a new `{ decision }` per span, and the
 * parent-based one reaches its decision through a second sampler's call. The ratio's own decision (a root span under
 * `traceidratio`) is the SDK's sampler's.
 */
import { TraceFlags, isSpanContextValid, trace, type Attributes, type Context, type Link, type SpanKind } from "@opentelemetry/api";
import { SamplingDecision, TraceIdRatioBasedSampler, type Sampler, type SamplingResult } from "@opentelemetry/sdk-trace-base";

const SAMPLED: SamplingResult = Object.freeze({ decision: SamplingDecision.RECORD_AND_SAMPLED });
const DROPPED: SamplingResult = Object.freeze({ decision: SamplingDecision.NOT_RECORD });

export class PorticoSampler implements Sampler {
  /** The root's decision when constant (ratio 1 or 0); undefined: the ratio sampler's. */
  private readonly constant: SamplingResult | undefined;
  private readonly ratio: TraceIdRatioBasedSampler | undefined;

  constructor(private readonly settings: { parentBased: boolean; ratio: number }) {
    if (settings.ratio >= 1) this.constant = SAMPLED;
    else if (settings.ratio <= 0) this.constant = DROPPED;
    else this.ratio = new TraceIdRatioBasedSampler(settings.ratio);
  }

  shouldSample(context: Context, traceId: string, spanName: string, spanKind: SpanKind, attributes: Attributes, links: Link[]): SamplingResult {
    if (this.settings.parentBased) {
      const parent = trace.getSpanContext(context);
      if (parent !== undefined && isSpanContextValid(parent)) return (parent.traceFlags & TraceFlags.SAMPLED) !== 0 ? SAMPLED : DROPPED;
    }
    return this.constant ?? this.ratio!.shouldSample(context, traceId);
  }

  toString(): string {
    const root = this.constant === SAMPLED ? "AlwaysOnSampler" : this.constant === DROPPED ? "AlwaysOffSampler" : this.ratio!.toString();
    return this.settings.parentBased ? `ParentBased{root=${root}, remoteParentSampled=AlwaysOnSampler, remoteParentNotSampled=AlwaysOffSampler, localParentSampled=AlwaysOnSampler, localParentNotSampled=AlwaysOffSampler}` : root;
  }
}
