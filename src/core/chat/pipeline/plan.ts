/**
 * Stage "plan": the attempts of the request, in order: the endpoints of `model` and `models` through the model
 * catalog, filtered and ordered by the `provider` preferences and the account's routing settings
 * (../routing/route.ts, docs/routing.md), and for each the credentials the BYOK flags allow
 * (../credentials/select.ts), the caller's workspace's first, then the operator's shared ones.
 *
 * At most `maxAttempts` (PORTICO_CHAT_MAX_ATTEMPTS) are kept, in plan order; the rest are counted in
 * `call.attemptsNotTried` (the error of a request whose kept attempts all fail says so). Credentials are read
 * once per provider, so planning is linear in the (capped) lists of the request.
 *
 * Credentials of one tier are drawn by weight unless PORTICO_CREDENTIAL_ORDER=ordered (../credentials/select.ts).
 * Sticky sessions (docs/routing.md): a request naming a session (`session_id`, `x-session-id` or a coding agent's
 * own session header) is tried first on the endpoint and credential that last served the same session of the
 * organization for the same requested model, while neither is cooling in the health memory; what served is
 * remembered for the next request.
 */
import { ConnectError } from "@connectrpc/connect";
import { errorDetailOf, Reason, serviceError } from "../../errors.js";
import type { SharedCredential, SharedCredentialStore } from "../../byok/provider-keys.js";
import type { Catalog } from "../../catalog/catalog.js";
import type { CredentialStore, LoadedCredential } from "../credentials/load.js";
import { selectCredentials } from "../credentials/select.js";
import type { ProviderRegistry } from "../providers/index.js";
import { modelsOf } from "../routing.js";
import { routingPreferencesOf, splitSuffix } from "../routing/preferences.js";
import { endpointKey, type HealthMemory } from "../routing/health.js";
import { filterCandidates, orderCandidates, resolveCandidates, type RoutingFilter } from "../routing/route.js";
import type { EndpointStats } from "../routing/endpoint-stats.js";
import type { CredentialOrder } from "../credentials/select.js";
import type { SessionAffinity, SessionPin } from "../../../lib/session-affinity.js";
import { credentialKey } from "../routing/health.js";
import { invalidArgument } from "../../errors.js";
import type { Attempt, ChatStage } from "./stage.js";

export interface PlanDeps {
  credentials: CredentialStore;
  /** The operator's shared provider keys (`portico admin provider-key`); none when absent. */
  shared?: SharedCredentialStore;
  providers: ProviderRegistry;
  /** Upstream attempts one request may make (PORTICO_CHAT_MAX_ATTEMPTS). */
  maxAttempts: number;
  /** The model catalog: canonical slugs resolve to its endpoints (docs/routing.md). */
  catalog: Catalog;
  /** Live throughput / latency per endpoint (sorts and preferred thresholds); none: no figures. */
  stats?: EndpointStats;
  /** The health memory: endpoints cooling after a failure are tried last (the execute stage records failures). */
  health?: HealthMemory;
  /** The load balancing draw, in [0, 1); default Math.random (tests inject it). */
  random?: () => number;
  /** The account's routing settings for a caller, as filters applied before the request's own (docs/routing.md). */
  accountFilters?: (call: { organizationId: string; workspaceId: string }) => Promise<readonly RoutingFilter[]>;
  /**
   * How credentials of one tier are ordered (PORTICO_CREDENTIAL_ORDER, whose default is "balanced": the core passes
   * it); absent here: "ordered", the strict sort_order (the order before load balancing existed).
   */
  credentialOrder?: CredentialOrder;
  /** Sticky sessions' memory; none: no stickiness. */
  affinity?: SessionAffinity;
  /** Tests only: plan every request through the general path (the fast path's equivalence test). */
  generalPathOnly?: boolean;
}

type Loaded = Promise<readonly [LoadedCredential[], SharedCredential[]]>;

/** A provider's credentials: the workspace's and the operator's shared ones, read together. */
function credentialsOf(deps: PlanDeps, workspaceId: string, slug: string): Loaded {
  return Promise.all([deps.credentials.forProvider(workspaceId, slug), deps.shared ? deps.shared.forProvider(slug) : []] as const);
}

/** A provider's credentials read once per request (the general path: several providers, or ZDR's look ahead). */
function loadedIn(byProvider: Map<string, Loaded>, deps: PlanDeps, workspaceId: string, slug: string): Loaded {
  let loading = byProvider.get(slug);
  if (!loading) byProvider.set(slug, (loading = credentialsOf(deps, workspaceId, slug)));
  return loading;
}

const NO_ALIASES: readonly string[] = [];

/**
 * Model ids are canonical slugs of the catalog or `<provider>/<model>` (docs/routing.md): a bare id such as
 * `gpt-4o-mini`, or one that is neither in the catalog nor of a provider an adapter serves, is a 400 naming
 * the field that carried it (`model` or `models[i]`), not "no credential".
 */
