/**
 * The per-provider and per-model Prometheus series (src/lib/metrics.ts, docs/operations.md "Metrics"), fed by
 * each request's generation record as it is queued: nothing is measured twice, and every dialect (chat
 * completions, messages, responses, embeddings) counts the same way.
 */
import type { Metrics } from "../../lib/metrics.js";
import type { GenerationRecord, GenerationRecorder } from "./seams.js";

const FEMTOS_PER_USD = 1e15;

/** `recorder`, also counting each record in `metrics`. */
export function withGenerationMetrics(recorder: GenerationRecorder, metrics: Metrics): GenerationRecorder {
  const m = metrics.generation;
  return {
    record(rec: GenerationRecord) {
      try {
        const provider = rec.provider ?? "none";
        const model = rec.catalogModel ?? (rec.provider === null ? "none" : "uncatalogued");
        m.total.inc({ provider, model, status: rec.status });
        if (rec.status === "error") m.errors.inc({ provider, model, code: String(rec.errorCode ?? 500) });
        if (rec.failedAttempts) for (const f of rec.failedAttempts) m.attemptFailures.inc({ provider: f.provider, model: f.catalogModel ?? "uncatalogued", reason: f.reason });
        m.duration.observe({ provider, model }, rec.latencyMs / 1000);
        if (rec.timeToFirstTokenMs !== null) m.timeToFirstToken.observe({ provider, model }, rec.timeToFirstTokenMs / 1000);
        if (rec.cacheHit) m.cacheHits.inc({ provider, model });
        else {
          // A cached answer's usage was the provider's once, not again.
          if (rec.promptTokens) m.tokens.inc({ provider, model, kind: "input" }, rec.promptTokens);
          if (rec.completionTokens) m.tokens.inc({ provider, model, kind: "output" }, rec.completionTokens);
        }
        if (rec.upstreamCostFemtoUsd && !rec.cacheHit) {
          const paidBy = rec.credentialSource === "byok" ? "byok" : "platform";
          m.cost.inc({ provider, model, paid_by: paidBy }, Number(rec.upstreamCostFemtoUsd) / FEMTOS_PER_USD);
        }
      } finally {
        recorder.record(rec);
      }
    },
  };
}
