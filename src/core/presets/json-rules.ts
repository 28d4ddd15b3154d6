/**
 * A tiny, dependency-free kit of JSON checks used to write request rules as tables. Each check walks
 * a parsed JSON value and throws a {@link RuleViolation} naming the offending field in wire form
 * (`provider.sort`, `messages[0].role`). Pure: no I/O, no Connect, so rules are unit-tested directly
 * and the same rules serve gRPC and HTTP callers.
 */

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

/** Checks `value` found at `path`; throws RuleViolation when it is not acceptable. */
export type Check = (value: unknown, path: string) => void;

export function fail(path: string, problem: string): never {
  throw new RuleViolation(path, `${path} ${problem}`);
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
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

/** Any JSON value. */
export const anything: Check = () => undefined;

export function string(opts: { min?: number; max?: number; pattern?: RegExp; patternText?: string } = {}): Check {
  return (value, path) => {
    if (typeof value !== "string") fail(path, `must be a string, got ${describe(value)}`);
    if (opts.min !== undefined && value.length < opts.min)
      fail(path, `must be at least ${opts.min} character${opts.min === 1 ? "" : "s"} long`);
    if (opts.max !== undefined && value.length > opts.max) fail(path, `must be at most ${opts.max} characters long`);
    if (opts.pattern && !opts.pattern.test(value)) fail(path, opts.patternText ?? `must match ${opts.pattern.source}`);
  };
}

export function number(opts: { min?: number; max?: number } = {}): Check {
  return (value, path) => {
    if (typeof value !== "number" || !Number.isFinite(value))
      fail(path, `must be a number${rangeText(opts.min, opts.max)}, got ${describe(value)}`);
    if ((opts.min !== undefined && value < opts.min) || (opts.max !== undefined && value > opts.max))
      fail(path, `must be a number${rangeText(opts.min, opts.max)}, got ${value}`);
  };
}

/** A JSON number with no fractional part (1.0 parses to 1 and so passes; 1.5 does not). */
export function integer(opts: { min?: number; max?: number } = {}): Check {
  return (value, path) => {
    if (typeof value !== "number" || !Number.isInteger(value))
      fail(path, `must be an integer${rangeText(opts.min, opts.max)}, got ${typeof value === "number" ? value : describe(value)}`);
    if ((opts.min !== undefined && value < opts.min) || (opts.max !== undefined && value > opts.max))
      fail(path, `must be an integer${rangeText(opts.min, opts.max)}, got ${value}`);
  };
}

export const boolean: Check = (value, path) => {
  if (typeof value !== "boolean") fail(path, `must be a boolean, got ${describe(value)}`);
};

/** One of the listed strings. */
export function oneOf(values: readonly string[]): Check {
  const allowed = new Set(values);
  return (value, path) => {
    if (typeof value !== "string" || !allowed.has(value))
      fail(path, `must be one of ${values.map((v) => JSON.stringify(v)).join(", ")}, got ${typeof value === "string" ? JSON.stringify(value) : describe(value)}`);
  };
}

/** null, or what `check` accepts. */
export function nullable(check: Check): Check {
  return (value, path) => {
    if (value !== null) check(value, path);
  };
}

export function array(item: Check, opts: { min?: number; max?: number } = {}): Check {
  return (value, path) => {
    if (!Array.isArray(value)) fail(path, `must be an array, got ${describe(value)}`);
    if (opts.min !== undefined && value.length < opts.min)
      fail(path, `must contain at least ${opts.min} item${opts.min === 1 ? "" : "s"}`);
    if (opts.max !== undefined && value.length > opts.max)
      fail(path, `must contain at most ${opts.max} item${opts.max === 1 ? "" : "s"}`);
    for (let i = 0; i < value.length; i++) item(value[i], `${path}[${i}]`);
  };
}

export interface ObjectOptions {
  /** Keys that must be present (and not null unless the key's check allows null). */
  required?: readonly string[];
  /** Reject keys the shape does not list. */
  closed?: boolean;
}

/**
 * An object whose listed keys meet their checks. Unlisted keys are ignored unless `closed`.
 * A key whose value is `undefined` cannot come from JSON and counts as absent.
 */
export function object(shape: Readonly<Record<string, Check>>, opts: ObjectOptions = {}): Check {
  const required = new Set(opts.required ?? []);
  const entries = Object.entries(shape);
  const requiredOutsideShape = [...required].filter((k) => !Object.hasOwn(shape, k));
  return (value, path) => {
    if (!isPlainObject(value)) fail(path, `must be an object, got ${describe(value)}`);
    if (opts.closed) {
      for (const key of Object.keys(value)) {
        if (!Object.hasOwn(shape, key)) fail(join(path, key), "is not a recognised property");
      }
    }
    // Keys are checked in shape order, so a discriminator listed first is reported first.
    for (const [key, check] of entries) {
      const v = value[key];
      if (v !== undefined) check(v, join(path, key));
      else if (required.has(key)) fail(join(path, key), "is required");
    }
    for (const key of requiredOutsideShape) {
      if (value[key] === undefined) fail(join(path, key), "is required");
    }
  };
}

/** An object of arbitrary keys whose values all meet `valueCheck`. */
export function record(valueCheck: Check, opts: { maxEntries?: number; maxKeyLength?: number } = {}): Check {
  return (value, path) => {
    if (!isPlainObject(value)) fail(path, `must be an object, got ${describe(value)}`);
    const keys = Object.keys(value);
    if (opts.maxEntries !== undefined && keys.length > opts.maxEntries)
      fail(path, `must have at most ${opts.maxEntries} entries, got ${keys.length}`);
    for (const key of keys) {
      if (opts.maxKeyLength !== undefined && key.length > opts.maxKeyLength)
        fail(path, `keys must be at most ${opts.maxKeyLength} characters long`);
      valueCheck(value[key], `${path}.${key}`);
    }
  };
}

/**
 * An object discriminated by `key`: the key is required and one of `variants`' names; the rest of
 * the object must meet that variant's check. `fallback`, if given, handles names not listed.
 */
export function discriminated(
  key: string,
  variants: Readonly<Record<string, Check>>,
  fallback?: (name: string) => Check | undefined,
): Check {
  const names = Object.keys(variants);
  const nameCheck = oneOf(names);
  return (value, path) => {
    if (!isPlainObject(value)) fail(path, `must be an object, got ${describe(value)}`);
    const name = value[key];
    if (name === undefined) fail(join(path, key), "is required");
    const variant =
      typeof name === "string" ? (Object.hasOwn(variants, name) ? variants[name] : fallback?.(name)) : undefined;
    if (!variant) return nameCheck(name, join(path, key));
    variant(value, path);
  };
}

/** The first check whose guard matches the value's JSON type decides; otherwise `message`. */
export function byType(
  branches: Partial<Record<"string" | "number" | "boolean" | "array" | "object", Check>>,
  message: string,
): Check {
  return (value, path) => {
    const kind = Array.isArray(value) ? "array" : value === null ? "null" : typeof value;
    const branch = (branches as Record<string, Check | undefined>)[kind];
    if (!branch) fail(path, message);
    branch(value, path);
  };
}

function join(path: string, key: string): string {
  return path === "" ? key : `${path}.${key}`;
}