function checkModelIds(body: Readonly<Record<string, unknown>>, known: (provider: string) => boolean, catalog: Catalog, order: readonly string[], preset: string | null): void {
  // After the preset stage the id may come from the preset's configuration: say so, or the caller looks for it in vain.
  const from = preset ? ` (after preset "${preset}" was applied: its configuration may set it)` : "";
  const fields: Array<[string, unknown]> = [["model", body.model]];
  if (Array.isArray(body.models)) body.models.forEach((m, i) => fields.push([`models[${i}]`, m]));
  const others = order.some(known);
  for (const [field, raw] of fields) {
    if (typeof raw !== "string" || raw === "") continue;
    const id = splitSuffix(raw).id;
    if (catalog.model(id)) continue;
    const slash = id.indexOf("/");
    if (slash <= 0 || slash === id.length - 1) {
      throw invalidArgument(
        field,
        `${field} "${shortened(raw)}"${from} is not a model id: model ids are catalog slugs or <provider>/<model>, such as openai/gpt-4o-mini (GET /api/v1/models lists what this key may use)`,
      );
    }
    const own = id.slice(0, slash).toLowerCase();
    if (!known(own) && !others) {
      throw invalidArgument(field, `${field} "${shortened(raw)}"${from}: no catalog model has this slug and no provider "${shortened(own)}" is served here; model ids are catalog slugs or <provider>/<model> (GET /api/v1/providers lists the providers)`);
    }
  }
}

