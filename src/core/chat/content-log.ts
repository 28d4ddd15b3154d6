/**
 * Content logging (docs/operations.md, "Content logging"): per workspace, off by default. When the caller's
 * workspace sets `content_log_retention_days`, the request body (as validated) and the answer (the non-streamed
 * response, or the assembled stream) of each chat request are kept in `GenerationContent`, sealed with the BYOK
 * keyring (AES-256-GCM, keyring.ts; the associated data binds the generation id and organization, so a row
 * cannot be moved to another generation or organization and still open).
 *
 * Never provider keys: before sealing, every field named like a credential (Authorization, api_key, …) is
 * removed, every key an attempt of the request used (BYOK or shared) is replaced by `[redacted]` in every form
 * JSON text can hold it (providers/http.ts `keyScrubber`), and so is anything shaped like a well-known provider
 * key (`sk-…`, `sk-ant-…`, `AIza…`).
 *
 * Off the request path: `record()` queues and returns; a flush (next turn of the event loop) seals and writes.
 * A write that fails is logged and dropped, never surfaced to the caller; the queue is bounded (`maxQueued`).
 *
 * Retention: each row carries `expiresAt` (its time + the workspace's retention when written); `sweep()` deletes
 * at most `batch` expired rows, and rows of deleted workspaces, per run. The core runs it every
 * {@link CONTENT_SWEEP_INTERVAL_MS}. Deleting a workspace deletes its rows in the same transaction.
 */
import type { Logger } from "pino";
import type { Db } from "../../db/client.js";
import { SealOpenError, type Keyring } from "../byok/keyring.js";
import { keyScrubber } from "./providers/http.js";

/** How often the core sweeps expired content (ms). */
export const CONTENT_SWEEP_INTERVAL_MS = 10 * 60_000;
/** Rows the sweep deletes at most per run (and per kind: expired, of deleted workspaces). */
export const CONTENT_SWEEP_BATCH = 1_000;
const DAY_MS = 86_400_000;

export interface ContentEntry {
  id: string;
  organizationId: string;
  workspaceId: string;
  retentionDays: number;
  request: unknown;
  /** The answer, `{error}` for a failure, or null when it never completed. */
  response: unknown;
  /** The provider keys the request's attempts used: scrubbed from both bodies. */
  keys: readonly string[];
}

export interface StoredContent {
  id: string;
  request: unknown;
  response: unknown;
  createdAt: Date;
  expiresAt: Date;
}

export interface ContentLog {
  record(entry: ContentEntry): void;
  /** Writes what is queued now (tests, reads, shutdown). */
  flush(): Promise<void>;
  /** The decrypted bodies of a generation of `organizationId`; null when none are kept. */
  read(id: string, organizationId: string): Promise<StoredContent | null>;
  /** Deletes up to `batch` expired rows and up to `batch` rows of deleted workspaces; returns how many. */
  sweep(batch?: number): Promise<number>;
  close(): Promise<void>;
}

/** Length-prefixed, so no two different bindings produce the same bytes. */
export function contentAad(id: string, organizationId: string): Buffer {
  const out: Buffer[] = [];
  for (const p of ["portico.content-log", id, organizationId]) {
    const b = Buffer.from(p, "utf8");
    const len = Buffer.alloc(4);
    len.writeUInt32BE(b.length);
    out.push(len, b);
  }
  return Buffer.concat(out);
}

/** Field names whose values are credentials: removed wherever they appear in a body. */
const SECRET_FIELD = /^(authorization|proxy-authorization|x-api-key|api[-_]?key|apikey|x-goog-api-key|cookie|set-cookie|access[-_]?token|client[-_]?secret|password|secret)$/i;
/** Well-known provider key shapes (OpenAI/Anthropic/OpenRouter `sk-…`, Google `AIza…`, Groq `gsk_…`, xAI `xai-…`). */
const KEY_SHAPES = /\b(?:sk-[A-Za-z0-9_-]{20,}|gsk_[A-Za-z0-9]{20,}|xai-[A-Za-z0-9]{20,}|AIza[0-9A-Za-z_-]{35})/g;

