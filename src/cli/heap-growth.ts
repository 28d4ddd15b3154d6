/**
 * The old generation's growth between full collections in `serve` processes. V8 lets it reach 2–4 × the live
 * heap when collections are cheap beside the allocation rate, and the limit left by start-up's last collection
 * (≈ 3.6 × live) holds until load brings the next one: RSS after a minute of chat at c=32 read 240–290 MB for
 * ≈ 50 MB of live heap. `--heap-growing-percent=50` caps the limit at 1.5 × live (bench/README.md, "Resident
 * memory under load: what was promoted, and why"). It is set at run time, before start-up allocates (V8 reads it
 * at each collection; NODE_OPTIONS cannot carry it), unless the operator chose a value on the node command line:
 * `node --heap-growing-percent=0 bin/portico.mjs serve` restores V8's own choice. docs/operations.md, "Memory".
 */
import v8 from "node:v8";

export const SERVE_HEAP_GROWING_PERCENT = 50;
const FLAG = "--heap-growing-percent";

/** Sets the flag unless `execArgv` names it; returns the flag set, or undefined when the operator's stands. */
export function capHeapGrowth(execArgv: readonly string[] = process.execArgv, set: (flags: string) => void = v8.setFlagsFromString): string | undefined {
  if (execArgv.some((a) => a === FLAG || a.startsWith(`${FLAG}=`) || a === "--heap_growing_percent" || a.startsWith("--heap_growing_percent="))) return undefined;
  const flag = `${FLAG}=${SERVE_HEAP_GROWING_PERCENT}`;
  set(flag);
  return flag;
}
