/**
 * The benchmarks' command-line flags: `--name value` pairs and bare `--name` switches, read from `process.argv`.
 * One definition for every bench (each had its own copy of these three lines).
 */

/** The value after `--name`, or undefined when the flag is absent. */
export function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
}

/** `--name`'s value as a number, `fallback` when absent; a value that is not a finite number stops the bench with its name. */
export function num(name: string, fallback: number): number {
  const text = flag(name);
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isFinite(n)) throw new Error(`--${name} takes a number (got ${JSON.stringify(text)})`);
  return n;
}

/** `--name`'s comma-separated values (`fallback` when absent), empty items dropped. */
export function list(name: string, fallback: string): string[] {
  return (flag(name) ?? fallback).split(",").filter(Boolean);
}
