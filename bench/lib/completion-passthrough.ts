/**
 * A PROTOTYPE, measured and not wired into the pipeline (bench/README.md, "The non-streamed answer passed through"):
 * same-dialect pass-through of a non-streamed answer (issue 24, "serve ≤ 2.14× the bare relay"), an
 * OpenAI-compatible upstream's `chat.completion` text sent with Portico's fields spliced in, instead of
 * `JSON.stringify` of the canonical answer. The answer is still parsed (every stage reads the canonical object);
 * only the encode would be saved. Measured: the check and the splice cost more than the encode they replace
 * (bench/completion-passthrough.ts); kept for that bench and its exactness test.
 *
 * What the canonical path changes between the upstream's object and the answer written (and so what is spliced):
 * `id` (the generation id, in place), `provider` (in place, else added last), each choice's `native_finish_reason`
 * (added last when absent: the adapter's), and `usage` (the cost stage's priced copy, in place). Everything else
 * is the upstream's own text, used only when it is exactly what `JSON.stringify` of its parse writes:
 * {@link scanCompletion} accepts a text of canonical tokens only (no white space, `JSON.stringify`'s escapes, numbers
 * in the form `String(Number(token))` gives back), no key that may be an array index (`JSON.parse` would order it
 * first), and no repeated key in an object (counted: the text's keys against the parsed tree's).
 */

/** Where the spliced fields of one upstream answer are. */
export interface CompletionLayout {
  /** The upstream answer, parsed (the object the adapter returned; later stamped in place). */
  readonly value: Record<string, unknown>;
  readonly text: string;
  /** Value spans [start, end) of the top-level keys spliced; -1 when absent. */
  readonly id: number;
  readonly idEnd: number;
  readonly provider: number;
  readonly providerEnd: number;
  readonly usage: number;
  readonly usageEnd: number;
  /** Index of each top-level `choices` element's closing `}` (an object without `native_finish_reason`), else -1. */
  readonly choiceEnds: readonly number[];
  /** The top-level keys in the text's order (for the final object's check). */
  readonly keys: readonly string[];
}

/** The object a non-streamed request's answer is passed through for, and its layout (one per call). */
export interface RawCompletionSlot {
  layout: CompletionLayout | undefined;
}

export function createRawCompletionSlot(): RawCompletionSlot {
  return { layout: undefined };
}

/** Thrown-free scanner state: the text, the position, the number of keys seen. */
interface Scan {
  t: string;
  i: number;
  keys: number;
}

const Q = 0x22;
const BS = 0x5c;

/** The end of the canonical string token at `s.i` (on its opening quote), or -1. */
function str(s: Scan): number {
  const t = s.t;
  const n = t.length;
  let i = s.i + 1;
  for (;;) {
    if (i >= n) return -1;
    const c = t.charCodeAt(i);
    if (c === Q) return i + 1;
    if (c < 0x20) return -1;
    if (c === BS) {
      const e = t.charCodeAt(i + 1);
      if (e === Q || e === BS || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) {
        i += 2;
        continue;
      }
      // \u00XX: only the control characters without a short escape, in lower-case hex (JSON.stringify's form).
      if (e !== 0x75 || t.charCodeAt(i + 2) !== 0x30 || t.charCodeAt(i + 3) !== 0x30) return -1;
      const h = t.charCodeAt(i + 4);
      const l = t.charCodeAt(i + 5);
      if (h === 0x30) {
        if (!((l >= 0x30 && l <= 0x37) || l === 0x62 || l === 0x65 || l === 0x66)) return -1;
      } else if (h === 0x31) {
        if (!((l >= 0x30 && l <= 0x39) || (l >= 0x61 && l <= 0x66))) return -1;
      } else return -1;
      i += 6;
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      // A pair as is; a lone surrogate JSON.stringify writes as an escape.
      if (c >= 0xdc00) return -1;
      const d = t.charCodeAt(i + 1);
      if (!(d >= 0xdc00 && d <= 0xdfff)) return -1;
      i += 2;
      continue;
    }
    i++;
  }
}

const isDigit = (c: number) => c >= 0x30 && c <= 0x39;

/**
 * The end of the number token at `s.i`, or -1 unless it is what `String(Number(token))` writes: an integer of at most
 * 15 digits (not `-0`), or a decimal of at most 15 digits without trailing zeros and above 1e-6 (each is the shortest
 * text of its double: two decimals of ≤ 15 significant digits are never the same double).
 */
