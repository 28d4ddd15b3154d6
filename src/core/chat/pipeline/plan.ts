/**
 * Stage "plan": the attempts of the request, in order: the (provider, model) pairs from `model`, `models` and
 * `provider` preferences (../routing.ts), and for each the credentials the BYOK flags allow
 * (../credentials/select.ts), the caller's workspace's first, then the operator's shared ones.
 *
 * At most `maxAttempts` (PORTICO_CHAT_MAX_ATTEMPTS) are kept, in plan order; the rest are counted in
 * `call.attemptsNotTried` (the error of a request whose kept attempts all fail says so). Credentials are read
 * once per provider, so planning is linear in the (capped) lists of the request.
 */
import { Reason, serviceError } from "../../errors.js";
import type { SharedCredentialStore } from "../../byok/provider-keys.js";
import type { CredentialStore } from "../credentials/load.js";
import { selectCredentials } from "../credentials/select.js";
import type { ProviderRegistry } from "../providers/index.js";
import { modelsOf, planAttempts, preferencesOf } from "../routing.js";
import { invalidArgument } from "../../errors.js";
import type { ChatStage } from "./stage.js";

export interface PlanDeps {
  credentials: CredentialStore;
  /** The operator's shared provider keys (`portico admin provider-key`); none when absent. */
  shared?: SharedCredentialStore;
  providers: ProviderRegistry;
  /** Upstream attempts one request may make (PORTICO_CHAT_MAX_ATTEMPTS). */
  maxAttempts: number;
}

/**
 * Model ids are `<provider>/<model>` (docs/chat.md): a bare id such as `gpt-4o-mini`, or one whose provider
 * no adapter serves, is a 400 naming the field that carried it (`model` or `models[i]`), not "no credential".
 */
function checkModelIds(body: Readonly<Record<string, unknown>>, known: (provider: string) => boolean, preset: string | null): void {
  // After the preset stage the id may come from the preset's configuration: say so, or the caller looks for it in vain.
  const from = preset ? ` (after preset "${preset}" was applied: its configuration may set it)` : "";
  const fields: Array<[string, unknown]> = [["model", body.model]];
  if (Array.isArray(body.models)) body.models.forEach((m, i) => fields.push([`models[${i}]`, m]));
  const prefs = preferencesOf(body);
  const others = (prefs.order ?? []).some(known);
  for (const [field, id] of fields) {
    if (typeof id !== "string" || id === "") continue;
    const slash = id.indexOf("/");
    if (slash <= 0 || slash === id.length - 1) {
      throw invalidArgument(
        field,
        `${field} "${shortened(id)}"${from} is not a model id: model ids are <provider>/<model>, such as openai/gpt-4o-mini (GET /api/v1/models lists what this key may use)`,
      );
    }
    const own = id.slice(0, slash).toLowerCase();
    if (!known(own) && !others) {
      throw invalidArgument(field, `${field} "${shortened(id)}"${from}: no provider "${shortened(own)}" is served here; model ids are <provider>/<model> (GET /api/v1/providers lists the providers)`);
    }
  }
}

export function createPlanStage(deps: PlanDeps): ChatStage {
  return {
    name: "plan",
    async run(call, next) {
      const { caller, track } = call;
      const body = call.request;
      const models = modelsOf(body);
      track.requestedModel = models[0] ?? "";
      if (models.length === 0) throw invalidArgument("model", "model is required (a model id such as openai/gpt-4o, or @preset/<slug>)");
      checkModelIds(body, (p) => deps.providers.get(p) !== undefined, call.track.presetSlug);
      const planned = planAttempts(models, preferencesOf(body), (p) => deps.providers.get(p) !== undefined);
      const byProvider = new Map<string, ReturnType<typeof credentialsOf>>();
      const credentialsOf = (slug: string) =>
        Promise.all([deps.credentials.forProvider(caller.workspaceId, slug), deps.shared ? deps.shared.forProvider(slug) : []] as const);
      for (const plan of planned) {
        const provider = deps.providers.get(plan.provider)!;
        let loading = byProvider.get(plan.provider);
        if (!loading) byProvider.set(plan.provider, (loading = credentialsOf(plan.provider)));
        const [creds, shared] = await loading;
        const order = selectCredentials(creds, shared, { provider: plan.provider, model: plan.requestedModel, keyHash: caller.keyHash, userId: caller.userId });
        for (const sel of order) {
          const cred = sel.source === "shared" ? shared.find((c) => c.id === sel.id) : creds.find((c) => c.id === sel.id);
          if (cred === undefined || cred.apiKey === null) continue; // "" is a keyless provider's (PORTICO_KEYLESS_PROVIDERS)
          if (call.attempts.length >= deps.maxAttempts) {
            call.attemptsNotTried++;
            continue;
          }
          call.attempts.push({
            provider: plan.provider,
            requestedModel: plan.requestedModel,
            credentialId: cred.id,
            credentialSource: sel.source,
            adapter: provider.adapter,
            call: { model: plan.upstreamModel, body, baseUrl: provider.baseUrl, apiKey: cred.apiKey, signal: call.signal },
          });
        }
      }
      if (call.attempts.length === 0) {
        // Names the first model only: the list itself is never echoed back (it may be long).
        const more = models.length > 1 ? ` or its ${models.length - 1} fallback model${models.length === 2 ? "" : "s"}` : "";
        throw serviceError(Reason.NO_CREDENTIAL, `No provider credential may serve ${shortened(models[0]!)}${more}: store one with POST /api/v1/byok, or check its flags`);
      }
      return next();
    },
  };
}

/** A model id as an error message may quote it: at most 128 characters. */
function shortened(model: string): string {
  return model.length > 128 ? `${model.slice(0, 128)}…` : model;
}
