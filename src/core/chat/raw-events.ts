/**
 * Same-dialect pass-through of streamed events (issue 24, "CPU per relayed chunk"): an OpenAI-compatible
 * upstream's `chat.completion.chunk` goes out of the chat-completions dialect as the upstream's own JSON text with
 * `id` and `provider` rewritten, instead of `JSON.parse` → stamp → encode → `JSON.stringify`.
 *
 * The seam: an event may carry its raw text, kept by object identity in the stream's {@link RawSlot} (never on the
 * event itself, so a copy of the event never carries it). The event is still a whole object, equal to `JSON.parse`
 * of the text (a `provider` key it lacks is declared, undefined, so that the stamp is not a new property): every
 * stage reads it as before. A stage that changes an event by copying it (`{...event, usage}`) makes an object
 * without raw text; one that changes an event in place must call {@link dropRaw} (the key guard does). Setting
 * `id` and `provider` (the execute stage's stamp) is the one change the text follows.
 *
 * Exactness: the text is used only when `JSON.stringify` of the stamped event would write exactly it. Per stream,
 * {@link createEventReader} learns the upstream's form from an event parsed in full whose `JSON.stringify` gives
 * back its text (no whitespace, the escapes and number forms `JSON.stringify` writes), with scalar values only
 * outside `choices`: the text before `choices` (id, object, created, model, …; the same in every event of a
 * stream) and the keys after it. An event that begins with that same text and whose `choices` are one content
 * delta with no finish reason, in canonical form (a strict pattern below), is built from the pattern's pieces
 * without `JSON.parse`; any other event (the role chunk, the finishing one, usage, tool calls, errors) is parsed
 * as before and carries no text. Events that carry usage or a finish reason are thus always parsed objects.
 */

/** What the reader learnt of a stream's events: their text before `choices` and their keys after it. */
interface Template {
  /** The upstream's text up to and including `"choices":`. */
  readonly prefix: string;
  /** An event of the stream: the keys in the upstream's order, the prefix's values (the others are set per event). */
  readonly shape: Record<string, unknown>;
  /** Keys before `choices`. */
  readonly prefixKeys: readonly string[];
  /** Keys after `choices` with their JSON text as written before the value (`,"key":`). */
  readonly suffix: ReadonlyArray<{ key: string; head: string }>;
  /** `provider` is an upstream key before `choices` (stamped in place); otherwise it is added last. */
  readonly providerInPrefix: boolean;
  /** The stamped prefix of the last id and provider (one per stream). */
  stamped?: { id: string; provider: string; prefix: string; tail: string };
}

/**
 * Where one stream's reader leaves the text of the event it built last (one slot per stream: a map from events to
 * texts cost ≈ 1 µs per event in its upkeep, more than the rest of the reading). The text belongs to `event` only:
 * an event the consumer gets that is not this very object (a copy, or an event read before the last one) has none.
 */
export interface RawSlot {
  event: object | undefined;
  text: string;
  template: Template | undefined;
}

export function createRawSlot(): RawSlot {
  return { event: undefined, text: "", template: undefined };
}

/** Forgets the raw text of `event`, changed in place. */
export function dropRaw(slot: RawSlot, event: object): void {
  if (slot.event === event) slot.event = undefined;
}

/** Whether `event` carries raw text (tests). */
export function hasRaw(slot: RawSlot, event: object): boolean {
  return slot.event === event;
}

/**
 * The JSON text of `event` as `JSON.stringify` would write it, taken from its upstream text with `id` and `provider`
 * set to the event's; undefined when the event carries none (then the caller stringifies it). Reading it forgets it.
 */
export function takeRawJson(slot: RawSlot, event: { id?: unknown; provider?: unknown }): string | undefined {
  if (slot.event !== event) return undefined;
  slot.event = undefined;
  const t = slot.template!;
  const { id, provider } = event;
  if (typeof id !== "string" || typeof provider !== "string") return undefined;
  let s = t.stamped;
  if (s === undefined || s.id !== id || s.provider !== provider) s = t.stamped = stampedPrefix(t, id, provider);
  const text = slot.text;
  return t.providerInPrefix ? s.prefix + text.slice(t.prefix.length) : s.prefix + text.slice(t.prefix.length, -1) + s.tail;
}

function stampedPrefix(t: Template, id: string, provider: string): NonNullable<Template["stamped"]> {
  const head: Record<string, unknown> = {};
  for (const k of t.prefixKeys) head[k] = k === "id" ? id : k === "provider" ? provider : t.shape[k];
  return { id, provider, prefix: `${JSON.stringify(head).slice(0, -1)},"choices":`, tail: `,"provider":${JSON.stringify(provider)}}` };
}

/** Keys whose presence changes how the dialect encodes an event (an in-stream error, usage for other dialects). */
const ENCODED_KEYS = new Set(["error", "start_usage"]);

/** Streams whose events the reader could not learn after this many tries parse every event (no further tries). */
const MAX_LEARN = 4;

/**
 * A JSON string as `JSON.stringify` writes it: no `\/`, no `\u` escape but those of the control characters it
 * escapes so, no lone surrogate; one character per step (no nested quantifier: linear on any input).
 */
