/**
 * BYOK credential: proto → public JSON. Exactly the description's fields plus `declared_zdr`. `name` is
 * "string or absent" (the key is left out when no name was given); every other key is present (null
 * where the value is absent), so strict clients such as @openrouter/sdk accept it.
 */
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { ByokCredential, StringList } from "../../gen/portico/byok/v1/byok_credential_pb.js";

export interface PublicByokCredential {
  id: string;
  name?: string;
  provider: string;
  label: string;
  workspace_id: string;
  allowed_api_key_hashes: string[] | null;
  allowed_models: string[] | null;
  allowed_user_ids: string[] | null;
  declared_zdr: boolean | null;
  disabled: boolean;
  is_required: boolean;
  is_fallback: boolean;
  is_byok_only: boolean;
  sort_order: number;
  weight: number;
  created_at: string;
}

function list(value: StringList | undefined): string[] | null {
  return value ? [...value.values] : null;
}

export function presentByokCredential(c: ByokCredential): PublicByokCredential {
  return {
    id: c.id,
    ...(c.name !== undefined ? { name: c.name } : {}),
    provider: c.provider,
    label: c.label,
    workspace_id: c.workspaceId,
    allowed_api_key_hashes: list(c.allowedApiKeyHashes),
    allowed_models: list(c.allowedModels),
    allowed_user_ids: list(c.allowedUserIds),
    declared_zdr: c.declaredZdr ?? null,
    disabled: c.disabled,
    is_required: c.isRequired,
    is_fallback: c.isFallback,
    is_byok_only: c.isByokOnly,
    sort_order: c.sortOrder,
    weight: c.weight,
    created_at: c.createdAt ? timestampDate(c.createdAt).toISOString() : new Date(0).toISOString(),
  };
}

const nullableStrings = { type: ["array", "null"], items: { type: "string" } } as const;

/** Response schema of one credential (lists every property; fast-json-stringify drops unknown keys). */
export const byokCredentialSchema = {
  type: "object",
  required: [
    "id",
    "provider",
    "label",
    "workspace_id",
    "allowed_api_key_hashes",
    "allowed_models",
    "allowed_user_ids",
    "declared_zdr",
    "disabled",
    "is_required",
    "is_fallback",
    "is_byok_only",
    "sort_order",
    "weight",
    "created_at",
  ],
  properties: {
    id: { type: "string", format: "uuid" },
    name: { type: "string", description: "Absent when the credential was stored without a name." },
    provider: { type: "string", description: "Provider slug." },
    label: { type: "string", description: "Masked rendering of the key; the key itself is never returned." },
    workspace_id: { type: "string", format: "uuid" },
    allowed_api_key_hashes: { ...nullableStrings, description: "null = no restriction." },
    allowed_models: { ...nullableStrings, description: "null = no restriction." },
    allowed_user_ids: { ...nullableStrings, description: "null = no restriction." },
    declared_zdr: { type: ["boolean", "null"] },
    disabled: { type: "boolean" },
    is_required: { type: "boolean" },
    is_fallback: { type: "boolean" },
    is_byok_only: { type: "boolean" },
    sort_order: { type: "integer" },
    weight: { type: "integer", minimum: 1 },
    created_at: { type: "string", format: "date-time" },
  },
} as const;
