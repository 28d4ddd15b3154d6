/**
 * V8 heap settings that `serve` processes choose at run time, each unless the operator named the flag.
 *
 * The old generation's growth between full collections: V8 lets it reach 2–4 × the live heap when collections
 * are cheap beside the allocation rate, and the limit left by start-up's last collection (≈ 3.6 × live) holds
 * until load brings the next one: RSS after a minute of chat at c=32 read 240–290 MB for ≈ 50 MB of live heap.
 * `--heap-growing-percent=50` caps the limit at 1.5 × live (bench/README.md, "Resident memory under load: what
 * was promoted, and why"). It is set at run time, before start-up allocates (V8 reads it at each collection;
 * NODE_OPTIONS cannot carry it), unless the operator chose a value on the node command line:
 * `node --heap-growing-percent=0 bin/portico.mjs serve` restores V8's own choice. docs/operations.md, "Memory".
 *
 * The young generation: see {@link capYoungGeneration}.
 */
import v8 from "node:v8";

export const SERVE_HEAP_GROWING_PERCENT = 50;
/** The semi-space size (MB) of `serve`'s cluster workers (`--max-semi-space-size` on their command line). */
export const SERVE_SEMI_SPACE_MB = 4;

/** True when `args` (node's command line, or NODE_OPTIONS split on blanks) names V8 flag `flag` (`--a-b`), in either spelling. */
export function namesFlag(args: readonly string[], flag: string): boolean {
  const spellings = [flag, `--${flag.slice(2).replaceAll("-", "_")}`];
  return args.some((a) => spellings.some((s) => a === s || a.startsWith(`${s}=`)));
}

/**
 * True when the operator named V8 flag `flag` for this process: on the node command line (`execArgv`) or in
 * NODE_OPTIONS (split on blanks), in either spelling.
 */
export function operatorNamesFlag(flag: string, execArgv: readonly string[] = process.execArgv, nodeOptions: string = process.env.NODE_OPTIONS ?? ""): boolean {
  return namesFlag([...execArgv, ...nodeOptions.split(/\s+/)], flag);
}

const FLAG = "--heap-growing-percent";

/** Sets the flag unless `execArgv` names it; returns the flag set, or undefined when the operator's stands. */
export function capHeapGrowth(execArgv: readonly string[] = process.execArgv, set: (flags: string) => void = v8.setFlagsFromString): string | undefined {
  if (namesFlag(execArgv, FLAG)) return undefined;
  const flag = `${FLAG}=${SERVE_HEAP_GROWING_PERCENT}`;
  set(flag);
  return flag;
}