function num(s: Scan): number {
  const t = s.t;
  let i = s.i;
  if (t.charCodeAt(i) === 0x2d) i++;
  const start = i;
  const c0 = t.charCodeAt(i);
  if (c0 === 0x30) i++;
  else if (c0 >= 0x31 && c0 <= 0x39) while (isDigit(t.charCodeAt(i))) i++;
  else return -1;
  let digits = i - start;
  let c = t.charCodeAt(i);
  if (c === 0x2e) {
    const f = ++i;
    while (isDigit(t.charCodeAt(i))) i++;
    if (i === f || t.charCodeAt(i - 1) === 0x30) return -1;
    // 0.000000x is written 1e-7 and below.
    if (c0 === 0x30 && i - f > 6 && t.startsWith("000000", f)) return -1;
    digits += i - f;
    c = t.charCodeAt(i);
  } else if (c0 === 0x30 && start !== s.i) return -1; // -0
  if (c === 0x65 || c === 0x45 || digits > 15) return -1;
  return i;
}

/** The end of the canonical value at `s.i`, or -1; objects and arrays recursively. */
function scanValue(s: Scan, depth: number): number {
  const t = s.t;
  const c = t.charCodeAt(s.i);
  if (c === Q) return str(s);
  if (c === 0x7b) return obj(s, depth, undefined);
  if (c === 0x5b) return arr(s, depth);
  if (c === 0x74) return t.startsWith("true", s.i) ? s.i + 4 : -1;
  if (c === 0x66) return t.startsWith("false", s.i) ? s.i + 5 : -1;
  if (c === 0x6e) return t.startsWith("null", s.i) ? s.i + 4 : -1;
  return num(s);
}

/**
 * Whether the key token [a, b) (quotes included) may be an array index's text (`JSON.parse` orders such keys first):
 * `0` or digits without a leading zero, of any length (the larger ones are refused too, to be safe).
 */
function indexKey(t: string, a: number, b: number): boolean {
  if (b - a < 3) return false;
  if (t.charCodeAt(a + 1) === 0x30 && b - a > 3) return false;
  for (let i = a + 1; i < b - 1; i++) if (!isDigit(t.charCodeAt(i))) return false;
  return true;
}

/** Spans of the top-level object's keys, filled by {@link obj} at depth 0. */
interface Top {
  keys: string[];
  spans: number[];
}

function obj(s: Scan, depth: number, top: Top | undefined): number {
  if (depth > 64) return -1;
  const t = s.t;
  let i = s.i + 1;
  if (t.charCodeAt(i) === 0x7d) return i + 1;
  for (;;) {
    if (t.charCodeAt(i) !== Q) return -1;
    s.i = i;
    const k = str(s);
    if (k < 0 || t.charCodeAt(k) !== 0x3a || indexKey(t, i, k)) return -1;
    s.keys++;
    s.i = k + 1;
    const e = scanValue(s, depth + 1);
    if (e < 0) return -1;
    if (top !== undefined) {
      top.keys.push(t.slice(i + 1, k - 1));
      top.spans.push(k + 1, e);
    }
    const c = t.charCodeAt(e);
    if (c === 0x7d) return e + 1;
    if (c !== 0x2c) return -1;
    i = e + 1;
  }
}

function arr(s: Scan, depth: number): number {
  if (depth > 64) return -1;
  const t = s.t;
  let i = s.i + 1;
  if (t.charCodeAt(i) === 0x5d) return i + 1;
  for (;;) {
    s.i = i;
    const e = scanValue(s, depth + 1);
    if (e < 0) return -1;
    const c = t.charCodeAt(e);
    if (c === 0x5d) return e + 1;
    if (c !== 0x2c) return -1;
    i = e + 1;
  }
}

/** Own keys in the parsed tree (a repeated key in the text is one key of the parse). */
function keyCount(v: unknown): number {
  let n = 0;
  if (Array.isArray(v)) {
    for (const x of v) if (typeof x === "object" && x !== null) n += keyCount(x);
    return n;
  }
  const o = v as Record<string, unknown>;
  for (const k in o) {
    n++;
    const x = o[k];
    if (typeof x === "object" && x !== null) n += keyCount(x);
  }
  return n;
}

/**
 * The layout of an upstream answer's text and its parse (before the adapter changed it), when the text is exactly
 * `JSON.stringify(value)`; else undefined.
 */
