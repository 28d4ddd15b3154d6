/**
 * Builders for request definitions on zod 4. Each builder returns a zod schema whose error callbacks
 * write the service's own messages ("temperature must be a number between 0 and 2, got 3"), so one
 * definition gives both the validation (with precise messages and the wire path of the field) and the
 * JSON Schema of the OpenAPI document (`z.toJSONSchema`). `validate(schema, body)` throws a
 * {@link RuleViolation} for the first broken rule; the core turns it into 400 bad_request naming the field.
 *
 * Conventions: an object's keys are optional unless listed as required, a key whose value is
 * `undefined` (which JSON cannot carry) counts as absent, unknown keys pass unless the object is closed.
 */
import { z } from "zod";

/** A rule was broken; `field` is the dotted wire path, `message` a full sentence naming it. */
export class RuleViolation extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = "RuleViolation";
  }
}

export function fail(path: string, problem: string): never {
  throw new RuleViolation(path, `${path} ${problem}`);
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

function rangeText(min: number | undefined, max: number | undefined): string {
  if (min !== undefined && max !== undefined) return ` between ${min} and ${max}`;
  if (min !== undefined) return ` of at least ${min}`;
  if (max !== undefined) return ` of at most ${max}`;
  return "";
}

const REQUIRED = "is required";

/** Error option for every issue a schema raises: "is required" when absent, else `problem(input)`. */
function says(problem: (input: unknown) => string): { error: (iss: { input?: unknown }) => string } {
  return { error: (iss) => (iss.input === undefined ? REQUIRED : problem(iss.input)) };
}

/** Any JSON value. */
export const anything = () => z.unknown();

export function string(opts: { min?: number; max?: number; pattern?: RegExp; patternText?: string } = {}) {
  let s = z.string(says((v) => `must be a string, got ${describeValue(v)}`));
  if (opts.min !== undefined) {
    const min = opts.min;
    s = s.min(min, says(() => `must be at least ${min} character${min === 1 ? "" : "s"} long`));
  }
  if (opts.max !== undefined) s = s.max(opts.max, says(() => `must be at most ${opts.max} characters long`));
  if (opts.pattern) s = s.regex(opts.pattern, says(() => opts.patternText ?? `must match ${opts.pattern!.source}`));
  return s;
}

/** A number schema in [min, max] whose every failure reads "must be <a number|an integer> <range>, got <value>". */
function ranged(base: (params: ReturnType<typeof says>) => z.ZodNumber, what: string, opts: { min?: number; max?: number }) {
  const wrong = says((v) => `must be ${what}${rangeText(opts.min, opts.max)}, got ${typeof v === "number" ? v : describeValue(v)}`);
  let n = base(wrong);
  if (opts.min !== undefined) n = n.min(opts.min, wrong);
  if (opts.max !== undefined) n = n.max(opts.max, wrong);
  return n;
}

export function number(opts: { min?: number; max?: number } = {}) {
  return ranged((p) => z.number(p), "a number", opts);
}

/** A JSON number with no fractional part within the safe-integer range (1.0 parses to 1 and so passes). */
export function integer(opts: { min?: number; max?: number } = {}) {
  return ranged((p) => z.int(p), "an integer", opts);
}

export const boolean = () => z.boolean(says((v) => `must be a boolean, got ${describeValue(v)}`));

function oneOfText(values: readonly string[], v: unknown): string {
  return `must be one of ${values.map((x) => JSON.stringify(x)).join(", ")}, got ${typeof v === "string" ? JSON.stringify(v) : describeValue(v)}`;
}

/** One of the listed strings. */
export function oneOf<const T extends readonly [string, ...string[]]>(values: T) {
  return z.enum(values, says((v) => oneOfText(values, v)));
}

/** null, or what `schema` accepts. */
export function nullable<T extends z.ZodType>(schema: T) {
  return schema.nullable();
}

export function array<T extends z.ZodType>(item: T, opts: { min?: number; max?: number } = {}) {
  let a = z.array(item, says((v) => `must be an array, got ${describeValue(v)}`));
  if (opts.min !== undefined) {
    const min = opts.min;
    a = a.min(min, says(() => `must contain at least ${min} item${min === 1 ? "" : "s"}`));
  }
  if (opts.max !== undefined) {
    const max = opts.max;
    a = a.max(max, says(() => `must contain at most ${max} item${max === 1 ? "" : "s"}`));
  }
  return a;
}

type Shape = Record<string, z.ZodType>;
type Optionalised<S extends Shape, R extends keyof S> = {
  [K in keyof S]: K extends R ? S[K] : z.ZodOptional<S[K]>;
};

const objectWrong = says((v) => `must be an object, got ${describeValue(v)}`);

function optionalise<S extends Shape, R extends keyof S>(shape: S, required: readonly R[]): Optionalised<S, R> {
  const out: Record<string, z.ZodType> = {};
  for (const [key, schema] of Object.entries(shape)) out[key] = required.includes(key as R) ? schema : schema.optional();
  return out as Optionalised<S, R>;
}

/** An object whose listed keys meet their schemas; unknown keys pass through. */
export function object<S extends Shape, R extends keyof S = never>(shape: S, opts: { required?: readonly R[] } = {}) {
  return z.looseObject(optionalise(shape, opts.required ?? []), objectWrong);
}

/** An object whose listed keys meet their schemas; any other key is refused ("is not a recognised property"). */
export function closedObject<S extends Shape, R extends keyof S = never>(shape: S, opts: { required?: readonly R[] } = {}) {
  return z.strictObject(optionalise(shape, opts.required ?? []), objectWrong);
}

/** An object of arbitrary keys whose values all meet `value`. */
export function record<T extends z.ZodType>(value: T, opts: { maxEntries?: number; maxKeyLength?: number } = {}) {
  const { maxEntries, maxKeyLength } = opts;
  return z.record(z.string(), value, objectWrong).check(
    z.superRefine((v, ctx) => {
      const keys = Object.keys(v);
      if (maxEntries !== undefined && keys.length > maxEntries) {
        ctx.addIssue({ code: "custom", input: v, message: `must have at most ${maxEntries} entries, got ${keys.length}` });
      } else if (maxKeyLength !== undefined && keys.some((k) => k.length > maxKeyLength)) {
        ctx.addIssue({ code: "custom", input: v, message: `keys must be at most ${maxKeyLength} characters long` });
      }
    }),
  );
}

/**
 * An object discriminated by `key`: each variant is an object schema whose `key` is a literal (or an
 * enum); a missing key "is required", an unknown one lists the accepted names.
 */
export function discriminated<const V extends readonly [z.ZodObject, ...z.ZodObject[]]>(key: string, variants: V) {
  const names = variants.flatMap((v) => {
    const disc = v.shape[key] as z.ZodType | undefined;
    return disc ? [...((disc as unknown as { _zod: { values?: Set<unknown> } })._zod.values ?? [])].map(String) : [];
  });
  return z.discriminatedUnion(key, variants, {
    error: (iss) => {
      const input = iss.input;
      if (!isPlainObject(input)) return `must be an object, got ${describeValue(input)}`;
      const name = input[key];
      return name === undefined ? REQUIRED : oneOfText(names, name);
    },
  });
}

/** The variant whose JSON type matches decides; a value of any other type gets `message`. */
export function byType<const T extends readonly [z.ZodType, ...z.ZodType[]]>(branches: T, message: string) {
  return z.union(branches, says(() => message));
}

/** The wire path of an issue path: `messages[0].content`, `provider.sort`. */
export function wirePath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const seg of path) {
    if (typeof seg === "number") out += `[${seg}]`;
    else out += out === "" ? String(seg) : `.${String(seg)}`;
  }
  return out;
}

