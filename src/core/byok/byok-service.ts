/**
 * BYOK domain operations: validation, ownership checks, sealing and storage. Every operation needs a
 * management key. No operation here decrypts: the key goes in, only its label comes out.
 */
import { randomUUID } from "node:crypto";
import type { Caller } from "../auth.js";
import { requireManagement } from "../auth.js";
import { invalidArgument, notFound } from "../errors.js";
import type { ByokRepository, ByokRow, CredentialPatch } from "./byok-repository.js";
import { sealCredentialKey } from "./credential-crypto.js";
import type { Keyring } from "./keyring.js";
import { byokLabel } from "./label.js";
import {
  isLookupId,
  validateFlags,
  validateKey,
  validateKeyHashes,
  validateName,
  validateServedProvider,
  validateStringList,
  type ServesProvider,
} from "./validation.js";
import type { AuditRecorder } from "../audit/audit-log.js";
import { checkPage, type Page, type PageInput } from "../paging.js";
import { BYOK_ORDER } from "./byok-repository.js";

export interface CreateCredentialInput {
  key?: string | undefined;
  provider?: string | undefined;
  name?: string | null | undefined;
  workspaceId?: string | undefined;
  allowedApiKeyHashes: string[] | null;
  allowedModels: string[] | null;
  allowedUserIds: string[] | null;
  disabled: boolean;
  isRequired: boolean;
  isFallback: boolean;
  isByokOnly: boolean;
  declaredZdr: boolean | null;
  /** Load-balancing weight, 1 to {@link MAX_CREDENTIAL_WEIGHT}; absent: 1. */
  weight?: number | undefined;
}

/** Undefined = unchanged; null clears a nullable field. */
export interface UpdateCredentialInput {
  id: string;
  key?: string | undefined;
  name?: string | null | undefined;
  allowedApiKeyHashes?: string[] | null | undefined;
  allowedModels?: string[] | null | undefined;
  allowedUserIds?: string[] | null | undefined;
  disabled?: boolean | undefined;
  isRequired?: boolean | undefined;
  isFallback?: boolean | undefined;
  isByokOnly?: boolean | undefined;
  declaredZdr?: boolean | null | undefined;
  weight?: number | undefined;
}

export interface ListCredentialsInput extends PageInput {
  provider?: string | undefined;
  workspaceId?: string | undefined;
}

export interface ByokServiceDeps {
  repo: ByokRepository;
  keyring: Keyring;
  /** The providers requests can be routed to: a credential may name only these. */
  servesProvider: ServesProvider;
  /** Records each change in the audit log (never the key: only its masked label). */
  audit?: AuditRecorder;
}

/** What the audit log keeps of a credential: settings and the masked label, never key material. */
function auditDetails(row: ByokRow): Record<string, unknown> {
  return {
    provider: row.provider,
    name: row.name,
    label: row.label,
    disabled: row.disabled,
    is_required: row.isRequired,
    is_fallback: row.isFallback,
    is_byok_only: row.isByokOnly,
    weight: row.weight,
  };
}

/** The largest load-balancing weight of a credential (docs/routing.md, "Load balancing"). */
export const MAX_CREDENTIAL_WEIGHT = 1000;

/** A weight as given: an integer from 1 to {@link MAX_CREDENTIAL_WEIGHT}, else 400 naming `weight`. */
export function validateWeight(weight: number): number {
  if (!Number.isSafeInteger(weight) || weight < 1 || weight > MAX_CREDENTIAL_WEIGHT) {
    throw invalidArgument("weight", `weight must be an integer from 1 to ${MAX_CREDENTIAL_WEIGHT}`);
  }
  return weight;
}

export const CREDENTIAL_NOT_FOUND = "BYOK credential not found";
export const WORKSPACE_NOT_FOUND = "workspace_id does not name a workspace of this organization";
export const DEFAULT_WORKSPACE_DELETED =
  "The organization's default workspace was deleted; pass workspace_id to choose a workspace";
export const FOREIGN_KEY_HASH = "is not an API key of this account";

