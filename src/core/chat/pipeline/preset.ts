/**
 * Stage "preset": applies the preset the request names (`model: "@preset/<slug>[@<version>]"` or the
 * `preset` field; rules in ../presets.ts and docs/chat.md), replacing `call.request` with the merged request.
 */
import { invalidArgument, notFound, Reason, serviceError } from "../../errors.js";
import type { PresetsRepository } from "../../presets/presets-repository.js";
import { applyPreset, presetReferenceOf, PresetReferenceError, type PresetReference } from "../presets.js";
import type { CanonicalRequest } from "../model.js";
import { captureContext } from "./context.js";
import type { ChatCall, ChatOutcome, ChatStage, Next } from "./stage.js";

/**
 * A preset whose status is not `active` is switched off (docs/chat.md): `disabled` for now, `archived` for good.
 * Either way the request is refused before any upstream call, naming the preset and the field that named it.
 */
function inactivePreset(slug: string, status: string, field: "model" | "preset") {
  const why = status === "archived" ? "archived" : status === "disabled" ? "disabled" : `not active (status ${status})`;
  return serviceError(
    Reason.STATE_CONFLICT,
    `Preset "${slug}" is ${why} and serves no requests: set its status to active (PATCH /api/v1/presets/${slug}) to use it again`,
    { field },
  );
}

export function createPresetStage(deps: { presets: PresetsRepository }): ChatStage {
  return {
    name: "preset",
    run(call, next) {
      let ref: PresetReference | null;
      try {
        ref = presetReferenceOf(call.request);
      } catch (err) {
        if (err instanceof PresetReferenceError) throw invalidArgument(err.field, err.message);
        throw err;
      }
      // No preset named: nothing to read (no async step of its own).
      return ref ? applied(call, next, ref) : next();
    },
  };

  async function applied(call: ChatCall, next: Next, ref: PresetReference): Promise<ChatOutcome> {
    const preset = await deps.presets.findPreset(call.caller.workspaceId, ref.slug);
    if (!preset) throw notFound(`No preset "${ref.slug}" in this workspace`);
    if (preset.status !== "active") throw inactivePreset(ref.slug, preset.status, ref.field);
    const version = ref.version !== undefined
      ? await deps.presets.findVersion(preset.id, ref.version)
      : preset.designatedVersionId ? await deps.presets.findVersionById(preset.designatedVersionId) : null;
    if (!version) throw notFound(ref.version !== undefined ? `Preset "${ref.slug}" has no version ${ref.version}` : `Preset "${ref.slug}" has no designated version`);
    call.request = applyPreset(call.request, { config: (version.config ?? {}) as Record<string, unknown>, systemPrompt: version.systemPrompt }) as CanonicalRequest;
    call.track.presetSlug = ref.slug;
    call.track.presetVersion = version.version;
    // A preset may set user, session_id, trace or metadata: record the merged request's.
    captureContext(call);
    return next();
  }
}
