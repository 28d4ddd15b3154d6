/**
 * First-run setup: one organization in the interns programme, an admin user, the default workspace,
 * a management key and an ordinary key. Idempotent: a second run finds the same records and creates
 * keys only where the named bootstrap keys are missing (plaintext is printed only when created).
 */
import type { Db } from "../../db/client.js";
import { createIdentityRepository } from "./identity-repository.js";

export const BOOTSTRAP_ADMIN_EMAIL = "admin@portico.local";
const MANAGEMENT_KEY_NAME = "bootstrap-management";
const ORDINARY_KEY_NAME = "bootstrap-default";

export interface BootstrapResult {
  organization_id: string;
  workspace_id: string;
  user_id: string;
  management_key: string | null;
  api_key: string | null;
  management_key_hash: string;
  api_key_hash: string;
  created: boolean;
  [extra: string]: unknown;
}

/** Extra first-run steps contributed by other domains (for example the built-in intern). */
export type BootstrapExtension = (db: Db, result: BootstrapResult) => Promise<Record<string, unknown>>;

export async function bootstrap(db: Db, extensions: BootstrapExtension[] = []): Promise<BootstrapResult> {
  const repo = createIdentityRepository(db);
  const user = await repo.findOrCreateUser({ email: BOOTSTRAP_ADMIN_EMAIL, name: "Portico admin" });
  let membership = await db.membership.findFirst({
    where: { userId: user.id, role: "admin" },
    orderBy: { createdAt: "asc" },
  });
  let created = false;
  if (!membership) {
    const org = await repo.createOrganization({ name: "Portico", internsProgramme: true });
    membership = await repo.addMember(org.id, user.id, "admin");
    created = true;
  } else if (membership.removedAt) {
    membership = await repo.addMember(membership.organizationId, user.id, "admin");
  }
  const organizationId = membership.organizationId;
  await repo.setInternsProgramme(organizationId, true);
  let workspace = await db.workspace.findFirst({ where: { organizationId, isDefault: true, deletedAt: null } });
  if (!workspace) {
    workspace = await db.workspace.findFirst({ where: { organizationId, slug: "default" } });
    workspace = workspace
      ? await db.workspace.update({ where: { id: workspace.id }, data: { deletedAt: null, isDefault: true } })
      : await repo.createWorkspace({ organizationId, name: "Default", slug: "default", isDefault: true });
  }
  const ensureKey = async (name: string, isManagement: boolean) => {
    const existing = await db.apiKey.findFirst({ where: { organizationId, name, revokedAt: null, disabled: false } });
    if (existing) return { hash: existing.hash, plaintext: null as string | null };
    const { record, plaintext } = await repo.createApiKey({
      organizationId,
      workspaceId: workspace.id,
      creatorUserId: user.id,
      name,
      isManagement,
    });
    created = true;
    return { hash: record.hash, plaintext: plaintext as string | null };
  };
  const management = await ensureKey(MANAGEMENT_KEY_NAME, true);
  const ordinary = await ensureKey(ORDINARY_KEY_NAME, false);
  const result: BootstrapResult = {
    organization_id: organizationId,
    workspace_id: workspace.id,
    user_id: user.id,
    management_key: management.plaintext,
    api_key: ordinary.plaintext,
    management_key_hash: management.hash,
    api_key_hash: ordinary.hash,
    created,
  };
  for (const extend of extensions) Object.assign(result, await extend(db, result));
  return result;
}