const STR = String.raw`"(?:[^"\\\x00-\x1f\ud800-\udfff]|[\ud800-\udbff][\udc00-\udfff]|\\["\\bfnrt]|\\u00(?:0[0-7bef]|1[0-9a-f]))*"`;
/** One choice with a content delta and no finish reason, as OpenAI-compatible servers stream it. */
const CHOICES = new RegExp(
  String.raw`\[\{"index":(0|[1-9]\d{0,8}),"delta":\{("role":"assistant",)?"content":(${STR})\}(,"logprobs":null)?,"finish_reason":null\}\]`,
  "y",
);
/** A scalar value after `choices` (`obfuscation`, `usage: null`, …): a string, an integer of at most 15 digits, a literal. */
const SCALAR = new RegExp(String.raw`${STR}|-?[1-9]\d{0,14}(?![\d.eE])|0(?![\d.eE])|null|true|false`, "y");

/** A JSON string token of {@link STR} as its value. */
function stringValue(token: string): string {
  return token.includes("\\") ? (JSON.parse(token) as string) : token.slice(1, -1);
}

function scalarValue(token: string): unknown {
  switch (token.charCodeAt(0)) {
    case 0x22:
      return stringValue(token);
    case 0x6e:
      return null;
    case 0x74:
      return true;
    case 0x66:
      return false;
    default:
      return Number(token);
  }
}

/**
 * One stream's reader of OpenAI-compatible event data: each event as `parse(data)` would make it (the adapter's own
 * `JSON.parse`, which also reports malformed data); a plain content event of a learnt form is built without it and
 * carries its text.
 */
export function createEventReader(parse: (data: string) => Record<string, unknown>, slot: RawSlot): (data: string) => Record<string, unknown> {
  let template: Template | undefined;
  let tries = 0;
  return (data) => {
    if (template !== undefined && startsWith(data, template.prefix, 0)) {
      const event = build(template, data);
      if (event !== undefined) {
        slot.event = event;
        slot.text = data;
        slot.template = template;
        return event;
      }
      return parse(data);
    }
    const value = parse(data);
    if (tries < MAX_LEARN) {
      tries++;
      const learnt = learn(value, data);
      if (learnt !== undefined) template = learnt;
    }
    return value;
  };
}

/** The stream's form from one parsed event and its text, when that event's text is what `JSON.stringify` writes. */
function learn(value: Record<string, unknown>, data: string): Template | undefined {
  const keys = Object.keys(value);
  const at = keys.indexOf("choices");
  if (at < 0 || !Array.isArray(value.choices)) return undefined;
  const prefixKeys = keys.slice(0, at);
  const suffixKeys = keys.slice(at + 1);
  if (!prefixKeys.includes("id") || suffixKeys.includes("provider") || suffixKeys.includes("id")) return undefined;
  for (const k of keys) {
    if (ENCODED_KEYS.has(k) || k === "__proto__") return undefined;
    const v = value[k];
    if (k !== "choices" && v !== null && typeof v === "object") return undefined;
  }
  if (JSON.stringify(value) !== data) return undefined;
  // The text before `choices` is `data`'s own, up to its first `,"choices":`: `data` is what `JSON.stringify` writes
  // and every value before `choices` is a scalar, so that is the top-level key (inside a JSON string a `"` is always
  // escaped, so no `,"` occurs there). The same text as `JSON.stringify` of those keys alone, without making it
  // (learning cost ≈ 8 µs a stream with it, ≈ 4 without; bench/README.md, "Streamed chat completions"). A slice of
  // the event's text: it keeps the read it came from for the stream's life.
  const cut = data.indexOf(',"choices":');
  if (cut < 0) return undefined;
  const prefix = data.slice(0, cut + 11);
  const shape: Record<string, unknown> = {};
  for (const k of keys) shape[k] = k === "choices" ? null : value[k];
  if (!prefixKeys.includes("provider")) shape.provider = undefined;
  return {
    prefix,
    shape,
    prefixKeys,
    suffix: suffixKeys.map((key) => ({ key, head: `,${JSON.stringify(key)}:` })),
    providerInPrefix: prefixKeys.includes("provider"),
  };
}

/**
 * Whether `text` has `part` at `at`. Not `String.prototype.startsWith`: on the sliced strings the SSE parser hands
 * out, V8's `startsWith` compares a character at a time on a slow path (≈ 320 ns for a 110-character prefix against
 * ≈ 40 ns for a slice and `===`; bench/README.md, "CPU per relayed chunk: the reader's prefix test").
 */
function startsWith(text: string, part: string, at: number): boolean {
  return text.length >= at + part.length && text.slice(at, at + part.length) === part;
}

/** The event of `data` (which begins with the template's prefix) when it is a plain content event in canonical form. */
function build(t: Template, data: string): Record<string, unknown> | undefined {
  CHOICES.lastIndex = t.prefix.length;
  const m = CHOICES.exec(data);
  if (m === null) return undefined;
  let at = CHOICES.lastIndex;
  const content = stringValue(m[3]!);
  const index = Number(m[1]);
  const delta = m[2] === undefined ? { content } : { role: "assistant", content };
  const choice = m[4] === undefined ? { index, delta, finish_reason: null } : { index, delta, logprobs: null, finish_reason: null };
  const event: Record<string, unknown> = { ...t.shape };
  event.choices = [choice];
  for (const { key, head } of t.suffix) {
    if (!startsWith(data, head, at)) return undefined;
    SCALAR.lastIndex = at + head.length;
    const v = SCALAR.exec(data);
    if (v === null) return undefined;
    event[key] = scalarValue(v[0]);
    at = SCALAR.lastIndex;
  }
  if (at !== data.length - 1 || data.charCodeAt(at) !== 0x7d) return undefined;
  return event;
}
