/**
 * Organizations, users, memberships, workspaces and API keys. Used by the auth interceptor (key
 * lookup) and by `portico admin`. Plaintext keys exist only in the return value of createApiKey.
 */
import type { Db } from "../../db/client.js";
import type { KeyRecord } from "../auth.js";
import { generateApiKey, hashSecret, labelForSecret } from "./keys.js";

export class IdentityError extends Error {}

interface KeyRow {
  keyId: string;
  keyHash: string;
  keyLabel: string;
  organizationId: string;
  workspaceId: string;
  userId: string;
  isManagement: unknown;
  disabled: unknown;
  revoked: unknown;
  internsProgramme: unknown;
  creatorIsMember: unknown;
  workspaceDeleted: unknown;
  expiresAt: unknown;
  keySpend: unknown;
  workspaceSpend: unknown;
  keyRpm: unknown;
  keyTpm: unknown;
  workspaceRpm: unknown;
  workspaceTpm: unknown;
  responseCacheTtlSeconds: unknown;
  contentLogRetentionDays: unknown;
}

/** A nullable integer column (SQLite may return bigint). */
const intOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));
/** A DateTime column read raw: a Date (PostgreSQL), ms or an ISO string (SQLite). */
const msOrNull = (v: unknown): number | null => {
  if (v === null || v === undefined) return null;
  if (v instanceof Date) return v.getTime();
  if (typeof v === "number" || typeof v === "bigint") return Number(v);
  const t = Date.parse(String(v));
  return Number.isNaN(t) ? null : t;
};

/** SQLite returns booleans and CASE results as 0/1 (number or bigint); PostgreSQL as booleans/numbers. */
function truthy(value: unknown): boolean {
  return value === true || value === 1 || value === 1n || value === "1" || value === "t";
}

