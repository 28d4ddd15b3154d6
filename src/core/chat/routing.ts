/**
 * The sequence of (provider, model) attempts for a request, before credentials: the request's `model`,
 * then its `models` fallbacks, in order; for each, the providers that may serve it.
 *
 * A model id is `<provider>/<model>` (e.g. `anthropic/claude-sonnet-4`); its own provider serves it. The
 * request's `provider` preferences change that list: `order` puts the named providers first (each is asked
 * for the same `<model>` part), `only` keeps just the named ones, `ignore` drops them, and
 * `allow_fallbacks: false` keeps only the providers `order` names (when it names any). Providers without
 * an adapter in the registry are left out.
 */
export interface ProviderPreferences {
  order?: string[];
  only?: string[];
  ignore?: string[];
  allow_fallbacks?: boolean;
}

export interface PlannedAttempt {
  provider: string;
  /** The model id as requested (`<provider>/<model>`). */
  requestedModel: string;
  /** The model id sent upstream (the part after the first `/`). */
  upstreamModel: string;
}

const strings = (v: unknown): string[] | undefined => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : undefined);

export function preferencesOf(body: Readonly<Record<string, unknown>>): ProviderPreferences {
  const p = body.provider;
  if (!p || typeof p !== "object" || Array.isArray(p)) return {};
  const o = p as Record<string, unknown>;
  const prefs: ProviderPreferences = {};
  const order = strings(o.order);
  const only = strings(o.only);
  const ignore = strings(o.ignore);
  if (order) prefs.order = order.map((s) => s.toLowerCase());
  if (only) prefs.only = only.map((s) => s.toLowerCase());
  if (ignore) prefs.ignore = ignore.map((s) => s.toLowerCase());
  if (typeof o.allow_fallbacks === "boolean") prefs.allow_fallbacks = o.allow_fallbacks;
  return prefs;
}

/** `model` then the `models` fallbacks, first occurrence kept (linear: a Set, not a scan per entry). */
export function modelsOf(body: Readonly<Record<string, unknown>>): string[] {
  const seen = new Set<string>();
  if (typeof body.model === "string" && body.model) seen.add(body.model);
  for (const m of strings(body.models) ?? []) if (m) seen.add(m);
  return [...seen];
}

export function planAttempts(models: readonly string[], prefs: ProviderPreferences, known: (provider: string) => boolean): PlannedAttempt[] {
  const out: PlannedAttempt[] = [];
  // Sets, so the work is linear in the lists' lengths (they are capped by the request definition, but a
  // stored preset or a future caller must not make planning quadratic either).
  const only = prefs.only ? new Set(prefs.only) : undefined;
  const ignore = prefs.ignore ? new Set(prefs.ignore) : undefined;
  const order = prefs.order ?? [];
  for (const requestedModel of models) {
    const slash = requestedModel.indexOf("/");
    if (slash <= 0 || slash === requestedModel.length - 1) continue;
    const own = requestedModel.slice(0, slash).toLowerCase();
    const upstreamModel = requestedModel.slice(slash + 1);
    const providers = new Set(order);
    if (prefs.allow_fallbacks !== false || order.length === 0) providers.add(own);
    for (const provider of providers) {
      if (only && !only.has(provider)) continue;
      if (ignore?.has(provider)) continue;
      if (known(provider)) out.push({ provider, requestedModel, upstreamModel });
    }
  }
  return out;
}
