/**
 * Storage of BYOK credentials. The repository only ever sees sealed key material (ciphertext plus
 * the id of the keyring key that sealed it); raw provider keys never reach the database layer.
 * Every query is scoped by organization, so another tenant's credential is simply not found.
 */
import type { Db, DbProvider } from "../../db/client.js";
import { DbNull, type ByokCredential, type DbTransaction, type JsonValue } from "../../db/prisma.js";
import { createOrdering, findArgs, pagedWhere, pageOf, type Page, type PageRequest } from "../paging.js";

export type ByokRow = ByokCredential;

/** Fields of a credential as the domain sees them (lists decoded from their Json columns). */
export interface CredentialData {
  name: string | null;
  allowedApiKeyHashes: string[] | null;
  allowedModels: string[] | null;
  allowedUserIds: string[] | null;
  declaredZdr: boolean | null;
  disabled: boolean;
  isRequired: boolean;
  isFallback: boolean;
  isByokOnly: boolean;
  /** Load-balancing weight among credentials of equal sort_order (docs/routing.md); absent: 1. */
  weight?: number | undefined;
}

export interface NewCredential extends CredentialData {
  id: string;
  organizationId: string;
  workspaceId: string;
  provider: string;
  label: string;
  keyId: string;
  ciphertext: Uint8Array;
}

export interface CredentialPatch extends Partial<CredentialData> {
  label?: string;
  keyId?: string;
  ciphertext?: Uint8Array;
}

export interface ListFilter {
  organizationId: string;
  workspaceId: string;
  provider?: string | undefined;
}

/** Oldest first. */
export const BYOK_ORDER = createOrdering("byok", [
  { field: "createdAt", dir: "asc", kind: "date" },
  { field: "id", dir: "asc", kind: "string" },
]);

export function listOf(value: JsonValue | null): string[] | null {
  return Array.isArray(value) ? value.map(String) : null;
}

function jsonList(value: string[] | null) {
  return value === null ? DbNull : value;
}

