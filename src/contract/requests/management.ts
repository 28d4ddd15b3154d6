/**
 * The management API's request bodies (keys, workspaces and their members, preset settings, interns),
 * defined once like the public ones. The gateway checks each body with its definition (an unknown
 * field is refused naming it: a change is never silently ignored), the OpenAPI body schemas are
 * derived from them, and the core checks the same fields of the RPCs (gRPC callers included) with the
 * same field definitions (`ManagementFields`, through `src/core/management/rules.ts`). Rules that need
 * the database or several fields at once (a slug already taken, 1 to 100 members across user_ids and
 * emails, an existing version) live in the core.
 */
import { array, boolean, closedObject, integer, nullable, number, oneOf, string } from "./kit.js";
import { MAX_RESPONSE_CACHE_TTL_SECONDS } from "./chat-request.js";

/** Workspace slugs: lowercase letters and digits in dash-separated groups. */
export const WORKSPACE_SLUG = /^[a-z0-9]+(-[a-z0-9]+)*$/;
/** Intern names: 2 to 17 characters, lowercase letters and digits in dash-separated groups, starting with a letter. */
export const INTERN_NAME = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;
/** An intern's model: author/slug, optionally :variant. */
export const INTERN_MODEL = /^[A-Za-z0-9~._:@+-]+\/[A-Za-z0-9~._:@+-]+$/;
export const PRESET_STATUSES = ["active", "disabled", "archived"] as const;
export const MAX_MEMBERS_PER_CALL = 100;

/** A display name: 1..max characters after trimming, no control characters. */
export function displayName(max = 255) {
  return string()
    .refine((v) => v.trim().length > 0, { error: () => `is required (1 to ${max} characters)`, abort: true })
    .refine((v) => [...v.trim()].length <= max, { error: () => `must be at most ${max} characters`, abort: true })
    // eslint-disable-next-line no-control-regex
    .refine((v) => !/[\u0000-\u001f\u007f]/.test(v.trim()), { error: () => "must not contain control characters", abort: true });
}

/** Free text such as a description: at most max characters, no NUL. */
export function freeText(max: number) {
  return string()
    .refine((v) => [...v].length <= max, { error: () => `must be at most ${max} characters`, abort: true })
    .refine((v) => !v.includes("\u0000"), { error: () => "must not contain NUL characters", abort: true });
}

const workspaceSlug = string().refine((v) => v.length >= 1 && v.length <= 64 && WORKSPACE_SLUG.test(v), {
  error: () => "must be 1 to 64 lowercase letters, digits and single dashes",
  abort: true,
});
const internName = string().refine((v) => v.length >= 2 && v.length <= 17 && INTERN_NAME.test(v), {
  error: () => "must be 2 to 17 lowercase letters and digits in dash-separated groups, starting with a letter",
  abort: true,
});
const internModel = string().refine((v) => v.length >= 1 && v.length <= 200 && INTERN_MODEL.test(v), {
  error: () => "must be author/slug (optionally :variant), 1 to 200 characters",
  abort: true,
});

/** Each field's rules; the core checks the RPC fields with these same definitions. */
export const ManagementFields = {
  name: displayName(255),
  description: freeText(2000),
  workspaceSlug,
  internName,
  internDescription: freeText(2000),
  internInstructions: freeText(100_000),
  internModel,
  presetStatus: oneOf(PRESET_STATUSES),
  designatedVersion: integer({ min: 1, max: 2_147_483_647 }),
};

const F = ManagementFields;
const nameField = F.name.meta({ description: "Display name, 1 to 255 characters." });
const userIds = array(string(), { max: MAX_MEMBERS_PER_CALL }).meta({ description: "Ids of users of the organization." });

/** When a limit's or budget's spend starts again from 0 (docs/limits.md). */
export const LIMIT_RESETS = ["daily", "weekly", "monthly", "none"] as const;
const resetField = (what: string) =>
  oneOf(LIMIT_RESETS).meta({ description: `When the ${what}'s spend starts again from 0 (UTC; weeks from Monday); default none.` });
const rateField = (description: string) => nullable(integer({ min: 1 })).meta({ description });

/** A key's spend limit, reset, expiry and rate bounds (docs/limits.md); the gateway converts them to the RPC's fields. */
const keyLimitFields = {
  limit: nullable(number({ min: 0 })).meta({ description: "Spend limit in USD; null = none. Requests whose largest possible cost does not fit answer 402." }),
  limit_reset: resetField("limit"),
  expires_at: nullable(string()).meta({ description: "ISO 8601 time after which the key answers 401; null = never. Must be in the future." }),
  rate_limit_rpm: rateField("Chat-completions requests per minute with this key; null = unbounded."),
  rate_limit_tpm: rateField("Tokens (prompt + completion) per minute with this key; null = unbounded."),
};

/** The longest content logging retention a workspace may set, in days (docs/operations.md, "Content logging"). */
export const MAX_CONTENT_LOG_RETENTION_DAYS = 3650;

