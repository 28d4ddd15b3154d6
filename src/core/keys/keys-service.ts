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
import type { DbTransaction } from "../../db/prisma.js";
import { checkExpiry, checkRate, checkReset, checkSpendLimit } from "../spend/limit-rules.js";
import { keyCostSince } from "../spend/key-spend-windows.js";
import { keyCounterId, type SpendStore } from "../spend/spend-store.js";
import type { LimitReset } from "../spend/windows.js";

/** A key's limits as the management API sets them (docs/limits.md); each absent field is left as it is. */
export interface KeyLimitChanges {
  limitFemtoUsd?: bigint | null;
  limitReset?: string;
  expiresAt?: Date | null;
  rateLimitRpm?: number | null;
  rateLimitTpm?: number | null;
}

type KeyLimitData = { limitFemtoUsd?: bigint | null; limitReset?: LimitReset; expiresAt?: Date | null; rateLimitRpm?: number | null; rateLimitTpm?: number | null };

function checkKeyLimits(c: KeyLimitChanges): KeyLimitData {
  const data: KeyLimitData = {};
  if (c.limitFemtoUsd !== undefined) data.limitFemtoUsd = checkSpendLimit("limit", c.limitFemtoUsd);
  if (c.limitReset !== undefined) data.limitReset = checkReset("limit_reset", c.limitReset);
  if (c.expiresAt !== undefined) data.expiresAt = checkExpiry("expires_at", c.expiresAt);
  if (c.rateLimitRpm !== undefined) data.rateLimitRpm = checkRate("rate_limit_rpm", c.rateLimitRpm);
  if (c.rateLimitTpm !== undefined) data.rateLimitTpm = checkRate("rate_limit_tpm", c.rateLimitTpm);
  return data;
}

/** Audit details of limit changes: USD as decimal strings, times as ISO. */
function limitAudit(d: KeyLimitData): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (d.limitFemtoUsd !== undefined) out.limit_femto_usd = d.limitFemtoUsd === null ? null : d.limitFemtoUsd.toString();
  if (d.limitReset !== undefined) out.limit_reset = d.limitReset;
  if (d.expiresAt !== undefined) out.expires_at = d.expiresAt === null ? null : d.expiresAt.toISOString();
  if (d.rateLimitRpm !== undefined) out.rate_limit_rpm = d.rateLimitRpm;
  if (d.rateLimitTpm !== undefined) out.rate_limit_tpm = d.rateLimitTpm;
  return out;
}

export interface KeysServiceDeps {
  db: Db;
  workspaces: WorkspacesService;
  /** Spend counters: a key's limit is copied onto its counter in the transaction that sets it. */
  spend?: SpendStore;
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

  /**
   * Copies the key's limit onto its spend counter (in `tx`), counting its spend of the current window so far from
   * the key's spend counters per window (key-spend-windows.ts; the key's generations are in its organization).
   */
  const syncCounter = async (tx: DbTransaction, key: ApiKey) => {
    if (!deps.spend) return;
    const reset = key.limitReset as LimitReset;
    await deps.spend.setLimit(tx, keyCounterId(key.id), key.limitFemtoUsd, reset, (since) =>
      keyCostSince(tx, { organizationId: key.organizationId, keyHash: key.hash }, reset, since),
    );
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
    async create(actor: Actor, input: { name: string; workspaceId?: string | undefined; isManagement: boolean; creatorUserId: string; limits?: KeyLimitChanges }) {
      const name = checkName("name", input.name);
      const limits = checkKeyLimits(input.limits ?? {});
      if (limits.limitReset !== undefined && limits.limitReset !== "none" && limits.limitFemtoUsd == null) {
        throw invalidArgument("limit_reset", "limit_reset needs a limit");
      }
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
            ...limits,
          },
        });
        if (key.limitFemtoUsd !== null) await syncCounter(tx, key);
        await recordAudit(tx, actor, {
          action: "key.create",
          targetType: "api_key",
          targetId: key.hash,
          workspaceId: ws.id,
          details: { name, label: key.label, is_management_key: key.isManagement, ...limitAudit(limits) },
        });
        return key;
      });
      return { record, plaintext };
    },

    async update(actor: Actor, hash: string, changes: { name?: string; disabled?: boolean } & KeyLimitChanges) {
      const key = await keyOf(actor, hash);
      const data: { name?: string; disabled?: boolean } = {};
      if (changes.name !== undefined) data.name = checkName("name", changes.name);
      if (changes.disabled !== undefined) data.disabled = changes.disabled;
      const limits = checkKeyLimits(changes);
      if (Object.keys(data).length === 0 && Object.keys(limits).length === 0) return key;
      if (limits.limitFemtoUsd !== undefined || limits.limitReset !== undefined) await deps.spend?.beforeLimitChange();
      const updated = await db.$transaction(async (tx) => {
        const res = await tx.apiKey.updateMany({ where: { id: key.id, revokedAt: null }, data: { ...data, ...limits, updatedAt: new Date() } });
        if (res.count === 0) throw notFound();
        const row = (await tx.apiKey.findUnique({ where: { id: key.id } }))!;
        if (row.limitReset !== "none" && row.limitFemtoUsd === null && limits.limitReset !== undefined) {
          throw invalidArgument("limit_reset", "limit_reset needs a limit");
        }
        if (limits.limitFemtoUsd !== undefined || limits.limitReset !== undefined) await syncCounter(tx, row);
        await recordAudit(tx, actor, { action: "key.update", targetType: "api_key", targetId: key.hash, workspaceId: key.workspaceId, details: { ...data, ...limitAudit(limits) } });
        return row;
      });
      if (data.disabled !== undefined || Object.keys(limits).length > 0) await changed(key.hash);
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
