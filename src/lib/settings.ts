/**
 * Building blocks for reading settings (environment variables, profile files) with zod 4, the same
 * library the request definitions use. Every failure names the setting at fault: `settingsError`
 * turns the first issue into "<SETTING> <problem>" (the setting is the issue's path).
 */
import { z } from "zod";

/** An empty variable counts as unset (so `PORT=` keeps the default). */
/** An empty variable counts as unset. */
export const emptyAsAbsent = (v: unknown) => (v === "" ? undefined : v);

/** An integer setting in [min, max]; unset or empty → `fallback`. */
export function intSetting(fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER) {
  const problem = { error: () => `must be an integer between ${min} and ${max}` };
  return z.preprocess(emptyAsAbsent, z.coerce.number(problem).int(problem).min(min, problem).max(max, problem).default(fallback));
}

/** An optional non-negative integer setting (no default: the consumer has one). */
export function optionalCount() {
  const problem = { error: () => "must be a non-negative integer" };
  return z.preprocess(emptyAsAbsent, z.coerce.number(problem).int(problem).min(0, problem).optional());
}

/** An optional integer setting in [min, max] (no default: unset means the feature is off). */
export function optionalInt(min: number, max: number) {
  const problem = { error: () => `must be an integer between ${min} and ${max}` };
  return z.preprocess(emptyAsAbsent, z.coerce.number(problem).int(problem).min(min, problem).max(max, problem).optional());
}

/** A boolean setting: 1/true/yes/on or 0/false/no/off (any case); unset or empty → `fallback`. */
export function boolSetting(fallback: boolean) {
  return z.preprocess(
    emptyAsAbsent,
    z
      .stringbool({ truthy: ["1", "true", "yes", "on"], falsy: ["0", "false", "no", "off"], case: "insensitive", error: () => "must be true or false" })
      .default(fallback),
  );
}

/** A text setting; unset or empty → undefined. With a rule, any other value must match `pattern` or fails with `problem`. */
export function textSetting(rule?: { pattern: RegExp; problem: string }) {
  const text = rule ? z.string().regex(rule.pattern, { error: () => rule.problem }) : z.string();
  return z.preprocess(emptyAsAbsent, text.optional());
}

/** The first issue as "<setting> <problem>", the setting being the issue's dotted path under `prefix`. */
export function settingsMessage(error: z.ZodError, prefix = ""): string {
  const issue = error.issues[0]!;
  const name = issue.path.map(String).join(".");
  return `${prefix}${name}${name ? " " : ""}${issue.message}`;
}

export { z };
