/**
 * Preset storage. Creation numbers versions under concurrency with one row lock per preset, in as
 * few Prisma round trips as the dialect allows (this runs on every create, the service's hot write):
 *
 *   upsert Preset (workspaceId, slug): INSERT with latestVersion = 1, or ON CONFLICT DO UPDATE
 *     SET latestVersion = latestVersion + 1, designatedVersionId, updatedAt (row lock) RETURNING the row
 *   INSERT PresetVersion (version = the latestVersion just written) RETURNING the row
 *
 * - PostgreSQL: one statement, the upsert in a data-modifying CTE feeding the version INSERT, so it is
 *   atomic on its own (one round trip, no BEGIN/COMMIT). Concurrent first creates of a slug meet in
 *   ON CONFLICT, which waits for the other row and then updates it.
 * - SQLite (no data-modifying CTEs): the two statements in one non-interactive batch transaction
 *   (`$transaction([...])`); the version INSERT reads latestVersion back by (workspaceId, slug). SQLite
 *   has a single writer, so the increment is serialised, and creations waiting for it commit together
 *   (group commit, see createOnSqlite).
 *
 * Statements are raw SQL through Prisma (the ORM's upsert/create cost ~3x more per create in query
 * compilation and result mapping). Values are written exactly as the ORM writes them, so ORM reads see
 * the same rows: Date parameters go through the driver adapter's DateTime mapping (SQLite: ISO-8601
 * text `…+00:00`, PostgreSQL: timestamp(3)); `config` is JSON text (SQLite TEXT in the JSONB-declared
 * column, PostgreSQL cast `::jsonb`). test/integration/presets/presets-repository.test.ts reads the rows
 * back through the ORM on both providers.
 *
 * The version id is generated up front so the upsert already designates it. (workspaceId, slug) and
 * (presetId, version) are unique, so a duplicate version can never be committed; a unique violation,
 * busy database or serialisation failure retries the whole creation, bounded with jittered backoff;
 * what survives the retries is a {@link PresetConflictError}. Nothing is half-written: either both
 * rows are committed or neither.
 */
import { randomUUID } from "node:crypto";
import { isUniqueViolation, type Db, type DbProvider } from "../../db/client.js";
import { Prisma, type JsonValue, type Preset, type PresetVersion } from "../../db/prisma.js";
import { findArgs, pagedWhere, pageOf, type Page, type PageRequest } from "../paging.js";
import { PRESETS_ORDER, PRESET_VERSIONS_ORDER } from "./preset-rules.js";
import type { Actor } from "../audit/audit-log.js";

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
  /**
   * Who creates it: the audit event `preset.version.create` (details: slug, version) is written in the
   * same transaction as the version. Omitted: no event.
   */
  actor?: Actor;
}

export interface PresetsRepositoryOptions {
  /** SQL dialect of `db` (the creation statements differ per provider). */
  provider: DbProvider;
  /** Attempts per creation before giving up with PresetConflictError. Default 8. */
  maxAttempts?: number;
  /** Base of the jittered exponential backoff in ms. Default 5. */
  backoffBaseMs?: number;
  /** Random source in [0, 1) for jitter (injectable for tests). */
  random?: () => number;
  /** Told of each SQLite group transaction of more than one creation: its size, and whether it committed. */
  onGroupCommit?: (size: number, committed: boolean) => void;
}

