/**
 * API keys, workspaces, members and audit events: proto → public JSON, with the response schemas
 * the routes declare (and so the OpenAPI document). Every key is present; null where absent.
 */
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { AuditEvent } from "../../gen/portico/audit/v1/audit_event_pb.js";
import type { ApiKey } from "../../gen/portico/keys/v1/api_key_pb.js";
import type { Workspace, WorkspaceMember } from "../../gen/portico/workspaces/v1/workspace_pb.js";
import type { Intern } from "../../gen/portico/internadmin/v1/intern_pb.js";
import { pendingQuestionSchema, presentPendingQuestion, presentUsage, usageSchema } from "./intern-sessions.js";
import { isoOrNull, usdOrNull } from "../routes/limit-fields.js";

const iso = (t: Timestamp | undefined) => (t ? timestampDate(t).toISOString() : new Date(0).toISOString());

const str = (description: string) => ({ type: "string", description }) as const;
const nullableStr = (description: string) => ({ type: ["string", "null"], description }) as const;

export const apiKeySchema = {
  type: "object",
  required: [
    "hash", "name", "label", "disabled", "is_management_key", "workspace_id", "creator_user_id", "created_at", "updated_at",
    "limit", "limit_reset", "expires_at", "rate_limit_rpm", "rate_limit_tpm",
  ],
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
    limit: { type: ["number", "null"], description: "Spend limit in USD; null = none (docs/limits.md)." },
    limit_reset: str("daily, weekly, monthly (UTC) or none."),
    expires_at: nullableStr("ISO 8601 time after which the key answers 401; null = never."),
    rate_limit_rpm: { type: ["integer", "null"], description: "Chat requests per minute; null = unbounded." },
    rate_limit_tpm: { type: ["integer", "null"], description: "Tokens per minute; null = unbounded." },
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
    limit: usdOrNull(k.limitFemtoUsd),
    limit_reset: k.limitReset || "none",
    expires_at: isoOrNull(k.expiresAt),
    rate_limit_rpm: k.rateLimitRpm ?? null,
    rate_limit_tpm: k.rateLimitTpm ?? null,
  };
}

export const workspaceSchema = {
  type: "object",
  required: ["id", "name", "slug", "description", "is_default", "created_by", "created_at", "updated_at", "budget", "budget_reset", "rate_limit_rpm", "rate_limit_tpm", "response_cache_ttl_seconds", "content_log_retention_days"],
  properties: {
    budget: { type: ["number", "null"], description: "Spend budget in USD of the workspace's keys together; null = none (docs/limits.md)." },
    response_cache_ttl_seconds: { type: ["integer", "null"], description: "The response cache's time to live for requests that do not set `cache` (docs/operations.md); null = off." },
    content_log_retention_days: { type: ["integer", "null"], description: "Days the workspace's request and response bodies are kept, encrypted (docs/operations.md, \"Content logging\"); null = off." },
    budget_reset: str("daily, weekly, monthly (UTC) or none."),
    rate_limit_rpm: { type: ["integer", "null"], description: "Chat requests per minute, all keys together; null = unbounded." },
    rate_limit_tpm: { type: ["integer", "null"], description: "Tokens per minute, all keys together; null = unbounded." },
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
    budget: usdOrNull(w.budgetFemtoUsd),
    budget_reset: w.budgetReset || "none",
    rate_limit_rpm: w.rateLimitRpm ?? null,
    rate_limit_tpm: w.rateLimitTpm ?? null,
    response_cache_ttl_seconds: w.responseCacheTtlSeconds ?? null,
    content_log_retention_days: w.contentLogRetentionDays ?? null,
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

export const internSchema = {
  type: "object",
  required: [
    "id", "name", "description", "instructions", "model", "status", "progress", "last_failure_message", "hostname",
    "workspace_id", "vault_id", "attached_vault_id", "created_at", "updated_at", "host", "sessions",
  ],
  properties: {
    id: str("Intern id (UUID)."),
    name: str("2 to 17 characters: lowercase letters and digits in dash-separated groups, starting with a letter."),
    description: nullableStr("Description, or null."),
    instructions: nullableStr("Instructions handed to the agent at the start of every session, or null."),
    model: nullableStr("Model chosen for the intern (author/slug), or null for the agent's own default."),
    status: str("running (a host is attached), awaiting_host or stopped (suspended)."),
    progress: { type: "null", description: "Interns are provisioned by attaching a host: there is no provisioning progress." },
    last_failure_message: { type: "null", description: "Always null." },
    hostname: nullableStr("Core instance holding the host link while attached, else null."),
    workspace_id: str("Workspace of the intern."),
    vault_id: { type: "null", description: "Interns have no vault here." },
    attached_vault_id: { type: "null", description: "Interns have no vault here." },
    created_at: str("ISO 8601."),
    updated_at: str("ISO 8601."),
    host: {
      type: "object",
      required: ["attached", "instance", "agent", "attached_at", "reported_model", "has_token"],
      properties: {
        attached: { type: "boolean", description: "Whether a host is attached now." },
        instance: nullableStr("Core instance holding (or that last held) the link."),
        agent: nullableStr("Agent the host drives, as it reported it."),
        attached_at: nullableStr("When the current or last link was made (ISO 8601)."),
        reported_model: nullableStr("Model the agent last reported."),
        has_token: { type: "boolean", description: "Whether a host token is issued." },
      },
    },
    sessions: {
      type: "array",
      description: "Sessions whose run is streaming or paused (waiting for an answer).",
      items: {
        type: "object",
        required: ["session_id", "state", "run_id", "started_at", "pending_question"],
        properties: {
          session_id: str("Session id."),
          state: str("streaming or paused."),
          run_id: str("The run in progress."),
          started_at: str("ISO 8601."),
          pending_question: pendingQuestionSchema,
          usage: usageSchema(
            "The run's usage so far when its model calls go through Portico (the sum of its generations, as the session view gives it); " +
              "null when it has made none (an agent calling its provider directly reports usage only at the run's end).",
          ),
        },
      },
    },
    host_token: { type: "string", description: "Only when a host token was just issued: the token, shown once." },
  },
} as const;

export function presentIntern(i: Intern, hostToken?: string) {
  const host = i.host;
  return {
    id: i.id,
    name: i.name,
    description: i.description ?? null,
    instructions: i.instructions ?? null,
    model: i.model ?? null,
    status: i.status,
    progress: null,
    last_failure_message: null,
    hostname: host?.attached ? (host.instance ?? null) : null,
    workspace_id: i.workspaceId,
    vault_id: null,
    attached_vault_id: null,
    created_at: iso(i.createdAt),
    updated_at: iso(i.updatedAt),
    host: {
      attached: host?.attached ?? false,
      instance: host?.instance ?? null,
      agent: host?.agent ?? null,
      attached_at: host?.attachedAt ? iso(host.attachedAt) : null,
      reported_model: host?.reportedModel ?? null,
      has_token: host?.hasToken ?? false,
    },
    sessions: i.sessions.map((s) => ({
      session_id: s.sessionId,
      state: s.state,
      run_id: s.runId,
      started_at: iso(s.startedAt),
      pending_question: presentPendingQuestion(s.pendingQuestion),
      usage: presentUsage(s.usage),
    })),
    ...(hostToken !== undefined ? { host_token: hostToken } : {}),
  };
}
