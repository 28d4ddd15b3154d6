/**
 * Prisma's query compiler kept on Liftoff, V8's baseline WebAssembly compiler.
 *
 * The query compiler (≈ 1.9 MB of wasm) runs at start-up and for the Prisma queries of the admin, console and
 * intern routes, never per chat request. Left to itself V8 recompiles its hot functions with TurboFan on its
 * helper threads, whose scratch memory (V8 zones, ≈ 15 MB at their peak) then stays resident in those threads'
 * malloc arenas after it is freed: ≈ 8–9 MB of a `serve` process's RSS for its whole life (bench/README.md,
 * "Resident memory: Prisma's query compiler kept on Liftoff").
 *
 * {@link compileOnLiftoff} runs `compile` with `--liftoff-only` set (V8 reads it when it compiles a module, and a
 * module compiled under it is never tiered up), then turns tier-up back on for whatever compiles later: undici's
 * llhttp parses every upstream response and keeps TurboFan. `--liftoff-only` turns `--wasm-dynamic-tiering` and
 * `--wasm-tier-up` off by implication; restoring `--wasm-dynamic-tiering` alone re-enables tier-up for modules
 * compiled afterwards while the module compiled under the flag stays on Liftoff (restoring `--wasm-tier-up` too
 * would tier it up as well). Nothing is changed when the operator named a tiering flag on the node command line or
 * in NODE_OPTIONS (`node --no-liftoff-only bin/portico.mjs serve` keeps V8's own choice for everything).
 */
import v8 from "node:v8";

/** The flags that choose how V8 compiles WebAssembly; naming any of them (or its `--no-` form) leaves the choice to the operator. */
export const WASM_TIER_FLAGS = ["--liftoff-only", "--liftoff", "--wasm-tier-up", "--wasm-dynamic-tiering"] as const;

/** True when `args` names one of {@link WASM_TIER_FLAGS}, negated or not, with dashes or underscores. */
export function namesWasmTierFlag(args: readonly string[]): boolean {
  const spellings = WASM_TIER_FLAGS.flatMap((f) => {
    const name = f.slice(2);
    return [name, `no-${name}`].flatMap((n) => [`--${n}`, `--${n.replaceAll("-", "_")}`]);
  });
  return args.some((a) => spellings.some((s) => a === s || a.startsWith(`${s}=`)));
}

const ON = "--liftoff-only";
const OFF = "--no-liftoff-only --wasm-dynamic-tiering";

/** Runs `compile` with WebAssembly kept on Liftoff (see the module's comment), unless the operator chose the tiering. */
export async function compileOnLiftoff<T>(
  compile: () => Promise<T>,
  execArgv: readonly string[] = process.execArgv,
  nodeOptions: string = process.env.NODE_OPTIONS ?? "",
  set: (flags: string) => void = v8.setFlagsFromString,
): Promise<T> {
  if (namesWasmTierFlag([...execArgv, ...nodeOptions.split(/\s+/)])) return compile();
  set(ON);
  try {
    return await compile();
  } finally {
    set(OFF);
  }
}
