/**
 * Almost-JSON to JSON (the response-healing plugin, docs/plugins.md): cut the JSON value out of what a model
 * wrote around it (a markdown code fence, prose before or after), repair it with `jsonrepair` (trailing commas,
 * single quotes, unquoted keys, comments, a truncated object or array), and check it against the request's JSON
 * schema with ajv. Pure functions; the plugin module decides what to do with the result.
 */
import { jsonrepair } from "jsonrepair";
import { Ajv, type ValidateFunction } from "ajv";

/** What the request asked for: any JSON object (`json_object`), or a value matching a schema (`json_schema`). */
export type JsonTarget = { kind: "object" } | { kind: "schema"; schema: Record<string, unknown> };

export interface HealResult {
  /** The JSON text to answer with: the answer itself when it was already JSON, else the repaired text; the answer unchanged when it could not be repaired. */
  text: string;
  /** Whether `text` differs from the answer (it was cut out, repaired, or both). */
  healed: boolean;
  /** Whether `text` is JSON of the asked kind (and, with a schema, matches it). */
  valid: boolean;
  /** What was done: "extracted" (prose or a code fence removed), "repaired" (the JSON itself was fixed). */
  actions: string[];
  /** Why `valid` is false: the first few schema errors (paths and rules, no values), or that nothing could be repaired. */
  errors?: string[];
}

/** At most this many schema errors are reported. */
const MAX_ERRORS = 5;

/**
 * The JSON value in `text`: the first fenced code block's content when there is one, from its first `{` (or `[`
 * when arrays are allowed) to the bracket that closes it (strings, single- or double-quoted, are skipped), or to
 * the end of the text when it never closes (a truncated answer, which jsonrepair completes). Undefined: no
 * opening bracket at all.
 */
export function cutJson(text: string, arrays: boolean): string | undefined {
  const fence = /```[A-Za-z0-9_-]*[^\S\n]*\n?([\s\S]*?)(?:```|$)/.exec(text);
  const body = fence ? fence[1]! : text;
  let start = body.indexOf("{");
  if (arrays) {
    const bracket = body.indexOf("[");
    if (bracket >= 0 && (start < 0 || bracket < start)) start = bracket;
  }
  if (start < 0) return undefined;
  let depth = 0;
  let quote: string | null = null;
  let escaped = false;
  for (let i = start; i < body.length; i++) {
    const c = body[i]!;
    if (quote !== null) {
      if (escaped) escaped = false;
      else if (c === "\\") escaped = true;
      else if (c === quote) quote = null;
      continue;
    }
    if (c === '"' || c === "'") quote = c;
    else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") {
      depth--;
      if (depth === 0) return body.slice(start, i + 1);
    }
  }
  return body.slice(start);
}

/** A JSON-schema checker with a bounded cache of compiled schemas (compiling costs far more than checking). */
export interface SchemaChecker {
  /** The errors of `value` against `schema` (empty: it matches); undefined when the schema itself cannot be compiled. */
  check(schema: Record<string, unknown>, value: unknown): string[] | undefined;
}

export function createSchemaChecker(maxCached = 100): SchemaChecker {
  // strict: false ignores keywords ajv does not know (OpenAI's `strict`, descriptions' siblings); formats are not
  // checked (no format library is loaded): documented in docs/plugins.md.
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false, logger: false });
  const cache = new Map<string, ValidateFunction | null>();
  return {
    check(schema, value) {
      const key = JSON.stringify(schema);
      let validate = cache.get(key);
      if (validate === undefined) {
        try {
          // `$schema` names a draft ajv may not have loaded (2020-12); the keywords used by structured outputs are the same.
          const { $schema: _draft, $id: _id, ...rest } = schema;
          validate = ajv.compile(rest);
        } catch {
          validate = null;
        }
        if (cache.size >= maxCached) cache.delete(cache.keys().next().value!);
        cache.set(key, validate);
      }
      if (validate === null) return undefined;
      if (validate(value)) return [];
      return (validate.errors ?? []).slice(0, MAX_ERRORS).map((e) => `${e.instancePath || "/"} ${e.message ?? "does not match the schema"}`);
    },
  };
}

function parse(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

const isObject = (v: unknown) => typeof v === "object" && v !== null && !Array.isArray(v);

/** Heals `answer` toward `target` (see the module comment). Never throws. */
export function healJson(answer: string, target: JsonTarget, checker: SchemaChecker): HealResult {
  const verdict = (text: string, value: unknown, healed: boolean, actions: string[]): HealResult => {
    if (target.kind === "object") {
      return isObject(value)
        ? { text, healed, valid: true, actions }
        : { text, healed, valid: false, actions, errors: ["the answer is JSON but not an object"] };
    }
    const errors = checker.check(target.schema, value);
    if (errors === undefined) return { text, healed, valid: true, actions, errors: ["the request's JSON schema could not be compiled: not checked"] };
    return errors.length === 0 ? { text, healed, valid: true, actions } : { text, healed, valid: false, actions, errors };
  };
  const direct = parse(answer);
  if (direct.ok) return verdict(answer, direct.value, false, []);
  const cut = cutJson(answer, target.kind === "schema");
  if (cut === undefined) return { text: answer, healed: false, valid: false, actions: [], errors: ["no JSON object or array in the answer"] };
  const actions = cut.trim() === answer.trim() ? [] : ["extracted"];
  const extracted = parse(cut);
  if (extracted.ok) return verdict(cut, extracted.value, true, actions);
  let repaired: string;
  try {
    repaired = jsonrepair(cut);
  } catch {
    return { text: answer, healed: false, valid: false, actions: [], errors: ["the JSON in the answer could not be repaired"] };
  }
  const fixed = parse(repaired);
  if (!fixed.ok) return { text: answer, healed: false, valid: false, actions: [], errors: ["the JSON in the answer could not be repaired"] };
  return verdict(repaired, fixed.value, true, [...actions, "repaired"]);
}
