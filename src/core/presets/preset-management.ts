/**
 * Preset management: rename, describe, choose the designated version, change the status
 * (active, disabled, archived). One conditional transaction per change, audited with it.
 */
import type { Db } from "../../db/client.js";
import type { Preset, PresetVersion } from "../../db/prisma.js";
import { recordAudit, type Actor } from "../audit/audit-log.js";
import { invalidArgument, notFound } from "../errors.js";
import { ManagementFields } from "../../contract/requests/management.js";
import { checkField, checkName, checkText } from "../management/rules.js";

export { PRESET_STATUSES } from "../../contract/requests/management.js";

export interface PresetChanges {
  name?: string;
  description?: string | null;
  designatedVersion?: number;
  status?: string;
}

export function createPresetManagement(db: Db) {
  return {
    async update(actor: Actor, preset: Preset, changes: PresetChanges): Promise<{ preset: Preset; version: PresetVersion | null }> {
      const data: { name?: string; description?: string | null; status?: string; statusUpdatedAt?: Date; designatedVersionId?: string } = {};
      const details: Record<string, unknown> = {};
      if (changes.name !== undefined) data.name = details.name = checkName("name", changes.name);
      if (changes.description !== undefined) {
        data.description = details.description =
          changes.description === null ? null : checkText("description", changes.description, 2000);
      }
      if (changes.status !== undefined) {
        checkField(ManagementFields.presetStatus, "status", changes.status);
        details.status = changes.status;
        if (changes.status !== preset.status) {
          data.status = changes.status;
          data.statusUpdatedAt = new Date();
        }
      }
      if (changes.designatedVersion !== undefined) {
        const n = changes.designatedVersion;
        const version = Number.isInteger(n) && n >= 1
          ? await db.presetVersion.findUnique({ where: { presetId_version: { presetId: preset.id, version: n } } })
          : null;
        if (!version) throw invalidArgument("designated_version", "designated_version must be the number of an existing version of this preset");
        data.designatedVersionId = version.id;
        details.designated_version = n;
      }
      if (Object.keys(details).length === 0) {
        const version = preset.designatedVersionId ? await db.presetVersion.findUnique({ where: { id: preset.designatedVersionId } }) : null;
        return { preset, version };
      }
      return db.$transaction(async (tx) => {
        const res = await tx.preset.updateMany({ where: { id: preset.id }, data: { ...data, updatedAt: new Date() } });
        if (res.count === 0) throw notFound();
        await recordAudit(tx, actor, { action: "preset.update", targetType: "preset", targetId: preset.id, workspaceId: preset.workspaceId, details: { slug: preset.slug, ...details } });
        const updated = (await tx.preset.findUnique({ where: { id: preset.id } }))!;
        const version = updated.designatedVersionId ? await tx.presetVersion.findUnique({ where: { id: updated.designatedVersionId } }) : null;
        return { preset: updated, version };
      });
    },
  };
}

export type PresetManagement = ReturnType<typeof createPresetManagement>;
