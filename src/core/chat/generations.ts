/**
 * Generations: one row per chat-completions request, written off the request path. `record()` queues the
 * row and returns at once; a flush writes queued rows in one `createMany` every `flushMs` or as soon as
 * `batch` rows wait. The queue is bounded (`maxQueued`): past it, new rows are dropped and counted (a
 * database that cannot keep up must not grow the process without bound). `close()` flushes what is left.
 */
import type { Logger } from "pino";
import type { Db } from "../../db/client.js";
import type { GenerationRecord, GenerationRecorder } from "./seams.js";

export interface GenerationStore extends GenerationRecorder {
  /** Writes what is queued now (tests, shutdown). */
  flush(): Promise<void>;
  close(): Promise<void>;
  dropped(): number;
}

export function createGenerationStore(deps: { db: Db; logger: Logger; flushMs?: number; batch?: number; maxQueued?: number }): GenerationStore {
  const flushMs = deps.flushMs ?? 50;
  const batch = deps.batch ?? 200;
  const maxQueued = deps.maxQueued ?? 10_000;
  let queue: GenerationRecord[] = [];
  let dropped = 0;
  let timer: NodeJS.Timeout | undefined;
  let writing: Promise<void> = Promise.resolve();

  const write = async (rows: GenerationRecord[]): Promise<void> => {
    try {
      await deps.db.generation.createMany({
        data: rows.map((r) => ({
          id: r.id,
          organizationId: r.organizationId,
          workspaceId: r.workspaceId,
          keyHash: r.keyHash,
          requestedModel: r.requestedModel,
          model: r.model,
          provider: r.provider,
          credentialId: r.credentialId,
          credentialSource: r.credentialSource,
          presetSlug: r.presetSlug,
          presetVersion: r.presetVersion,
          streamed: r.streamed,
          promptTokens: r.promptTokens,
          completionTokens: r.completionTokens,
          totalTokens: r.totalTokens,
          latencyMs: Math.round(r.latencyMs),
          timeToFirstTokenMs: r.timeToFirstTokenMs === null ? null : Math.round(r.timeToFirstTokenMs),
          status: r.status,
          finishReason: r.finishReason,
          errorCode: r.errorCode,
          attempts: r.attempts,
          createdAt: r.createdAt,
        })),
      });
    } catch (err) {
      deps.logger.error({ err: { message: (err as Error).message }, rows: rows.length }, "could not record generations");
    }
  };

  const flush = (): Promise<void> => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (queue.length === 0) return writing;
    const rows = queue;
    queue = [];
    writing = writing.then(() => write(rows));
    return writing;
  };

  return {
    record(rec) {
      if (queue.length >= maxQueued) {
        if (dropped++ % 1000 === 0) deps.logger.warn({ dropped }, "generation queue full; records dropped");
        return;
      }
      queue.push(rec);
      if (queue.length >= batch) void flush();
      else timer ??= setTimeout(() => void flush(), flushMs);
    },
    flush,
    async close() {
      await flush();
    },
    dropped: () => dropped,
  };
}
