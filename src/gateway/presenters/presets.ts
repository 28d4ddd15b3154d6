/**
 * Pure proto → public JSON for presets (API fact sheet §1.2–1.4): every key always present, null
 * where the public schema allows null, ISO 8601 timestamps, config as stored.
 */
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { Preset, PresetVersion } from "../../gen/portico/presets/v1/preset_pb.js";

export interface PublicPreset {
  id: string;
  slug: string;
  name: string;
  description: string | null;
  status: string;
  status_updated_at: string | null;
  created_at: string;
  updated_at: string;
  creator_user_id: string | null;
  workspace_id: string | null;
  designated_version_id: string | null;
}

export interface PublicPresetVersion {
  id: string;
  preset_id: string;
  version: number;
  config: Record<string, unknown>;
  system_prompt: string | null;
  creator_id: string;
  created_at: string;
  updated_at: string;
}

export type PublicPresetWithVersion = PublicPreset & { designated_version: PublicPresetVersion | null };

function iso(ts: Timestamp | undefined): string | null {
  return ts ? timestampDate(ts).toISOString() : null;
}

export function presentPreset(p: Preset | undefined): PublicPreset {
  if (!p) throw new Error("core returned no preset");
  return {
    id: p.id,
    slug: p.slug,
    name: p.name,
    description: p.description ?? null,
    status: p.status,
    status_updated_at: iso(p.statusUpdatedAt),
    created_at: iso(p.createdAt) ?? "",
    updated_at: iso(p.updatedAt) ?? "",
    creator_user_id: p.creatorUserId ?? null,
    workspace_id: p.workspaceId ?? null,
    designated_version_id: p.designatedVersionId ?? null,
  };
}

export function presentPresetVersion(v: PresetVersion): PublicPresetVersion {
  return {
    id: v.id,
    preset_id: v.presetId,
    version: v.version,
    config: v.config ?? {},
    system_prompt: v.systemPrompt ?? null,
    creator_id: v.creatorId,
    created_at: iso(v.createdAt) ?? "",
    updated_at: iso(v.updatedAt) ?? "",
  };
}

export function presentPresetWithVersion(p: Preset | undefined, v: PresetVersion | undefined): PublicPresetWithVersion {
  return { ...presentPreset(p), designated_version: v ? presentPresetVersion(v) : null };
}

const nullableString = { type: ["string", "null"] } as const;
const timestamp = { type: "string", format: "date-time" } as const;

/** Response schema of a Preset (list item). */
export const presetSchema = {
  type: "object",
  required: [
    "id", "slug", "name", "description", "status", "status_updated_at", "created_at", "updated_at",
    "creator_user_id", "workspace_id", "designated_version_id",
  ],
  properties: {
    id: { type: "string", description: "Preset identifier (UUID)." },
    slug: { type: "string", description: "URL-safe slug, unique within the workspace." },
    name: { type: "string", description: "Display name; equals the slug." },
    description: { ...nullableString, description: "Description, or null." },
    status: { type: "string", description: "active, disabled or archived." },
    status_updated_at: { type: ["string", "null"], format: "date-time", description: "When the status last changed, or null." },
    created_at: timestamp,
    updated_at: timestamp,
    creator_user_id: { ...nullableString, description: "User who created the preset." },
    workspace_id: { ...nullableString, description: "Workspace that owns the preset (UUID)." },
    designated_version_id: { ...nullableString, description: "Id of the designated version." },
  },
} as const;

/** Response schema of a PresetVersion. */
export const presetVersionSchema = {
  type: "object",
  required: ["id", "preset_id", "version", "config", "system_prompt", "creator_id", "created_at", "updated_at"],
  properties: {
    id: { type: "string", description: "Version identifier (UUID)." },
    preset_id: { type: "string", description: "The owning preset (UUID)." },
    version: { type: "integer", description: "Version number, 1 for the first version." },
    config: {
      type: "object",
      additionalProperties: true,
      description: "The persisted request fields, keys and values exactly as sent.",
    },
    system_prompt: { ...nullableString, description: "System prompt taken from the request's messages, or null." },
    creator_id: { type: "string", description: "User who created the version." },
    created_at: timestamp,
    updated_at: timestamp,
  },
} as const;

/** Response schema of a Preset with its designated version. */
export const presetWithVersionSchema = {
  type: "object",
  required: [...presetSchema.required, "designated_version"],
  properties: {
    ...presetSchema.properties,
    designated_version: {
      ...presetVersionSchema,
      type: ["object", "null"],
      description: "The designated version, or null.",
    },
  },
} as const;
