/**
 * API keys, workspaces, members and audit events: proto → public JSON, with the response schemas
 * the routes declare (and so the OpenAPI document). Every key is present; null where absent.
 */
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { AuditEvent } from "../../gen/portico/audit/v1/audit_event_pb.js";
import type { ApiKey } from "../../gen/portico/keys/v1/api_key_pb.js";
import type { Workspace, WorkspaceMember } from "../../gen/portico/workspaces/v1/workspace_pb.js";

const iso = (t: Timestamp | undefined) => (t ? timestampDate(t).toISOString() : new Date(0).toISOString());

const str = (description: string) => ({ type: "string", description }) as const;
const nullableStr = (description: string) => ({ type: ["string", "null"], description }) as const;

export const apiKeySchema = {
  type: "object",
  required: ["hash", "name", "label", "disabled", "is_management_key", "workspace_id", "creator_user_id", "created_at", "updated_at"],
  properties: {
    hash: str("SHA-256 of the key, 64 lowercase hex characters; the key's identifier."),
    name: str("Display name."),
    label: str("Masked key: prefix, three characters, '...', last four."),
    disabled: { type: "boolean", description: "A disabled key is refused (401) until enabled again." },
    is_management_key: { type: "boolean" },
    workspace_id: str("Workspace the key belongs to."),
    creator_user_id: str("User who created the key."),
    created_at: str("ISO 8601."),
    updated_at: str("ISO 8601."),
  },
} as const;

export function presentApiKey(k: ApiKey) {
  return {
    hash: k.hash,
    name: k.name,
    label: k.label,
    disabled: k.disabled,
    is_management_key: k.isManagementKey,
    workspace_id: k.workspaceId,
    creator_user_id: k.creatorUserId,
    created_at: iso(k.createdAt),
    updated_at: iso(k.updatedAt),
  };
}

export const workspaceSchema = {
  type: "object",
  required: ["id", "name", "slug", "description", "is_default", "created_by", "created_at", "updated_at"],
  properties: {
    id: str("Workspace id (UUID)."),
    name: str("Display name."),
    slug: str("Unique within the organization."),
    description: nullableStr("Description, or null."),
    is_default: { type: "boolean", description: "Keys and BYOK credentials created without workspace_id land here." },
    created_by: nullableStr("User who created the workspace; null for the one first-run setup made."),
    created_at: str("ISO 8601."),
    updated_at: str("ISO 8601."),
  },
} as const;

export function presentWorkspace(w: Workspace) {
  return {
    id: w.id,
    name: w.name,
    slug: w.slug,
    description: w.description ?? null,
    is_default: w.isDefault,
    created_by: w.createdBy ?? null,
    created_at: iso(w.createdAt),
    updated_at: iso(w.updatedAt),
  };
}

export const workspaceMemberSchema = {
  type: "object",
  required: ["user_id", "email", "name", "role", "created_at"],
  properties: {
    user_id: str("User id."),
    email: str("Email address."),
    name: str("Display name."),
    role: str("Role in the workspace."),
    created_at: str("When the user joined the workspace (ISO 8601)."),
  },
} as const;

export function presentWorkspaceMember(m: WorkspaceMember) {
  return { user_id: m.userId, email: m.email, name: m.name, role: m.role, created_at: iso(m.createdAt) };
}

export const auditEventSchema = {
  type: "object",
  required: ["id", "action", "target_type", "target_id", "workspace_id", "actor", "details", "created_at"],
  properties: {
    id: str("Event id."),
    action: str("Dotted verb, for example key.create."),
    target_type: str("Kind of the changed resource, for example api_key."),
    target_id: str("The changed resource (a key's hash, a workspace's id, …)."),
    workspace_id: nullableStr("Workspace the change concerns, or null."),
    actor: {
      type: "object",
      required: ["type", "key_hash", "key_label", "user_id"],
      properties: {
        type: str("api_key (a management key) or cli (portico admin on the server)."),
        key_hash: nullableStr("Hash of the management key used; null for cli."),
        key_label: nullableStr("Masked label of the management key used; null for cli."),
        user_id: nullableStr("The key's creator; null for cli."),
      },
    },
    details: { type: "object", additionalProperties: true, description: "New values of the changed fields; never a secret." },
    created_at: str("ISO 8601."),
  },
} as const;

export function presentAuditEvent(e: AuditEvent) {
  return {
    id: e.id,
    action: e.action,
    target_type: e.targetType,
    target_id: e.targetId,
    workspace_id: e.workspaceId ?? null,
    actor: {
      type: e.actor?.type ?? "",
      key_hash: e.actor?.keyHash ?? null,
      key_label: e.actor?.keyLabel ?? null,
      user_id: e.actor?.userId ?? null,
    },
    details: e.details ?? {},
    created_at: iso(e.createdAt),
  };
}
