/**
 * API keys of the actor's organization: list, create (plaintext returned once), rename, disable,
 * revoke. A key of another organization, or a revoked one, is not found. Every change is audited in
 * the same transaction; `onKeyChanged` lets a credential cache drop the key at once.
 */
import type { Db } from "../../db/client.js";
import type { ApiKey } from "../../db/prisma.js";
import { recordAudit, type Actor } from "../audit/audit-log.js";
import { invalidArgument, notFound } from "../errors.js";
import { generateApiKey, hashSecret, labelForSecret } from "../identity/keys.js";
import { checkName, isKeyHash } from "../management/rules.js";
import { checkPage, createOrdering, findArgs, pagedWhere, pageOf } from "../paging.js";
import { WORKSPACE_NOT_FOUND, lockActiveWorkspace, type WorkspacesService } from "../workspaces/workspaces-service.js";

export interface KeysServiceDeps {
  db: Db;
  workspaces: WorkspacesService;
  /** Called after a key was disabled, enabled or revoked (after the change is committed). */
  onKeyChanged?: (keyHash: string) => void | Promise<void>;
}

/** Oldest first. */
export const KEYS_ORDER = createOrdering("keys", [
  { field: "createdAt", dir: "asc", kind: "date" },
  { field: "id", dir: "asc", kind: "string" },
]);

export interface ListKeysQuery {
  offset: number;
  limit: number;
  startingAfter?: string | undefined;
  includeDisabled: boolean;
  workspaceId?: string | undefined;
}

export function createKeysService(deps: KeysServiceDeps) {
  const { db, workspaces } = deps;
  const changed = async (hash: string) => {
    await deps.onKeyChanged?.(hash);
  };

  const keyOf = async (actor: Actor, hash: string): Promise<ApiKey> => {
    const key = isKeyHash(hash) ? await db.apiKey.findFirst({ where: { hash, organizationId: actor.organizationId, revokedAt: null } }) : null;
    if (!key) throw notFound();
    return key;
  };

  return {
    async list(actor: Actor, q: ListKeysQuery) {
      const page = checkPage(q, KEYS_ORDER);
      const where: { organizationId: string; revokedAt: null; disabled?: boolean; workspaceId?: string } = {
        organizationId: actor.organizationId,
        revokedAt: null,
      };
      if (!q.includeDisabled) where.disabled = false;
      if (q.workspaceId !== undefined) where.workspaceId = (await workspaces.resolve(actor, q.workspaceId)).id;
      const [rows, total] = await db.$transaction([
        db.apiKey.findMany({ where: pagedWhere(where, KEYS_ORDER, page), ...findArgs(KEYS_ORDER, page) }),
        db.apiKey.count({ where }),
      ]);
      return { ...pageOf(rows, KEYS_ORDER, page), total };
    },

    get: keyOf,

    /** Creates a key for `creatorUserId` (the calling key's user over the API) and returns its plaintext once. */
    async create(actor: Actor, input: { name: string; workspaceId?: string | undefined; isManagement: boolean; creatorUserId: string }) {
      const name = checkName("name", input.name);
      const ws = await workspaces.resolve(actor, input.workspaceId);
      const member = await db.membership.findFirst({
        where: { organizationId: actor.organizationId, userId: input.creatorUserId, removedAt: null },
      });
      if (!member) throw invalidArgument("user", "the key's creator must be a member of the organization");
      const plaintext = generateApiKey();
      const record = await db.$transaction(async (tx) => {
        // The workspace may have been deleted since it was resolved: checked again under its lock.
        if (!(await lockActiveWorkspace(tx, ws.id))) throw invalidArgument("workspace_id", WORKSPACE_NOT_FOUND);
        const key = await tx.apiKey.create({
          data: {
            hash: hashSecret(plaintext),
            label: labelForSecret(plaintext),
            name,
            isManagement: input.isManagement,
            organizationId: actor.organizationId,
            workspaceId: ws.id,
            creatorUserId: input.creatorUserId,
          },
        });
        await recordAudit(tx, actor, {
          action: "key.create",
          targetType: "api_key",
          targetId: key.hash,
          workspaceId: ws.id,
          details: { name, label: key.label, is_management_key: key.isManagement },
        });
        return key;
      });
      return { record, plaintext };
    },

    async update(actor: Actor, hash: string, changes: { name?: string; disabled?: boolean }) {
      const key = await keyOf(actor, hash);
      const data: { name?: string; disabled?: boolean } = {};
      if (changes.name !== undefined) data.name = checkName("name", changes.name);
      if (changes.disabled !== undefined) data.disabled = changes.disabled;
      if (Object.keys(data).length === 0) return key;
      const updated = await db.$transaction(async (tx) => {
        const res = await tx.apiKey.updateMany({ where: { id: key.id, revokedAt: null }, data: { ...data, updatedAt: new Date() } });
        if (res.count === 0) throw notFound();
        await recordAudit(tx, actor, { action: "key.update", targetType: "api_key", targetId: key.hash, workspaceId: key.workspaceId, details: data });
        return (await tx.apiKey.findUnique({ where: { id: key.id } }))!;
      });
      if (data.disabled !== undefined) await changed(key.hash);
      return updated;
    },

    /** Revokes a key for good. */
    async revoke(actor: Actor, hash: string) {
      const key = await keyOf(actor, hash);
      await db.$transaction(async (tx) => {
        const res = await tx.apiKey.updateMany({ where: { id: key.id, revokedAt: null }, data: { revokedAt: new Date(), updatedAt: new Date() } });
        if (res.count === 0) throw notFound();
        await recordAudit(tx, actor, { action: "key.delete", targetType: "api_key", targetId: key.hash, workspaceId: key.workspaceId, details: { name: key.name } });
      });
      await changed(key.hash);
    },
  };
}

export type KeysService = ReturnType<typeof createKeysService>;