export function createByokService(deps: ByokServiceDeps) {
  const { repo, keyring } = deps;
  const audit = async (caller: Caller, action: string, row: ByokRow, extra: Record<string, unknown> = {}) =>
    deps.audit?.(caller, { action, targetType: "byok_credential", targetId: row.id, workspaceId: row.workspaceId, details: { ...auditDetails(row), ...extra } });

  const resolveWorkspace = async (caller: Caller, workspaceId: string | undefined): Promise<string> => {
    if (workspaceId !== undefined) {
      const ws = isLookupId(workspaceId) ? await repo.findWorkspace(caller.organizationId, workspaceId) : null;
      if (!ws) throw invalidArgument("workspace_id", WORKSPACE_NOT_FOUND);
      return ws.id;
    }
    const ws = await repo.defaultWorkspace(caller.organizationId);
    if (!ws) throw invalidArgument("workspace_id", DEFAULT_WORKSPACE_DELETED);
    return ws.id;
  };

  /** Foreign and made-up hashes get the same message: nothing tells whether a hash exists elsewhere. */
  const checkHashesOwned = async (caller: Caller, hashes: string[] | null) => {
    if (hashes === null) return;
    const owned = await repo.ownedKeyHashes(caller.organizationId, hashes);
    const i = hashes.findIndex((h) => !owned.has(h));
    if (i >= 0) throw invalidArgument("allowed_api_key_hashes", `allowed_api_key_hashes[${i}] ${FOREIGN_KEY_HASH}`);
  };

  return {
    async create(caller: Caller, input: CreateCredentialInput): Promise<ByokRow> {
      requireManagement(caller);
      const key = validateKey(input.key);
      const provider = validateServedProvider(input.provider, deps.servesProvider);
      const name = validateName(input.name);
      const allowedApiKeyHashes = validateKeyHashes(input.allowedApiKeyHashes);
      const allowedModels = validateStringList("allowed_models", input.allowedModels);
      const allowedUserIds = validateStringList("allowed_user_ids", input.allowedUserIds);
      validateFlags(input);
      const workspaceId = await resolveWorkspace(caller, input.workspaceId);
      await checkHashesOwned(caller, allowedApiKeyHashes);
      const id = randomUUID();
      const sealed = sealCredentialKey(keyring, { id, workspaceId, provider }, key);
      const created = await repo.create({
        id,
        organizationId: caller.organizationId,
        workspaceId,
        provider,
        label: byokLabel(key),
        keyId: sealed.keyId,
        ciphertext: sealed.ciphertext,
        name,
        allowedApiKeyHashes,
        allowedModels,
        allowedUserIds,
        declaredZdr: input.declaredZdr,
        disabled: input.disabled,
        isRequired: input.isRequired,
        isFallback: input.isFallback,
        isByokOnly: input.isByokOnly,
        weight: input.weight === undefined ? 1 : validateWeight(input.weight),
      });
      await audit(caller, "byok.create", created);
      return created;
    },

    async list(caller: Caller, input: ListCredentialsInput): Promise<Page<ByokRow> & { total: number }> {
      requireManagement(caller);
      const page = checkPage(input, BYOK_ORDER);
      if (input.provider !== undefined) validateServedProvider(input.provider, deps.servesProvider);
      const workspaceId = await resolveWorkspace(caller, input.workspaceId);
      return repo.list({ organizationId: caller.organizationId, workspaceId, provider: input.provider }, page);
    },

    async get(caller: Caller, id: string): Promise<ByokRow> {
      requireManagement(caller);
      const row = isLookupId(id) ? await repo.get(caller.organizationId, id) : null;
      if (!row) throw notFound(CREDENTIAL_NOT_FOUND);
      return row;
    },

    async update(caller: Caller, input: UpdateCredentialInput): Promise<ByokRow> {
      requireManagement(caller);
      // Shape checks first (no database needed), ownership and flag combination under the row lock.
      const key = input.key === undefined ? undefined : validateKey(input.key);
      const patch: CredentialPatch = {};
      if (input.name !== undefined) patch.name = validateName(input.name);
      if (input.allowedApiKeyHashes !== undefined) patch.allowedApiKeyHashes = validateKeyHashes(input.allowedApiKeyHashes);
      if (input.allowedModels !== undefined) patch.allowedModels = validateStringList("allowed_models", input.allowedModels);
      if (input.allowedUserIds !== undefined) patch.allowedUserIds = validateStringList("allowed_user_ids", input.allowedUserIds);
      if (input.declaredZdr !== undefined) patch.declaredZdr = input.declaredZdr;
      if (input.disabled !== undefined) patch.disabled = input.disabled;
      if (input.isRequired !== undefined) patch.isRequired = input.isRequired;
      if (input.isFallback !== undefined) patch.isFallback = input.isFallback;
      if (input.isByokOnly !== undefined) patch.isByokOnly = input.isByokOnly;
      if (input.weight !== undefined) patch.weight = validateWeight(input.weight);
      if (isLookupId(input.id)) await checkHashesOwned(caller, patch.allowedApiKeyHashes ?? null);
      const row = isLookupId(input.id)
        ? await repo.update(caller.organizationId, input.id, async (current) => {
            validateFlags({
              isRequired: patch.isRequired ?? current.isRequired,
              isFallback: patch.isFallback ?? current.isFallback,
              isByokOnly: patch.isByokOnly ?? current.isByokOnly,
            });
            if (key !== undefined) {
              const sealed = sealCredentialKey(keyring, current, key);
              patch.ciphertext = sealed.ciphertext;
              patch.keyId = sealed.keyId;
              patch.label = byokLabel(key);
            }
            return patch;
          })
        : null;
      if (!row) throw notFound(CREDENTIAL_NOT_FOUND);
      await audit(caller, "byok.update", row, { key_rotated: key !== undefined });
      return row;
    },

    async delete(caller: Caller, id: string): Promise<void> {
      requireManagement(caller);
      const deleted = isLookupId(id) ? await repo.softDelete(caller.organizationId, id) : false;
      if (!deleted) throw notFound(CREDENTIAL_NOT_FOUND);
      await deps.audit?.(caller, { action: "byok.delete", targetType: "byok_credential", targetId: id });
    },
  };
}

export type ByokService = ReturnType<typeof createByokService>;