export function scanCompletion(text: string, value: Record<string, unknown>): CompletionLayout | undefined {
  if (text.charCodeAt(0) !== 0x7b) return undefined;
  const s: Scan = { t: text, i: 0, keys: 0 };
  const top: Top = { keys: [], spans: [] };
  if (obj(s, 0, top) !== text.length) return undefined;
  if (s.keys !== keyCount(value)) return undefined;
  let id = -1;
  let idEnd = -1;
  let provider = -1;
  let providerEnd = -1;
  let usage = -1;
  let usageEnd = -1;
  let choiceEnds: number[] | undefined;
  const { keys, spans } = top;
  for (let k = 0; k < keys.length; k++) {
    const key = keys[k];
    const a = spans[2 * k]!;
    const b = spans[2 * k + 1]!;
    if (key === "id") [id, idEnd] = [a, b];
    else if (key === "provider") [provider, providerEnd] = [a, b];
    else if (key === "usage") [usage, usageEnd] = [a, b];
    else if (key === "choices") {
      const choices = value.choices;
      if (!Array.isArray(choices)) return undefined;
      choiceEnds = [];
      // Each element's end: the elements are canonical values, so scan them again one by one.
      let i = a + 1;
      for (const choice of choices) {
        const sc: Scan = { t: text, i, keys: 0 };
        const e = scanValue(sc, 1);
        if (e < 0) return undefined;
        const isObj = typeof choice === "object" && choice !== null && !Array.isArray(choice);
        choiceEnds.push(isObj && (choice as Record<string, unknown>).native_finish_reason === undefined ? e - 1 : -1);
        i = e + 1;
      }
    }
  }
  if (id < 0 || choiceEnds === undefined) return undefined;
  return { value, text, id, idEnd, provider, providerEnd, usage, usageEnd, choiceEnds, keys };
}


/**
 * The answer's JSON text from the upstream's, when `final` is the upstream's answer with only `id`, `provider`,
 * each choice's added `native_finish_reason` and `usage` changed (the top-level values the same objects, the same
 * keys in the same order, `provider` added last when the upstream had none); else undefined (stringify `final`).
 */
export function completionJson(layout: CompletionLayout, final: Record<string, unknown>): string | undefined {
  const { value, text, keys } = layout;
  let n = 0;
  for (const k in final) {
    const key = keys[n];
    if (key === undefined) {
      if (k !== "provider" || layout.provider >= 0) return undefined;
    } else if (k !== key) return undefined;
    else if (k !== "id" && k !== "provider" && k !== "usage" && final[k] !== value[k]) return undefined;
    n++;
  }
  if (n < keys.length) return undefined;
  const id = final.id;
  const provider = final.provider;
  if (typeof id !== "string" || typeof provider !== "string") return undefined;
  // The edits in the text's order: id, provider, the choices' ends, usage (as they come).
  const edits: Array<{ a: number; b: number; s: string }> = [{ a: layout.id, b: layout.idEnd, s: JSON.stringify(id) }];
  if (layout.provider >= 0) edits.push({ a: layout.provider, b: layout.providerEnd, s: JSON.stringify(provider) });
  if (layout.usage >= 0) {
    if (final.usage === undefined) return undefined;
    edits.push({ a: layout.usage, b: layout.usageEnd, s: JSON.stringify(final.usage) });
  } else if (final.usage !== undefined) return undefined;
  const choices = final.choices as Array<Record<string, unknown>>;
  for (let c = 0; c < layout.choiceEnds.length; c++) {
    const at = layout.choiceEnds[c]!;
    if (at < 0) continue;
    const fr = choices[c]!.native_finish_reason;
    if (fr === undefined) continue;
    // `{}` gets no comma; the choice's own keys are the text's.
    const sep = text.charCodeAt(at - 1) === 0x7b ? "" : ",";
    edits.push({ a: at, b: at, s: `${sep}"native_finish_reason":${JSON.stringify(fr)}` });
  }
  edits.sort((x, y) => x.a - y.a);
  let out = "";
  let at = 0;
  for (const e of edits) {
    out += text.slice(at, e.a) + e.s;
    at = e.b;
  }
  if (layout.provider >= 0) return out + text.slice(at);
  return `${out}${text.slice(at, -1)},"provider":${JSON.stringify(provider)}}`;
}
