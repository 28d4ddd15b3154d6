/**
 * Preset storage. Creation numbers versions under concurrency with one row lock per preset:
 *
 *   BEGIN
 *     upsert Preset (workspaceId, slug): create with latestVersion = 1, or
 *       UPDATE … SET latestVersion = latestVersion + 1, designatedVersionId, updatedAt (row lock)
 *     INSERT PresetVersion (version = latestVersion returned by the upsert)
 *   COMMIT
 *
 * Two statements per attempt: the version id is generated up front so the upsert already designates
 * it. Two concurrent first creates of one slug race on the (workspaceId, slug) unique index; the loser
 * gets a unique violation and the whole transaction is retried (after it PostgreSQL refuses further
 * statements in that transaction anyway). (presetId, version) is unique too, so a duplicate version
 * can never be committed. Retries are bounded with jittered backoff; what survives them is a
 * {@link PresetConflictError}.
 */
import { randomUUID } from "node:crypto";
import { isUniqueViolation, type Db } from "../../db/client.js";
import type { InputJsonValue, Preset, PresetVersion } from "../../db/prisma.js";
import type { PageRequest } from "./preset-rules.js";

/** Creation kept conflicting after every retry. */
export class PresetConflictError extends Error {
  constructor(readonly attempts: number, options?: { cause?: unknown }) {
    super(`preset creation conflicted ${attempts} times`, options);
    this.name = "PresetConflictError";
  }
}

export interface CreateVersionInput {
  workspaceId: string;
  slug: string;
  creatorUserId: string;
  config: Record<string, unknown>;
  systemPrompt: string | null;
}

export interface PresetsRepositoryOptions {
  /** Attempts per creation before giving up with PresetConflictError. Default 8. */
  maxAttempts?: number;
  /** Base of the jittered exponential backoff in ms. Default 5. */
  backoffBaseMs?: number;
  /** Random source in [0, 1) for jitter (injectable for tests). */
  random?: () => number;
}

export interface PresetsRepository {
  createVersion(input: CreateVersionInput): Promise<{ preset: Preset; version: PresetVersion }>;
  findPreset(workspaceId: string, slug: string): Promise<Preset | null>;
  findVersionById(id: string): Promise<PresetVersion | null>;
  findVersion(presetId: string, version: number): Promise<PresetVersion | null>;
  listPresets(workspaceId: string, page: PageRequest): Promise<{ items: Preset[]; total: number }>;
  listVersions(presetId: string, page: PageRequest): Promise<{ items: PresetVersion[]; total: number }>;
}

/** Errors after which the same transaction may succeed when started again. */
export function isRetryableWriteError(err: unknown): boolean {
  if (isUniqueViolation(err)) return true;
  const e = err as { name?: unknown; code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === "string" ? e.code : "";
  // P2034: write conflict or deadlock; P2028: transaction could not start or expired under load.
  if (code === "P2034" || code === "P2028") return true;
  const message = typeof e?.message === "string" ? e.message : "";
  return /SQLITE_BUSY|database is locked|could not serialize|deadlock detected/i.test(message);
}

export function createPresetsRepository(db: Db, opts: PresetsRepositoryOptions = {}): PresetsRepository {
  const maxAttempts = opts.maxAttempts ?? 8;
  const base = opts.backoffBaseMs ?? 5;
  const random = opts.random ?? Math.random;

  const attempt = (input: CreateVersionInput) => {
    const versionId = randomUUID();
    return db.$transaction(
      async (tx) => {
        const now = new Date();
        const preset = await tx.preset.upsert({
          where: { workspaceId_slug: { workspaceId: input.workspaceId, slug: input.slug } },
          create: {
            workspaceId: input.workspaceId,
            slug: input.slug,
            name: input.slug,
            status: "active",
            creatorUserId: input.creatorUserId,
            latestVersion: 1,
            designatedVersionId: versionId,
            createdAt: now,
            updatedAt: now,
          },
          update: { latestVersion: { increment: 1 }, designatedVersionId: versionId, updatedAt: now },
        });
        const version = await tx.presetVersion.create({
          data: {
            id: versionId,
            presetId: preset.id,
            version: preset.latestVersion,
            config: input.config as InputJsonValue,
            systemPrompt: input.systemPrompt,
            creatorId: input.creatorUserId,
            createdAt: now,
            updatedAt: now,
          },
        });
        return { preset, version };
      },
      { maxWait: 10_000, timeout: 10_000 },
    );
  };

  return {
    async createVersion(input) {
      for (let n = 1; ; n++) {
        try {
          return await attempt(input);
        } catch (err) {
          if (!isRetryableWriteError(err)) throw err;
          if (n >= maxAttempts) throw new PresetConflictError(n, { cause: err });
          const ceiling = base * 2 ** Math.min(n - 1, 6);
          await new Promise((r) => setTimeout(r, ceiling / 2 + random() * ceiling));
        }
      }
    },
    findPreset: (workspaceId, slug) => db.preset.findUnique({ where: { workspaceId_slug: { workspaceId, slug } } }),
    findVersionById: (id) => db.presetVersion.findUnique({ where: { id } }),
    findVersion: (presetId, version) =>
      db.presetVersion.findUnique({ where: { presetId_version: { presetId, version } } }),
    async listPresets(workspaceId, page) {
      const [total, items] = await Promise.all([
        db.preset.count({ where: { workspaceId } }),
        db.preset.findMany({
          where: { workspaceId },
          orderBy: [{ updatedAt: "desc" }, { createdAt: "desc" }, { id: "asc" }],
          skip: page.offset,
          take: page.limit,
        }),
      ]);
      return { items, total };
    },
    async listVersions(presetId, page) {
      const [total, items] = await Promise.all([
        db.presetVersion.count({ where: { presetId } }),
        db.presetVersion.findMany({ where: { presetId }, orderBy: { version: "asc" }, skip: page.offset, take: page.limit }),
      ]);
      return { items, total };
    },
  };
}