type Issue = z.core.$ZodIssue;

/**
 * The issue to report: for a union (byType) whose input matched one branch's JSON type, that branch's
 * first issue (its path prefixed); otherwise the issue itself. The matching branch is the only one
 * that failed inside the value (an object's key, an array's item), or else the only one whose failure
 * is not a type mismatch of the value itself.
 */
function decisive(issue: Issue): Issue {
  if (issue.code !== "invalid_union" || issue.errors.length === 0) return issue;
  const firsts = issue.errors.map((branch) => branch[0]).filter((first): first is Issue => first !== undefined);
  const inside = firsts.filter((first) => first.path.length > 0);
  const notTypeMismatch = firsts.filter((first) => first.path.length === 0 && first.code !== "invalid_type");
  const inner = inside.length === 1 ? inside[0] : inside.length === 0 && notTypeMismatch.length === 1 ? notTypeMismatch[0] : undefined;
  if (!inner) return issue;
  return decisive({ ...inner, path: [...issue.path, ...inner.path] } as Issue);
}

/**
 * The first issue of a failed parse as a RuleViolation; `root` names the value itself (`body` for a
 * request body, the field's name when one field is checked alone). A message starting with `[`
 * names an entry of the field (`allowed_models[3] must …`) while the field stays the list.
 */
