/**
 * How a chat-completions request uses a preset (issue 11; rules documented in docs/chat.md):
 *
 * - Reference: `model: "@preset/<slug>"` or `"@preset/<slug>@<version>"`, or a `preset` field (`"<slug>"`,
 *   `"<slug>@<version>"`, the `@preset/` prefix allowed). Without a version, the preset's designated version.
 *   A `model` reference and a `preset` field naming different presets is a 400.
 * - Config: each top-level field of the version's config (the fields presets keep: model, models, provider,
 *   sampling, tools settings…) fills the request's field when the request does not set it (absent or null).
 *   A field the request sets wins whole: objects such as `provider` are not merged key by key.
 * - Model: a request whose `model` is the preset reference takes the preset's `model` (or, when the preset
 *   has none, the first of its `models`); a request with a `preset` field and its own model keeps its model.
 * - System prompt: when the request has no `system` or `developer` message, the version's system prompt
 *   becomes a `system` message placed first.
 * - The `preset` field is not sent upstream.
 */

export interface PresetReference {
  slug: string;
  /** A named version; undefined for the designated one. */
  version: number | undefined;
  /** The request field that named the preset (`model` when both do). */
  field: "model" | "preset";
}

export class PresetReferenceError extends Error {
  constructor(
    readonly field: "model" | "preset",
    message: string,
  ) {
    super(message);
    this.name = "PresetReferenceError";
  }
}

const PREFIX = "@preset/";
const SLUG = /^[a-z0-9][a-z0-9-_.]{0,127}$/i;

function parse(raw: string, field: "model" | "preset"): PresetReference {
  const text = raw.startsWith(PREFIX) ? raw.slice(PREFIX.length) : raw;
  const at = text.lastIndexOf("@");
  const slug = at > 0 ? text.slice(0, at) : text;
  const versionText = at > 0 ? text.slice(at + 1) : undefined;
  if (!SLUG.test(slug)) throw new PresetReferenceError(field, `${field} names no valid preset slug`);
  if (versionText === undefined) return { slug, version: undefined, field };
  if (!/^[1-9][0-9]{0,8}$/.test(versionText)) throw new PresetReferenceError(field, `${field}: the preset version must be a positive integer`);
  return { slug, version: Number(versionText), field };
}

/** The preset a request names, or null when it names none. */
export function presetReferenceOf(body: Readonly<Record<string, unknown>>): PresetReference | null {
  const model = typeof body.model === "string" && body.model.startsWith(PREFIX) ? parse(body.model, "model") : null;
  const field = typeof body.preset === "string" && body.preset.length > 0 ? parse(body.preset, "preset") : null;
  if (model && field && (model.slug !== field.slug || model.version !== field.version)) {
    throw new PresetReferenceError("preset", "model and preset name different presets");
  }
  return model ?? field;
}

export interface PresetVersionContent {
  config: Readonly<Record<string, unknown>>;
  systemPrompt: string | null;
}

const isUnset = (v: unknown) => v === undefined || v === null;

/** The request with the preset applied (a new object; the input is not changed). */
export function applyPreset(body: Readonly<Record<string, unknown>>, preset: PresetVersionContent): Record<string, unknown> {
  const out: Record<string, unknown> = { ...body };
  delete out.preset;
  const modelIsReference = typeof body.model === "string" && body.model.startsWith(PREFIX);
  if (modelIsReference) delete out.model;
  for (const [key, value] of Object.entries(preset.config)) {
    if (isUnset(out[key])) out[key] = value;
  }
  if (isUnset(out.model) && Array.isArray(out.models) && typeof out.models[0] === "string") out.model = out.models[0];
  const messages = Array.isArray(body.messages) ? (body.messages as Array<Record<string, unknown>>) : [];
  const hasInstructions = messages.some((m) => m && (m.role === "system" || m.role === "developer"));
  if (preset.systemPrompt !== null && !hasInstructions) out.messages = [{ role: "system", content: preset.systemPrompt }, ...messages];
  return out;
}
