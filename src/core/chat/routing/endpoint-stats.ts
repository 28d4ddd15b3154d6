/**
 * Live figures per catalog endpoint (docs/routing.md, "Throughput and latency"): what the generations this
 * process recorded say about an endpoint's speed over a recent window, for `provider.sort` = `throughput` /
 * `latency`, the `:nitro` suffix and `preferred_min_throughput` / `preferred_max_latency`.
 *
 * Fed by the record stage's generation records (the chat handler tees its recorder into `observe`), kept in
 * memory per process: at most `maxSamples` of the latest samples per endpoint, younger than `windowMs`.
 * Percentiles are computed on demand from the window and cached until the next sample, so a routed request
 * costs a map read; no database query per request.
 *
 * A sample is a successful generation served by its first attempt (a failed attempt before it would count
 * its wait against the endpoint that answered), with completion tokens:
 *   latency    = time to first token in seconds (streams: the first chunk; non-streamed answers: the answer,
 *                which is when their first token reaches Portico)
 *   throughput = completion tokens / seconds of generation (streams: from the first chunk to the end;
 *                non-streamed: the whole answer)
 */
import type { GenerationRecord } from "../seams.js";
import { PERCENTILES, type Percentiles } from "./preferences.js";

export interface EndpointFigures {
  /** Tokens per second. */
  throughput: Required<Percentiles>;
  /** Seconds to the first token. */
  latency: Required<Percentiles>;
  samples: number;
}

export interface EndpointStats {
  /** Takes one generation record (only successful, catalogued, first-attempt ones count). */
  observe(rec: Pick<GenerationRecord, "status" | "catalogModel" | "provider" | "attempts" | "latencyMs" | "timeToFirstTokenMs" | "completionTokens" | "streamed">): void;
  /** The endpoint's figures over the window; undefined without samples. */
  figures(catalogModel: string, provider: string): EndpointFigures | undefined;
  /** The window's length in milliseconds. */
  readonly windowMs: number;
}

interface Sample {
  at: number;
  latencyS: number;
  tps: number;
}

interface Series {
  samples: Sample[];
  next: number;
  cached?: EndpointFigures | undefined;
  cachedAt: number;
}

export const DEFAULT_STATS_WINDOW_MS = 15 * 60_000;
export const DEFAULT_STATS_SAMPLES = 256;

function percentile(sorted: number[], q: number): number {
  // Nearest rank.
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

function summary(values: number[]): Required<Percentiles> {
  const s = values.sort((a, b) => a - b);
  return { p50: percentile(s, 0.5), p75: percentile(s, 0.75), p90: percentile(s, 0.9), p99: percentile(s, 0.99) };
}

export function createEndpointStats(opts: { windowMs?: number; maxSamples?: number; now?: () => number } = {}): EndpointStats {
  const windowMs = opts.windowMs ?? DEFAULT_STATS_WINDOW_MS;
  const max = opts.maxSamples ?? DEFAULT_STATS_SAMPLES;
  const now = opts.now ?? Date.now;
  const series = new Map<string, Series>();
  const key = (model: string, provider: string) => `${model}\u0000${provider}`;
  return {
    windowMs,
    observe(rec) {
      if (rec.status !== "success" || rec.attempts !== 1 || !rec.catalogModel || !rec.provider) return;
      const tokens = rec.completionTokens;
      if (tokens === null || tokens <= 0 || !(rec.latencyMs > 0)) return;
      const ttft = rec.streamed && rec.timeToFirstTokenMs !== null ? rec.timeToFirstTokenMs : rec.latencyMs;
      const generating = rec.streamed && rec.timeToFirstTokenMs !== null ? rec.latencyMs - rec.timeToFirstTokenMs : rec.latencyMs;
      const sample: Sample = { at: now(), latencyS: ttft / 1000, tps: tokens / Math.max(generating, 1) * 1000 };
      const k = key(rec.catalogModel, rec.provider);
      let s = series.get(k);
      if (!s) series.set(k, (s = { samples: [], next: 0, cachedAt: 0 }));
      if (s.samples.length < max) s.samples.push(sample);
      else s.samples[s.next] = sample;
      s.next = (s.next + 1) % max;
      s.cached = undefined;
    },
    figures(model, provider) {
      const s = series.get(key(model, provider));
      if (!s) return undefined;
      const t = now();
      // The cache also expires as samples age out of the window.
      if (s.cached !== undefined && t - s.cachedAt < 1000) return s.cached;
      const live = s.samples.filter((x) => t - x.at <= windowMs);
      s.cached = live.length === 0 ? undefined : { latency: summary(live.map((x) => x.latencyS)), throughput: summary(live.map((x) => x.tps)), samples: live.length };
      s.cachedAt = t;
      return s.cached;
    },
  };
}

/** Whether `figures` meet every threshold given: throughput at least, latency at most. Undefined when there are no figures. */
export function meets(figures: EndpointFigures | undefined, minThroughput?: Percentiles, maxLatency?: Percentiles): boolean | undefined {
  if (!figures) return undefined;
  for (const p of PERCENTILES) {
    const t = minThroughput?.[p];
    if (t !== undefined && figures.throughput[p] < t) return false;
    const l = maxLatency?.[p];
    if (l !== undefined && figures.latency[p] > l) return false;
  }
  return true;
}