export function violationOf(error: z.ZodError, root = "body"): RuleViolation {
  const issue = decisive(error.issues[0]!);
  const inner = wirePath(issue.path);
  // Paths inside a request body start at its keys; inside a named field they continue its name.
  const under = (base: string, rest: string) => (base === "body" ? rest : rest.startsWith("[") ? `${base}${rest}` : `${base}.${rest}`);
  const path = inner === "" ? root : under(root, inner);
  if (issue.code === "unrecognized_keys") {
    const field = under(path, issue.keys[0]!);
    return new RuleViolation(field, `${field} is not a recognised property`);
  }
  const sep = issue.message.startsWith("[") ? "" : " ";
  return new RuleViolation(path, `${path}${sep}${issue.message}`);
}

/** Validates `body` against `schema`: the parsed value, or a RuleViolation for the first broken rule. */
export function validate<T extends z.ZodType>(schema: T, body: unknown, root = "body"): z.output<T> {
  const res = schema.safeParse(body);
  if (!res.success) throw violationOf(res.error, root);
  return res.data;
}

/** A request body's definition: its schema (the OpenAPI document's, see {@link requestJsonSchema}) and its parser. */
export interface BodyDefinition<T extends z.ZodType> {
  schema: T;
  /** Validates a parsed JSON body; throws RuleViolation naming the first broken field. */
  parse(body: unknown): z.output<T>;
}

/** The definition of a body that must be a JSON object valid against `schema`. */
export function bodyDefinition<T extends z.ZodType>(schema: T): BodyDefinition<T> {
  return {
    schema,
    parse(body) {
      if (!isPlainObject(body)) fail("body", "must be a JSON object");
      return validate(schema, body);
    },
  };
}

/**
 * The JSON Schema (draft 2020-12, as OpenAPI 3.1 uses) of what a request may send, derived from its
 * definition: the OpenAPI document's request bodies are exactly these.
 */
export function requestJsonSchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;
  return constAsEnum(rest) as Record<string, unknown>;
}

/** `{const: x}` written as `{enum: [x]}`, the form the OpenAPI document uses (as @fastify/swagger writes it). */
function constAsEnum(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(constAsEnum);
  if (!isPlainObject(node)) return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === "const") out.enum = [v];
    else if (k === "properties" && isPlainObject(v)) out[k] = Object.fromEntries(Object.entries(v).map(([name, p]) => [name, constAsEnum(p)]));
    else out[k] = k === "enum" || k === "default" || k === "examples" ? v : constAsEnum(v);
  }
  return out;
}

export { z };
