/**
 * Which credentials a chat-completions request may use for one (provider, model), in the order they are
 * tried: the rules of the BYOK flags as the API description defines them. Pure: the loader hands it the
 * organization's credentials and the operator's shared credentials for the provider.
 *
 * 1. A credential is skipped when `disabled`, or when the request is outside its restrictions:
 *    `allowed_models` (exact model slug, or `<vendor>/*`), `allowed_api_key_hashes` (the calling key),
 *    `allowed_user_ids` (the calling key's user). null = no restriction. A skipped credential has no
 *    effect at all, its flags included (a key it is not granted to does not see it).
 * 2. Order: three tiers, non-fallback credentials, then the shared credentials (the operator's), then
 *    `is_fallback` credentials. Within a tier ({@link CredentialOrder}, docs/routing.md "Load balancing"):
 *    - "balanced" (the default): a draw by `weight` (the first ∝ weight, the next ∝ weight among the rest, …);
 *      `sort_order` plays no part;
 *    - "ordered": `sort_order` is a strict order (then creation time, then id; shared keys in the operator's
 *      order); weights play no part.
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
  /** Load-balancing weight (1 to 1000); absent: 1. */
  weight?: number;
}

export interface SharedCredentialRecord {
  id: string;
  provider: string;
  /** The operator's order; absent: 0. */
  sortOrder?: number;
  /** Load-balancing weight; absent: 1. */
  weight?: number;
}

/**
 * How credentials of one tier are ordered (PORTICO_CREDENTIAL_ORDER): "balanced" draws them by weight,
 * "ordered" keeps `sort_order` as a strict order (weights play no part).
 */
export type CredentialOrder = "balanced" | "ordered";

export interface DrawOptions {
  order?: CredentialOrder;
  /** The draw, in [0, 1); default Math.random (tests inject it). */
  random?: () => number;
}

/**
 * A weighted draw without replacement: the first item with probability weight / total, the next among the
 * rest likewise, and so on. Weights below 1 (or not numbers) count as 1. Stable for a single item (no draw).
 */
export function weightedOrder<T>(items: readonly T[], weightOf: (item: T) => number | undefined, random: () => number = Math.random): T[] {
  if (items.length < 2) return [...items];
  const rest = items.map((item) => ({ item, w: Math.max(1, Math.floor(Number(weightOf(item)) || 1)) }));
  const out: T[] = [];
  let total = rest.reduce((s, r) => s + r.w, 0);
  while (rest.length > 1) {
    let pick = Math.min(Math.max(random(), 0), 0.999999999) * total;
    let i = 0;
    while (i < rest.length - 1 && pick >= rest[i]!.w) pick -= rest[i++]!.w;
    const [chosen] = rest.splice(i, 1);
    total -= chosen!.w;
    out.push(chosen!.item);
  }
  out.push(rest[0]!.item);
  return out;
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
  draw: DrawOptions = {},
): SelectedCredential[] {
  const random = draw.random ?? Math.random;
  // Absent: "ordered" (the strict order callers without options had); the core passes PORTICO_CREDENTIAL_ORDER.
  const ordered = draw.order !== "balanced";
  // One pass over the credentials, arrays only for tiers that have members: every request runs this once per
  // planned provider, and the filter / sort / map / spread chain made ≈ 10 arrays and closures a call (≈ 1.4 kB of a
  // request's allocations; bench/README.md, "serve's CPU per non-streamed request"). The same tiers, orders and
  // draws (the same calls of `random`, in the same order) as that chain.
  let primary: CredentialRecord[] | undefined;
  let fallback: CredentialRecord[] | undefined;
  let sharedRemoved = false;
  for (const c of byok) {
    // A credential that does not admit the caller (or is off) has no effect at all, its flags included.
    if (c.provider !== req.provider || c.disabled || !admitsCaller(c, req)) continue;
    const admits = admitsModel(c, req.model, req.aliases);
    if (c.isRequired || (c.isByokOnly && admits)) sharedRemoved = true;
    if (!admits) continue;
    if (c.isFallback) (fallback ??= []).push(c);
    else (primary ??= []).push(c);
  }
  const out: SelectedCredential[] = [];
  if (primary) pushOwn(out, tierOf(primary.length > 1 ? primary.sort(byOrder) : primary, ordered, random));
  // Shared keys arrive in the operator's order (sort_order, then age, then id).
  if (!sharedRemoved) {
    let sharedOf: SharedCredentialRecord[] | undefined;
    for (const s of shared) if (s.provider === req.provider) (sharedOf ??= []).push(s);
    if (sharedOf) for (const s of tierOf(sharedOf, ordered, random)) out.push({ id: s.id, source: "shared" });
  }
  if (fallback) pushOwn(out, tierOf(fallback.length > 1 ? fallback.sort(byOrder) : fallback, ordered, random));
  return out;
}

const weightOf = (c: { weight?: number }) => c.weight;

/** One tier in its order: as given ("ordered"), or drawn by weight ("balanced"; no draw for a single member). */
function tierOf<T extends { weight?: number }>(stable: T[], ordered: boolean, random: () => number): readonly T[] {
  return ordered || stable.length < 2 ? stable : weightedOrder(stable, weightOf, random);
}

function pushOwn(out: SelectedCredential[], tier: readonly CredentialRecord[]): void {
  for (const c of tier) out.push({ id: c.id, source: "byok" });
}