export function createPlanStage(deps: PlanDeps): ChatStage {
  const random = deps.random ?? Math.random;
  const known = (p: string) => deps.providers.get(p) !== undefined;
  const NO_HEALTH: ReadonlySet<string> = new Set();
  // Provider lists may name providers by display name ("Together AI"); read once (the registry is fixed at start-up).
  const names = new Map(deps.providers.list().map((p) => [p.name.toLowerCase(), p.slug]));
  const draw = { random, order: deps.credentialOrder ?? "ordered" } as const;
  const orderDeps = { unhealthy: NO_HEALTH, random, ...(deps.stats ? { stats: deps.stats } : {}) };
  return {
    name: "plan",
    async run(call, next) {
      const { caller, track } = call;
      const body = call.request;
      const models = modelsOf(body);
      track.requestedModel = models[0] ?? "";
      if (models.length === 0) throw invalidArgument("model", "model is required (a model id such as openai/gpt-4o, or @preset/<slug>)");
      const prefs = routingPreferencesOf(body, names);
      checkModelIds(body, known, deps.catalog, prefs.order ?? [], call.track.presetSlug);
      const session = call.track.context.sessionId ?? call.sessionHeader ?? null;
      const scope = session && deps.affinity ? `${caller.organizationId}\u0000${models[0]}` : undefined;
      const pinning = scope !== undefined ? deps.affinity!.get(scope, session!) : undefined;
      const account = deps.accountFilters ? await deps.accountFilters(caller) : [];
      let pin: SessionPin | undefined = pinning ? await pinning : undefined;
      if (pin && deps.health) {
        // A pin holds while its endpoint and credential are healthy; cooling, the request is routed afresh.
        const now = Date.now();
        if (deps.health.coolingUntil(endpointKey(pin.provider, pin.model), now) !== undefined || deps.health.coolingUntil(credentialKey(pin.credentialId), now) !== undefined) {
          pin = undefined;
        }
      }
      let pinned = false;
      // The general path reads each provider's credentials once through a map; a plan of one provider (the common
      // request: one model, one endpoint) reads them directly (bench/README.md, "the plan's fast path").
      let byProvider: Map<string, Loaded> | undefined;
      const label = models.length > 1 ? `${shortened(models[0]!)} or its fallback models` : shortened(models[0]!);
      const resolved = resolveCandidates(models, prefs, deps.catalog, known);
      if (prefs.zdr) {
        // A BYOK credential declared zero-data-retention makes its provider's endpoints eligible (docs/routing.md).
        const declared = new Set<string>();
        for (const p of new Set(resolved.map((c) => c.provider))) {
          const [creds] = await loadedIn((byProvider ??= new Map()), deps, caller.workspaceId, p);
          if (creds.some((c) => c.declaredZdr === true && !c.disabled)) declared.add(p);
        }
        prefs.zdrCredentialProviders = declared;
      }
      const candidates = account.length === 0 ? filterCandidates(resolved, prefs, body, label, account) : withAccountNote(account, () => filterCandidates(resolved, prefs, body, label, account));
      // The health memory (local, never a round trip) is read only when there is an order to choose.
      let unhealthy: Set<string> | undefined;
      if (deps.health && candidates.length > 1) {
        const now = Date.now();
        for (const c of candidates) {
          const key = endpointKey(c.provider, c.upstreamModel);
          if (deps.health.coolingUntil(key, now) !== undefined) (unhealthy ??= new Set()).add(key);
        }
      }
      // One candidate has no order to choose (orderCandidates returns it as it is).
      const planned =
        candidates.length <= 1 ? candidates : orderCandidates(candidates, prefs, unhealthy === undefined ? orderDeps : { ...orderDeps, unhealthy });
      const direct = planned.length === 1 && byProvider === undefined && deps.generalPathOnly !== true;
      for (const plan of planned) {
        const provider = deps.providers.get(plan.provider)!;
        const [creds, shared] = await (direct ? credentialsOf(deps, caller.workspaceId, plan.provider) : loadedIn((byProvider ??= new Map()), deps, caller.workspaceId, plan.provider));
        // A credential restricted to models is matched on the model as named and, for a catalog model, on
        // `<provider>/<provider model id>` too.
        const aliases = plan.endpoint ? [`${plan.provider}/${plan.upstreamModel}`] : NO_ALIASES;
        const order = selectCredentials(creds, shared, { provider: plan.provider, model: plan.requestedModel, aliases, keyHash: caller.keyHash, userId: caller.userId }, draw);
        for (const sel of order) {
          const cred = sel.source === "shared" ? byId(shared, sel.id) : byId(creds, sel.id);
          if (cred === undefined || cred.apiKey === null) continue; // "" is a keyless provider's (PORTICO_KEYLESS_PROVIDERS)
          // provider.zdr: a credential declared not ZDR never serves; on an endpoint that is not ZDR itself, only a
          // BYOK credential declared ZDR does.
          if (prefs.zdr) {
            const declared = sel.source === "byok" ? (cred as { declaredZdr?: boolean | null }).declaredZdr : undefined;
            if (declared === false || (plan.endpoint?.zdr !== true && declared !== true)) continue;
          }
          const isPin = !pinned && pin !== undefined && pin.provider === plan.provider && pin.model === plan.upstreamModel && pin.credentialId === cred.id;
          if (call.attempts.length >= deps.maxAttempts) {
            call.attemptsNotTried++;
            if (!isPin) continue;
            call.attempts.pop(); // the session's pin goes first; the last kept attempt makes room
          }
          if (isPin) pinned = true;
          // The optional keys assigned in their places (not spread from a temporary object): the same keys in the same order.
          const upstream: Attempt["call"] = { model: plan.upstreamModel, body, baseUrl: provider.baseUrl, apiKey: cred.apiKey, signal: call.signal };
          if (provider.limits) upstream.limits = provider.limits;
          const attempt: Attempt = {
            provider: plan.provider,
            requestedModel: plan.requestedModel,
            credentialId: cred.id,
            credentialSource: sel.source,
            adapter: provider.adapter,
            call: upstream,
            catalogModel: plan.model?.slug ?? null,
          };
          if (plan.endpoint) attempt.endpoint = plan.endpoint;
          attempt.healthKey = endpointKey(plan.provider, plan.upstreamModel);
          call.attempts[isPin ? "unshift" : "push"](attempt);
        }
      }
      if (call.attempts.length === 0) {
        // Names the first model only: the list itself is never echoed back (it may be long).
        const more = models.length > 1 ? ` or its ${models.length - 1} fallback model${models.length === 2 ? "" : "s"}` : "";
        throw serviceError(Reason.NO_CREDENTIAL, `No provider credential may serve ${shortened(models[0]!)}${more}: store one with POST /api/v1/byok, or check its flags`);
      }
      const outcome = await next();
      // The served attempt says whether the catalog knew what served (the generation's catalog model; null: uncatalogued).
      const served = call.attempts.find((a) => a.provider === track.provider && a.credentialId === track.credentialId && a.requestedModel === track.model);
      if (served) track.catalogModel = served.catalogModel ?? null;
      if (served && scope !== undefined) deps.affinity!.set(scope, session!, { provider: served.provider, model: served.call.model, credentialId: served.credentialId });
      return outcome;
    },
  };
}

/**
 * A request filter that empties the list after the account's routing settings narrowed it says so, naming
 * the settings that applied first (the request's own field stays the error's field).
 */
function withAccountNote<T>(account: readonly RoutingFilter[], run: () => T): T {
  try {
    return run();
  } catch (err) {
    if (account.length === 0 || !(err instanceof ConnectError)) throw err;
    const field = errorDetailOf(err)?.field;
    const names = account.map((f) => f.field);
    if (!field || names.includes(field)) throw err;
    throw invalidArgument(field, `${err.rawMessage}; the account's routing settings applied first (${names.join(", ")}) and a request can only narrow them`);
  }
}

/** The credential of `id` in a list (a loop: no closure per credential). */
function byId<T extends { id: string }>(list: readonly T[], id: string): T | undefined {
  for (let i = 0; i < list.length; i++) if (list[i]!.id === id) return list[i];
  return undefined;
}

/** A model id as an error message may quote it: at most 128 characters. */
function shortened(model: string): string {
  return model.length > 128 ? `${model.slice(0, 128)}…` : model;
}