export interface PresetsRepository {
  createVersion(input: CreateVersionInput): Promise<{ preset: Preset; version: PresetVersion }>;
  findPreset(workspaceId: string, slug: string): Promise<Preset | null>;
  findVersionById(id: string): Promise<PresetVersion | null>;
  findVersion(presetId: string, version: number): Promise<PresetVersion | null>;
  /** The workspace's presets, most recently updated first; with `status`, only those in that status. */
  listPresets(workspaceId: string, page: PageRequest, filter?: { status?: string }): Promise<Page<Preset> & { total: number }>;
  listVersions(presetId: string, page: PageRequest): Promise<Page<PresetVersion> & { total: number }>;
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

export function createPresetsRepository(db: Db, opts: PresetsRepositoryOptions): PresetsRepository {
  const maxAttempts = opts.maxAttempts ?? 8;
  const base = opts.backoffBaseMs ?? 5;
  const random = opts.random ?? Math.random;
  const attempt = opts.provider === "postgresql" ? createOnPostgres(db) : createOnSqlite(db, opts.onGroupCommit);

  return {
    async createVersion(input) {
      for (let n = 1; ; n++) {
        try {
          return await attempt(input, randomUUID(), randomUUID(), new Date());
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
    async listPresets(workspaceId, page, filter) {
      const where = filter?.status === undefined ? { workspaceId } : { workspaceId, status: filter.status };
      const [total, rows] = await Promise.all([
        db.preset.count({ where }),
        db.preset.findMany({ where: pagedWhere(where, PRESETS_ORDER, page), ...findArgs(PRESETS_ORDER, page) }),
      ]);
      return { ...pageOf(rows, PRESETS_ORDER, page), total };
    },
    async listVersions(presetId, page) {
      const [total, items] = await Promise.all([
        db.presetVersion.count({ where: { presetId } }),
        db.presetVersion.findMany({ where: pagedWhere({ presetId }, PRESET_VERSIONS_ORDER, page), ...findArgs(PRESET_VERSIONS_ORDER, page) }),
      ]);
      return { ...pageOf(items, PRESET_VERSIONS_ORDER, page), total };
    },
  };
}

type CreateAttempt = (
  input: CreateVersionInput,
  presetId: string,
  versionId: string,
  now: Date,
) => Promise<{ preset: Preset; version: PresetVersion }>;

/**
 * Creates the preset, or numbers the next version of an existing one and designates it; returns the
 * preset row. Shared by both dialects (PostgreSQL runs it inside a CTE).
 */
function presetUpsert(input: CreateVersionInput, presetId: string, versionId: string, now: Date): Prisma.Sql {
  return Prisma.sql`
    INSERT INTO "Preset" ("id", "workspaceId", "slug", "name", "status", "creatorUserId",
                          "designatedVersionId", "latestVersion", "createdAt", "updatedAt")
    VALUES (${presetId}, ${input.workspaceId}, ${input.slug}, ${input.slug}, 'active', ${input.creatorUserId},
            ${versionId}, 1, ${now}, ${now})
    ON CONFLICT ("workspaceId", "slug") DO UPDATE SET
      "latestVersion" = "Preset"."latestVersion" + 1,
      "designatedVersionId" = excluded."designatedVersionId",
      "updatedAt" = excluded."updatedAt"
    RETURNING ${PRESET_COLUMNS}`;
}

/** The audit event's columns for a creation by `actor` (details are built in SQL from the preset row). */
function auditValues(actor: Actor, now: Date): Prisma.Sql {
  const key = actor.type === "api_key" ? actor : undefined;
  return Prisma.sql`${randomUUID()}, ${actor.organizationId}, p."workspaceId", ${actor.type}, ${key?.keyHash ?? null},
    ${key?.keyLabel ?? null}, ${key?.userId ?? null}, 'preset.version.create', 'preset', p."id"`;
}
const AUDIT_COLUMNS = Prisma.raw(
  `"id", "organizationId", "workspaceId", "actorType", "actorKeyHash", "actorKeyLabel", "actorUserId", "action", "targetType", "targetId", "details", "createdAt"`,
);

/** The two statements of one creation on SQLite (the version INSERT reads latestVersion back). */
function sqliteStatements(db: Db, input: CreateVersionInput, presetId: string, versionId: string, now: Date) {
  const config = JSON.stringify(input.config);
  return [
    db.$queryRaw<Record<string, unknown>[]>`${presetUpsert(input, presetId, versionId, now)}`,
    db.$queryRaw<Record<string, unknown>[]>`
      INSERT INTO "PresetVersion" ("id", "presetId", "version", "config", "systemPrompt", "creatorId", "createdAt", "updatedAt")
      SELECT ${versionId}, p."id", p."latestVersion", ${config}, ${input.systemPrompt}, ${input.creatorUserId}, ${now}, ${now}
      FROM "Preset" p
      WHERE p."workspaceId" = ${input.workspaceId} AND p."slug" = ${input.slug}
      RETURNING ${VERSION_COLUMNS}`,
    ...(input.actor
      ? [
          db.$queryRaw<Record<string, unknown>[]>`
            INSERT INTO "AuditEvent" (${AUDIT_COLUMNS})
            SELECT ${auditValues(input.actor, now)}, json_object('slug', p."slug", 'version', p."latestVersion"), ${now}
            FROM "Preset" p
            WHERE p."workspaceId" = ${input.workspaceId} AND p."slug" = ${input.slug}
            RETURNING "id"`,
        ]
      : []),
  ];
}

/**
 * The statements of a group of creations on SQLite: three in all, whatever the group's size (each
 * statement costs far more in the Prisma client than in SQLite, and the write lock is held meanwhile).
 *
 * 1. One multi-row upsert. SQLite applies its rows in order, so creations of one slug count up one by
 *    one, and RETURNING gives each creation's own view of the preset (latestVersion at that row,
 *    designatedVersionId = that creation's version id, which is how rows are matched to creations:
 *    RETURNING order is not guaranteed).
 * 2. One version INSERT. A creation's number is the preset's final latestVersion minus the creations
 *    of the same slug that come after it in the group.
 * 3. One audit INSERT for the creations that have an actor.
 */
function groupStatements(db: Db, group: readonly Pending[]) {
  const later = new Map<string, number>();
  const after: number[] = new Array<number>(group.length);
  for (let i = group.length - 1; i >= 0; i--) {
    const key = `${group[i]!.input.workspaceId}\u0000${group[i]!.input.slug}`;
    after[i] = later.get(key) ?? 0;
    later.set(key, after[i]! + 1);
  }
  const upserts = group.map(
    ({ input, presetId, versionId, now }) =>
      Prisma.sql`(${presetId}, ${input.workspaceId}, ${input.slug}, ${input.slug}, 'active', ${input.creatorUserId},
                  ${versionId}, 1, ${now}, ${now})`,
  );
  const versions = group.map(
    ({ input, versionId, now }, i) =>
      Prisma.sql`(${versionId}, ${input.workspaceId}, ${input.slug}, ${after[i]!}, ${JSON.stringify(input.config)},
                  ${input.systemPrompt}, ${input.creatorUserId}, ${now})`,
  );
  const audits = group.flatMap(({ input, now }, i) => {
    const actor = input.actor;
    if (!actor) return [];
    const key = actor.type === "api_key" ? actor : undefined;
    return [
      Prisma.sql`(${randomUUID()}, ${actor.organizationId}, ${actor.type}, ${key?.keyHash ?? null}, ${key?.keyLabel ?? null},
                  ${key?.userId ?? null}, ${input.workspaceId}, ${input.slug}, ${after[i]!}, ${now})`,
    ];
  });
  return [
    db.$queryRaw<Record<string, unknown>[]>`
      INSERT INTO "Preset" ("id", "workspaceId", "slug", "name", "status", "creatorUserId",
                            "designatedVersionId", "latestVersion", "createdAt", "updatedAt")
      VALUES ${Prisma.join(upserts)}
      ON CONFLICT ("workspaceId", "slug") DO UPDATE SET
        "latestVersion" = "Preset"."latestVersion" + 1,
        "designatedVersionId" = excluded."designatedVersionId",
        "updatedAt" = excluded."updatedAt"
      RETURNING ${PRESET_COLUMNS}`,
    db.$queryRaw<Record<string, unknown>[]>`
      INSERT INTO "PresetVersion" ("id", "presetId", "version", "config", "systemPrompt", "creatorId", "createdAt", "updatedAt")
      SELECT v.column1, p."id", p."latestVersion" - v.column4, v.column5, v.column6, v.column7, v.column8, v.column8
      FROM (VALUES ${Prisma.join(versions)}) v
      JOIN "Preset" p ON p."workspaceId" = v.column2 AND p."slug" = v.column3
      RETURNING ${VERSION_COLUMNS}`,
    ...(audits.length > 0
      ? [
          db.$queryRaw<Record<string, unknown>[]>`
            INSERT INTO "AuditEvent" (${AUDIT_COLUMNS})
            SELECT v.column1, v.column2, p."workspaceId", v.column3, v.column4, v.column5, v.column6,
                   'preset.version.create', 'preset', p."id",
                   json_object('slug', p."slug", 'version', p."latestVersion" - v.column9), v.column10
            FROM (VALUES ${Prisma.join(audits)}) v
            JOIN "Preset" p ON p."workspaceId" = v.column7 AND p."slug" = v.column8`,
        ]
      : []),
  ];
}

/** Most creations committed together in one SQLite transaction. */
export const SQLITE_GROUP_COMMIT_MAX = 64;

interface Pending {
  input: CreateVersionInput;
  presetId: string;
  versionId: string;
  now: Date;
  resolve: (created: { preset: Preset; version: PresetVersion }) => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit on SQLite: SQLite has one writer, so creations that arrive while a transaction is
 * committing wait and then commit together, in arrival order, in ONE batch transaction (one BEGIN …
 * COMMIT; see groupStatements). The first creation waits for the end of the event loop's current
 * poll phase (setImmediate), so the requests read from the network in the same turn join it: a
 * transaction runs on microtasks alone and would otherwise commit before the next request is even
 * parsed, leaving every group at one creation. Each caller is answered only after that COMMIT, so a
 * 200 still means the version is written.
 * When a group fails (one creation's conflict would roll back all of them), its creations run again
 * one by one, so one bad creation never fails another.
 */
function createOnSqlite(db: Db, onGroupCommit?: (size: number, committed: boolean) => void): CreateAttempt {
  const queue: Pending[] = [];
  let running = false;

  const one = async (p: Pending): Promise<void> => {
    try {
      const [presets, versions] = await db.$transaction(sqliteStatements(db, p.input, p.presetId, p.versionId, p.now));
      p.resolve({ preset: presetRow(single(presets!)), version: versionRow(single(versions!)) });
    } catch (err) {
      p.reject(err);
    }
  };

  const drain = async (): Promise<void> => {
    running = true;
    try {
      while (queue.length > 0) {
        const group = queue.splice(0, SQLITE_GROUP_COMMIT_MAX);
        if (group.length === 1) {
          await one(group[0]!);
          continue;
        }
        let results: Record<string, unknown>[][];
        try {
          results = await db.$transaction(groupStatements(db, group));
          onGroupCommit?.(group.length, true);
        } catch {
          onGroupCommit?.(group.length, false);
          for (const p of group) await one(p);
          continue;
        }
        const presets = new Map(results[0]!.map((r) => [String(r.designatedVersionId), r]));
        const versions = new Map(results[1]!.map((r) => [String(r.id), r]));
        for (const p of group) {
          try {
            const preset = presets.get(p.versionId);
            const version = versions.get(p.versionId);
            if (!preset || !version) throw new Error("preset creation returned no row for a creation of the group");
            p.resolve({ preset: presetRow(preset), version: versionRow(version) });
          } catch (err) {
            p.reject(err);
          }
        }
      }
    } finally {
      running = false;
    }
  };

  return (input, presetId, versionId, now) =>
    new Promise((resolve, reject) => {
      queue.push({ input, presetId, versionId, now, resolve, reject });
      if (!running) {
        running = true;
        setImmediate(() => void drain());
      }
    });
}

/** One statement: the upsert in a data-modifying CTE feeds the version INSERT; one row with both. */
function createOnPostgres(db: Db): CreateAttempt {
  return async (input, presetId, versionId, now) => {
    const config = JSON.stringify(input.config);
    const rows = await db.$queryRaw<Record<string, unknown>[]>`
      WITH p AS (${presetUpsert(input, presetId, versionId, now)}), v AS (
        INSERT INTO "PresetVersion" ("id", "presetId", "version", "config", "systemPrompt", "creatorId", "createdAt", "updatedAt")
        SELECT ${versionId}, p."id", p."latestVersion", ${config}::jsonb, ${input.systemPrompt}, ${input.creatorUserId}, ${now}, ${now}
        FROM p
        RETURNING ${VERSION_COLUMNS}
      )${
        input.actor
          ? Prisma.sql`, a AS (
        INSERT INTO "AuditEvent" (${AUDIT_COLUMNS})
        SELECT ${auditValues(input.actor, now)}, jsonb_build_object('slug', p."slug", 'version', p."latestVersion"), ${now}
        FROM p
      )`
          : Prisma.empty
      }
      SELECT ${PRESET_SELECT}, ${VERSION_SELECT} FROM p CROSS JOIN v`;
    const row = single(rows);
    return { preset: presetRow(row, "p_"), version: versionRow(row, "v_") };
  };
}

const PRESET_FIELDS = [
  "id", "workspaceId", "slug", "name", "description", "status", "statusUpdatedAt", "creatorUserId",
  "designatedVersionId", "latestVersion", "createdAt", "updatedAt",
] as const satisfies readonly (keyof Preset)[];
const VERSION_FIELDS = [
  "id", "presetId", "version", "config", "systemPrompt", "creatorId", "createdAt", "updatedAt",
] as const satisfies readonly (keyof PresetVersion)[];

const quoted = (fields: readonly string[]) => fields.map((f) => `"${f}"`).join(", ");
const PRESET_COLUMNS = Prisma.raw(quoted(PRESET_FIELDS));
const VERSION_COLUMNS = Prisma.raw(quoted(VERSION_FIELDS));
const PRESET_SELECT = Prisma.raw(PRESET_FIELDS.map((f) => `p."${f}" AS "p_${f}"`).join(", "));
const VERSION_SELECT = Prisma.raw(VERSION_FIELDS.map((f) => `v."${f}" AS "v_${f}"`).join(", "));

function single<T>(rows: T[]): T {
  const row = rows[0];
  if (rows.length !== 1 || row === undefined) throw new Error(`preset creation returned ${rows.length} rows`);
  return row;
}

/** Raw rows carry driver values; these are the exact types the ORM would have returned. */
function presetRow(r: Record<string, unknown>, prefix = ""): Preset {
  const get = (f: (typeof PRESET_FIELDS)[number]) => r[prefix + f];
  return {
    id: str(get("id")),
    workspaceId: str(get("workspaceId")),
    slug: str(get("slug")),
    name: str(get("name")),
    description: strOrNull(get("description")),
    status: str(get("status")),
    statusUpdatedAt: dateOrNull(get("statusUpdatedAt")),
    creatorUserId: strOrNull(get("creatorUserId")),
    designatedVersionId: strOrNull(get("designatedVersionId")),
    latestVersion: Number(get("latestVersion")),
    createdAt: date(get("createdAt")),
    updatedAt: date(get("updatedAt")),
  };
}

function versionRow(r: Record<string, unknown>, prefix = ""): PresetVersion {
  const get = (f: (typeof VERSION_FIELDS)[number]) => r[prefix + f];
  const config = get("config");
  return {
    id: str(get("id")),
    presetId: str(get("presetId")),
    version: Number(get("version")),
    // Parsed by the driver where the column type is known; JSON text otherwise.
    config: (typeof config === "string" ? JSON.parse(config) : config) as JsonValue,
    systemPrompt: strOrNull(get("systemPrompt")),
    creatorId: str(get("creatorId")),
    createdAt: date(get("createdAt")),
    updatedAt: date(get("updatedAt")),
  };
}

function str(v: unknown): string {
  if (v === null || v === undefined) throw new Error("preset creation returned a row without a required column");
  return String(v);
}
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));
const dateOrNull = (v: unknown): Date | null => (v === null || v === undefined ? null : date(v));
function date(v: unknown): Date {
  const d = v instanceof Date ? v : new Date(v as string | number);
  if (Number.isNaN(d.getTime())) throw new Error("preset creation returned an invalid timestamp");
  return d;
}