export function createIdentityRepository(db: Db) {
  return {
    /**
     * Resolves a key hash into everything the auth interceptor needs in one statement (key, its
     * organization, the creator's membership and whether its workspace was deleted): this runs on
     * every request, so one round trip.
     */
    async findKeyByHash(keyHash: string): Promise<KeyRecord | null> {
      const rows = await db.$queryRaw<KeyRow[]>`
        SELECT k."id" AS "keyId", k."hash" AS "keyHash", k."label" AS "keyLabel",
               k."organizationId" AS "organizationId", k."workspaceId" AS "workspaceId",
               k."creatorUserId" AS "userId", k."isManagement" AS "isManagement", k."disabled" AS "disabled",
               CASE WHEN k."revokedAt" IS NULL THEN 0 ELSE 1 END AS "revoked",
               o."internsProgramme" AS "internsProgramme",
               CASE WHEN m."id" IS NOT NULL AND m."removedAt" IS NULL THEN 1 ELSE 0 END AS "creatorIsMember",
               CASE WHEN w."deletedAt" IS NULL THEN 0 ELSE 1 END AS "workspaceDeleted",
               k."expiresAt" AS "expiresAt",
               CASE WHEN k."limitFemtoUsd" IS NULL THEN 0 ELSE 1 END AS "keySpend",
               CASE WHEN w."budgetFemtoUsd" IS NULL THEN 0 ELSE 1 END AS "workspaceSpend",
               k."rateLimitRpm" AS "keyRpm", k."rateLimitTpm" AS "keyTpm",
               w."rateLimitRpm" AS "workspaceRpm", w."rateLimitTpm" AS "workspaceTpm",
               w."responseCacheTtlSeconds" AS "responseCacheTtlSeconds",
               w."contentLogRetentionDays" AS "contentLogRetentionDays"
        FROM "ApiKey" k
        JOIN "Organization" o ON o."id" = k."organizationId"
        LEFT JOIN "Membership" m ON m."organizationId" = k."organizationId" AND m."userId" = k."creatorUserId"
        LEFT JOIN "Workspace" w ON w."id" = k."workspaceId"
        WHERE k."hash" = ${keyHash}`;
      const row = rows[0];
      if (!row) return null;
      return {
        keyId: row.keyId,
        keyHash: row.keyHash,
        keyLabel: row.keyLabel,
        organizationId: row.organizationId,
        workspaceId: row.workspaceId,
        userId: row.userId,
        isManagement: truthy(row.isManagement),
        internsProgramme: truthy(row.internsProgramme),
        disabled: truthy(row.disabled),
        revoked: truthy(row.revoked),
        creatorIsMember: truthy(row.creatorIsMember),
        workspaceDeleted: truthy(row.workspaceDeleted),
        expiresAtMs: msOrNull(row.expiresAt),
        limits: {
          keySpend: truthy(row.keySpend),
          workspaceSpend: truthy(row.workspaceSpend),
          keyRpm: intOrNull(row.keyRpm),
          keyTpm: intOrNull(row.keyTpm),
          workspaceRpm: intOrNull(row.workspaceRpm),
          workspaceTpm: intOrNull(row.workspaceTpm),
        },
        responseCacheTtlSeconds: intOrNull(row.responseCacheTtlSeconds),
        contentLogRetentionDays: intOrNull(row.contentLogRetentionDays),
      };
    },

    async createOrganization(input: { name: string; internsProgramme: boolean }) {
      return db.organization.create({ data: { name: input.name, internsProgramme: input.internsProgramme } });
    },

    async setInternsProgramme(organizationId: string, member: boolean) {
      return db.organization.update({ where: { id: organizationId }, data: { internsProgramme: member } });
    },

    async findOrCreateUser(input: { email: string; name: string }) {
      return db.user.upsert({ where: { email: input.email }, update: {}, create: input });
    },

    async addMember(organizationId: string, userId: string, role = "member") {
      return db.membership.upsert({
        where: { organizationId_userId: { organizationId, userId } },
        update: { removedAt: null, role },
        create: { organizationId, userId, role },
      });
    },

    /** The user leaves the organization; keys they created then answer 403 until reassigned. */
    async removeMember(organizationId: string, userId: string) {
      const res = await db.membership.updateMany({
        where: { organizationId, userId, removedAt: null },
        data: { removedAt: new Date() },
      });
      if (res.count === 0) throw new IdentityError("no active membership for that user in that organization");
    },

    async createWorkspace(input: { organizationId: string; name: string; slug?: string; isDefault?: boolean }) {
      const slug = input.slug ?? slugify(input.name);
      return db.workspace.create({
        data: { organizationId: input.organizationId, name: input.name, slug, isDefault: input.isDefault ?? false },
      });
    },

    async deleteWorkspace(workspaceId: string) {
      const res = await db.workspace.updateMany({
        where: { id: workspaceId, deletedAt: null },
        data: { deletedAt: new Date() },
      });
      if (res.count === 0) throw new IdentityError("workspace not found or already deleted");
    },

    /** Creates a key and returns its plaintext once. */
    async createApiKey(input: {
      organizationId: string;
      workspaceId: string;
      creatorUserId: string;
      name: string;
      isManagement: boolean;
    }) {
      const plaintext = generateApiKey();
      const record = await db.apiKey.create({
        data: {
          hash: hashSecret(plaintext),
          label: labelForSecret(plaintext),
          name: input.name,
          isManagement: input.isManagement,
          organizationId: input.organizationId,
          workspaceId: input.workspaceId,
          creatorUserId: input.creatorUserId,
        },
      });
      return { record, plaintext };
    },

    async listApiKeys(organizationId?: string) {
      return db.apiKey.findMany({
        where: organizationId ? { organizationId } : {},
        orderBy: { createdAt: "asc" },
      });
    },

    /** Revokes by id or hash. */
    async revokeApiKey(idOrHash: string) {
      const res = await db.apiKey.updateMany({
        where: { OR: [{ id: idOrHash }, { hash: idOrHash }], revokedAt: null },
        data: { revokedAt: new Date() },
      });
      if (res.count === 0) throw new IdentityError("no active key with that id or hash");
    },

    async setApiKeyDisabled(idOrHash: string, disabled: boolean) {
      const res = await db.apiKey.updateMany({ where: { OR: [{ id: idOrHash }, { hash: idOrHash }] }, data: { disabled } });
      if (res.count === 0) throw new IdentityError("no key with that id or hash");
    },

  };
}

export type IdentityRepository = ReturnType<typeof createIdentityRepository>;

export function slugify(name: string): string {
  const slug = name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 48);
  return slug || "workspace";
}
