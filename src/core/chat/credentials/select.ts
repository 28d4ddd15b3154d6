/**
 * Which credentials a chat-completions request may use for one (provider, model), in the order they are
 * tried: the rules of the BYOK flags as the API description defines them. Pure: the loader hands it the
 * organization's credentials and the operator's shared credentials for the provider.
 *
 * 1. A credential is skipped when `disabled`, or when the request is outside its restrictions:
 *    `allowed_models` (exact model slug, or `<vendor>/*`), `allowed_api_key_hashes` (the calling key),
 *    `allowed_user_ids` (the calling key's user). null = no restriction. A skipped credential has no
 *    effect at all, its flags included (a key it is not granted to does not see it).
 * 2. Order: non-fallback credentials by `sort_order` (then creation time, then id), then the shared
 *    credentials (the operator's, in their order), then `is_fallback` credentials by `sort_order`.
 * 3. Shared credentials are removed when a credential that admits the caller (key and user) is
 *    `is_required` (for every model of its provider, inside or outside its `allowed_models`), or
 *    `is_byok_only` and applies to the model (its `allowed_models`, or every model when null).
 */

export interface CredentialRecord {
  id: string;
  provider: string;
  disabled: boolean;
  allowedModels: readonly string[] | null;
  allowedApiKeyHashes: readonly string[] | null;
  allowedUserIds: readonly string[] | null;
  isRequired: boolean;
  isFallback: boolean;
  isByokOnly: boolean;
  sortOrder: number;
  createdAt: Date;
  /**
   * `declared_zdr`: true = the customer declares its provider account zero-data-retention (requests with
   * `provider.zdr` may use it on any endpoint of its provider); false = never used for such requests; null or
   * absent = the endpoint's own terms decide (docs/routing.md).
   */
  declaredZdr?: boolean | null;
}

export interface SharedCredentialRecord {
  id: string;
  provider: string;
}

export interface SelectionRequest {
  provider: string;
  /** The model slug as requested, e.g. `anthropic/claude-sonnet-4`. */
  model: string;
  /** Other ids of the same model that `allowed_models` may name (a catalog endpoint's `<provider>/<provider model id>`). */
  aliases?: readonly string[];
  keyHash: string;
  userId: string;
}

export interface SelectedCredential {
  id: string;
  source: "byok" | "shared";
}

/** `allowed_models` entry matches: the exact slug, or `<vendor>/*` for every model of that vendor. */
export function modelMatches(pattern: string, model: string): boolean {
  if (pattern.endsWith("/*")) return model.startsWith(pattern.slice(0, -1));
  return pattern === model;
}

const admitsModel = (c: CredentialRecord, model: string, aliases?: readonly string[]) =>
  c.allowedModels === null || c.allowedModels.some((p) => modelMatches(p, model) || (aliases !== undefined && aliases.some((a) => modelMatches(p, a))));
const admitsCaller = (c: CredentialRecord, req: SelectionRequest) =>
  (c.allowedApiKeyHashes === null || c.allowedApiKeyHashes.includes(req.keyHash)) &&
  (c.allowedUserIds === null || c.allowedUserIds.includes(req.userId));

function byOrder(a: CredentialRecord, b: CredentialRecord): number {
  return a.sortOrder - b.sortOrder || a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

export function selectCredentials(
  byok: readonly CredentialRecord[],
  shared: readonly SharedCredentialRecord[],
  req: SelectionRequest,
): SelectedCredential[] {
  const governing = byok.filter((c) => c.provider === req.provider && !c.disabled && admitsCaller(c, req));
  const usable = governing.filter((c) => admitsModel(c, req.model, req.aliases));
  const sharedRemoved = governing.some((c) => c.isRequired || (c.isByokOnly && admitsModel(c, req.model, req.aliases)));
  const own = (c: CredentialRecord): SelectedCredential => ({ id: c.id, source: "byok" });
  return [
    ...usable.filter((c) => !c.isFallback).sort(byOrder).map(own),
    ...(sharedRemoved ? [] : shared.filter((s) => s.provider === req.provider).map((s): SelectedCredential => ({ id: s.id, source: "shared" }))),
    ...usable.filter((c) => c.isFallback).sort(byOrder).map(own),
  ];
}