export function createByokRepository(db: Db, provider: DbProvider) {
  /**
   * Takes the write lock a read-then-write transaction needs before it reads. PostgreSQL: a row lock.
   * SQLite needs nothing here: every transaction begins IMMEDIATE (src/db/client.ts), so it already
   * holds the database write lock.
   */
  const lockRow = async (tx: DbTransaction, table: "Workspace" | "ByokCredential", id: string) => {
    if (provider === "postgresql") {
      await tx.$queryRawUnsafe(`SELECT "id" FROM "${table}" WHERE "id" = $1 FOR UPDATE`, id);
    }
  };
  /** Serializes writers of one workspace (sort_order assignment). */
  const lockWorkspace = (tx: DbTransaction, workspaceId: string) => lockRow(tx, "Workspace", workspaceId);
  const lockCredential = (tx: DbTransaction, id: string) => lockRow(tx, "ByokCredential", id);

  return {
    /** A non-deleted workspace of the organization, or null (missing, deleted and foreign look alike). */
    async findWorkspace(organizationId: string, workspaceId: string): Promise<{ id: string } | null> {
      return db.workspace.findFirst({ where: { id: workspaceId, organizationId, deletedAt: null }, select: { id: true } });
    },

    /** The organization's default workspace if it has not been deleted. */
    async defaultWorkspace(organizationId: string): Promise<{ id: string } | null> {
      return db.workspace.findFirst({
        where: { organizationId, isDefault: true, deletedAt: null },
        orderBy: { createdAt: "asc" },
        select: { id: true },
      });
    },

    /** Which of the hashes are API keys of the organization. */
    async ownedKeyHashes(organizationId: string, hashes: string[]): Promise<Set<string>> {
      if (hashes.length === 0) return new Set();
      const rows = await db.apiKey.findMany({ where: { organizationId, hash: { in: hashes } }, select: { hash: true } });
      return new Set(rows.map((r) => r.hash));
    },

    /** Inserts a credential at the next sort_order of its workspace and provider. */
    async create(input: NewCredential): Promise<ByokRow> {
      return db.$transaction(async (tx) => {
        await lockWorkspace(tx, input.workspaceId);
        const last = await tx.byokCredential.aggregate({
          where: { workspaceId: input.workspaceId, provider: input.provider, deletedAt: null },
          _max: { sortOrder: true },
        });
        const sortOrder = last._max.sortOrder === null ? 0 : last._max.sortOrder + 1;
        const now = new Date();
        return tx.byokCredential.create({
          data: {
            id: input.id,
            organizationId: input.organizationId,
            workspaceId: input.workspaceId,
            provider: input.provider,
            name: input.name,
            label: input.label,
            keyId: input.keyId,
            ciphertext: Buffer.from(input.ciphertext),
            allowedApiKeyHashes: jsonList(input.allowedApiKeyHashes),
            allowedModels: jsonList(input.allowedModels),
            allowedUserIds: jsonList(input.allowedUserIds),
            declaredZdr: input.declaredZdr,
            disabled: input.disabled,
            isRequired: input.isRequired,
            isFallback: input.isFallback,
            isByokOnly: input.isByokOnly,
            weight: input.weight ?? 1,
            sortOrder,
            createdAt: now,
            updatedAt: now,
          },
        });
      });
    },

    async get(organizationId: string, id: string): Promise<ByokRow | null> {
      return db.byokCredential.findFirst({ where: { id, organizationId, deletedAt: null } });
    },

    async list(filter: ListFilter, page: PageRequest): Promise<Page<ByokRow> & { total: number }> {
      const where = {
        organizationId: filter.organizationId,
        workspaceId: filter.workspaceId,
        deletedAt: null,
        ...(filter.provider !== undefined ? { provider: filter.provider } : {}),
      };
      const [total, rows] = await Promise.all([
        db.byokCredential.count({ where }),
        db.byokCredential.findMany({ where: pagedWhere(where, BYOK_ORDER, page), ...findArgs(BYOK_ORDER, page) }),
      ]);
      return { ...pageOf(rows, BYOK_ORDER, page), total };
    },

    /**
     * Reads the credential under a lock, lets `decide` compute the patch (it may throw), writes it.
     * Returns null when the credential does not exist in the organization.
     */
    async update(
      organizationId: string,
      id: string,
      decide: (row: ByokRow, tx: DbTransaction) => Promise<CredentialPatch>,
    ): Promise<ByokRow | null> {
      return db.$transaction(async (tx) => {
        await lockCredential(tx, id);
        const row = await tx.byokCredential.findFirst({ where: { id, organizationId, deletedAt: null } });
        if (!row) return null;
        const p = await decide(row, tx);
        return tx.byokCredential.update({
          where: { id: row.id },
          data: {
            ...(p.name !== undefined ? { name: p.name } : {}),
            ...(p.allowedApiKeyHashes !== undefined ? { allowedApiKeyHashes: jsonList(p.allowedApiKeyHashes) } : {}),
            ...(p.allowedModels !== undefined ? { allowedModels: jsonList(p.allowedModels) } : {}),
            ...(p.allowedUserIds !== undefined ? { allowedUserIds: jsonList(p.allowedUserIds) } : {}),
            ...(p.declaredZdr !== undefined ? { declaredZdr: p.declaredZdr } : {}),
            ...(p.disabled !== undefined ? { disabled: p.disabled } : {}),
            ...(p.isRequired !== undefined ? { isRequired: p.isRequired } : {}),
            ...(p.isFallback !== undefined ? { isFallback: p.isFallback } : {}),
            ...(p.isByokOnly !== undefined ? { isByokOnly: p.isByokOnly } : {}),
            ...(p.weight !== undefined ? { weight: p.weight } : {}),
            ...(p.ciphertext !== undefined ? { ciphertext: Buffer.from(p.ciphertext), keyId: p.keyId!, label: p.label! } : {}),
            updatedAt: new Date(),
          },
        });
      });
    },

    /** Soft delete: wipes the key material (ciphertext and key id) and marks the row deleted. */
    async softDelete(organizationId: string, id: string): Promise<boolean> {
      const now = new Date();
      const res = await db.byokCredential.updateMany({
        where: { id, organizationId, deletedAt: null },
        data: { deletedAt: now, updatedAt: now, ciphertext: null, keyId: null },
      });
      return res.count > 0;
    },

  };
}

export type ByokRepository = ReturnType<typeof createByokRepository>;