function dropSecretFields(v: unknown, depth = 0): unknown {
  if (depth > 64 || v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) return v.map((x) => dropSecretFields(x, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (SECRET_FIELD.test(k)) continue;
    out[k] = dropSecretFields(x, depth + 1);
  }
  return out;
}

/** The JSON text to seal: credential fields dropped, the request's provider keys and key-shaped strings redacted. */
export function scrubbedJson(value: unknown, keys: readonly string[]): string {
  let text = JSON.stringify(dropSecretFields(value)) ?? "null";
  for (const key of keys) {
    const scrub = keyScrubber(key);
    if (scrub) text = scrub(text);
  }
  return text.replace(KEY_SHAPES, "[redacted]");
}

export function createContentLog(opts: {
  db: Db;
  keyring: Keyring;
  logger: Logger;
  /** The clock (tests); default Date.now. */
  now?: () => number;
  maxQueued?: number;
}): ContentLog {
  const { db, keyring } = opts;
  const log = opts.logger.child({ component: "content-log" });
  const now = opts.now ?? Date.now;
  const maxQueued = opts.maxQueued ?? 10_000;
  let queue: Array<ContentEntry & { at: number }> = [];
  let writing: Promise<void> | null = null;
  let scheduled = false;
  let lastDropLog = 0;

  async function writeAll(): Promise<void> {
    while (queue.length > 0) {
      const rows = queue;
      queue = [];
      for (const e of rows) {
        try {
          const plain = Buffer.from(
            `{"request":${scrubbedJson(e.request, e.keys)},"response":${scrubbedJson(e.response, e.keys)}}`,
            "utf8",
          );
          const { keyId, blob } = keyring.seal(plain, contentAad(e.id, e.organizationId));
          plain.fill(0);
          await db.generationContent.create({
            data: {
              id: e.id,
              organizationId: e.organizationId,
              workspaceId: e.workspaceId,
              keyId,
              ciphertext: new Uint8Array(blob),
              createdAt: new Date(e.at),
              expiresAt: new Date(e.at + e.retentionDays * DAY_MS),
            },
          });
        } catch (err) {
          // Never surfaced: the answer was already given. No body, no key in the log line.
          log.warn({ generation_id: e.id, err: (err as Error).name, message: (err as Error).message?.slice(0, 200) }, "a generation's content could not be stored");
        }
      }
    }
  }

  function flush(): Promise<void> {
    if (!writing) {
      writing = writeAll().finally(() => {
        writing = null;
      });
      return writing;
    }
    // A write is under way: wait for it, then write what came meanwhile.
    return writing.then(() => (queue.length > 0 ? flush() : undefined));
  }

  return {
    record(entry) {
      if (queue.length >= maxQueued) {
        if (now() - lastDropLog > 1000) {
          lastDropLog = now();
          log.warn({ queued: queue.length }, "content log queue full; a generation's content was dropped");
        }
        return;
      }
      queue.push({ ...entry, at: now() });
      if (!scheduled) {
        scheduled = true;
        setImmediate(() => {
          scheduled = false;
          void flush();
        });
      }
    },
    flush,
    async read(id, organizationId) {
      await flush();
      const row = await db.generationContent.findFirst({ where: { id, organizationId } });
      if (!row || row.expiresAt.getTime() <= now()) return null;
      let plain: Buffer;
      try {
        plain = keyring.open(row.keyId, row.ciphertext, contentAad(row.id, row.organizationId));
      } catch (err) {
        if (err instanceof SealOpenError) {
          log.warn({ generation_id: id, failure: err.failure }, "a generation's stored content cannot be opened");
          return null;
        }
        throw err;
      }
      const body = JSON.parse(plain.toString("utf8")) as { request: unknown; response: unknown };
      return { id: row.id, request: body.request, response: body.response, createdAt: row.createdAt, expiresAt: row.expiresAt };
    },
    async sweep(batch = CONTENT_SWEEP_BATCH) {
      const expired = await db.generationContent.findMany({ where: { expiresAt: { lte: new Date(now()) } }, select: { id: true }, take: batch });
      let n = 0;
      if (expired.length > 0) n += (await db.generationContent.deleteMany({ where: { id: { in: expired.map((r) => r.id) } } })).count;
      // A row written just after its workspace was deleted (it was queued then).
      const orphans = await db.$queryRaw<Array<{ id: string }>>`
        SELECT c."id" AS "id" FROM "GenerationContent" c JOIN "Workspace" w ON w."id" = c."workspaceId"
        WHERE w."deletedAt" IS NOT NULL LIMIT ${batch}`;
      if (orphans.length > 0) n += (await db.generationContent.deleteMany({ where: { id: { in: orphans.map((r) => r.id) } } })).count;
      return n;
    },
    async close() {
      await flush();
    },
  };
}