/** A workspace's budget and rate bounds (docs/limits.md). */
const workspaceLimitFields = {
  budget: nullable(number({ min: 0 })).meta({ description: "Spend budget in USD of the workspace's keys together; null = none." }),
  budget_reset: resetField("budget"),
  rate_limit_rpm: rateField("Chat-completions requests per minute for the workspace's keys together; null = unbounded."),
  rate_limit_tpm: rateField("Tokens per minute for the workspace's keys together; null = unbounded."),
  response_cache_ttl_seconds: nullable(integer({ min: 1, max: MAX_RESPONSE_CACHE_TTL_SECONDS })).meta({
    description: "The response cache's time to live in seconds for the workspace's chat requests that do not set `cache` (docs/operations.md, \"Response cache\"); null = off.",
  }),
  content_log_retention_days: nullable(integer({ min: 1, max: MAX_CONTENT_LOG_RETENTION_DAYS })).meta({
    description: "Content logging (docs/operations.md, \"Content logging\"): keep the request and response bodies of the workspace's chat requests, encrypted, this many days; null = off (the default).",
  }),
};

export const CreateApiKeyRequest = closedObject(
  {
    name: nameField,
    workspace_id: string().meta({ description: "Workspace (UUID) of the organization; omitted = the default workspace." }),
    is_management_key: boolean().meta({ description: "Create a management key (default false)." }),
    ...keyLimitFields,
  },
  { required: ["name"] },
);

export const UpdateApiKeyRequest = closedObject({
  name: nameField,
  disabled: boolean().meta({ description: "true disables the key, false enables it." }),
  ...keyLimitFields,
}).meta({ description: "Omitted fields stay unchanged; any other field is refused naming it." });

const workspaceSlugField = F.workspaceSlug.meta({ description: "1 to 64 lowercase letters, digits and single dashes, unique in the organization." });

export const CreateWorkspaceRequest = closedObject(
  {
    name: nameField,
    slug: workspaceSlugField,
    description: F.description.meta({ description: "At most 2000 characters." }),
    ...workspaceLimitFields,
  },
  { required: ["name"] },
);

export const UpdateWorkspaceRequest = closedObject({
  name: nameField,
  slug: workspaceSlugField,
  description: nullable(F.description).meta({ description: "At most 2000 characters; null clears." }),
  ...workspaceLimitFields,
}).meta({ description: "Omitted fields stay unchanged." });

export const AddWorkspaceMembersRequest = closedObject({
  user_ids: userIds,
  emails: array(string(), { max: MAX_MEMBERS_PER_CALL }).meta({ description: "Email addresses; new users join the organization." }),
}).meta({ description: "1 to 100 users in all, by id or by email." });

export const RemoveWorkspaceMembersRequest = closedObject({ user_ids: userIds }, { required: ["user_ids"] });

export const UpdatePresetRequest = closedObject({
  name: F.name.meta({ description: "1 to 255 characters." }),
  description: nullable(F.description).meta({ description: "At most 2000 characters; null clears." }),
  designated_version: F.designatedVersion.meta({ description: "Number of an existing version to designate." }),
  status: F.presetStatus,
}).meta({ description: "Omitted fields stay unchanged." });

const internSettings = {
  name: F.internName.meta({ description: "2 to 17 characters: lowercase letters and digits in dash-separated groups, starting with a letter." }),
  description: nullable(F.internDescription).meta({ description: "At most 2000 characters." }),
  instructions: nullable(F.internInstructions).meta({
    description: "Handed to the agent at the start of every session; at most 100000 characters.",
  }),
  model: nullable(F.internModel).meta({ description: "author/slug (optionally :variant), 1 to 200 characters; null = the agent's default." }),
};

export const CreateInternRequest = closedObject(
  {
    ...internSettings,
    workspace_id: string().meta({ description: "Must be the API key's workspace." }),
    provision: boolean().meta({ description: "Accepted for compatibility: an intern is ready as soon as its host attaches." }),
  },
  { required: ["name"] },
);

export const UpdateInternRequest = closedObject(internSettings).meta({
  description: "Omitted fields stay unchanged; null clears. Other fields are refused.",
});

export const DeleteInternRequest = closedObject({
  acknowledge_workspace_loss: boolean().meta({ description: "Accepted for compatibility." }),
});

/** Operations that take no body: any field is refused, naming it. */
export const EmptyRequest = closedObject({}).meta({ description: "No body, or an empty object: any field is refused." });

const providerList = (description: string) => nullable(array(string({ min: 1, max: 100 }), { max: 100 })).meta({ description });

/** Account-wide routing settings of an organization or a workspace (docs/routing.md#account-wide-settings). */
export const UpdateRoutingSettingsRequest = closedObject({
  allowed_providers: providerList(
    "Providers (slugs or display names, case insensitive) that alone may serve the account's requests; intersected with a request's provider.only; null clears (any provider).",
  ),
  ignored_providers: providerList("Providers that never serve the account's requests; joined to a request's provider.ignore; null clears."),
  allowed_quantizations: nullable(array(string({ min: 1, max: 16 }), { max: 20 })).meta({
    description: "Quantizations (int4, int8, fp4, mxfp4, nvfp4, fp6, fp8, mxfp8, fp16, bf16, fp32, unknown) that alone may serve; null clears.",
  }),
  data_collection: oneOf(["allow", "deny"] as const).meta({ description: '"deny": only endpoints whose provider may not train on prompts, whatever a request says.' }),
  zdr: boolean().meta({ description: "true: only zero-data-retention endpoints, whatever a request says." }),
}).meta({ description: "Omitted fields stay unchanged. A request can narrow these settings, never loosen them." });
