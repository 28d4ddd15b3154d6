/**
 * The young generation of a single `serve` process, kept at 2 × {@link SINGLE_PROCESS_SEMI_SPACE_MB} MB instead of
 * V8's 2 × 16 MB, at run time. V8 fixes the semi-space's maximum (`--max-semi-space-size`) when it starts, so a
 * process that was not started with the flag cannot lower it; but V8 grows the young generation step by step,
 * each step by `--semi-space-growth-factor` (read at each step), from 1 MB per semi-space: 1, 2, 4, 8, 16 MB.
 * After each collection this sets the factor to 2 while a step would not pass the size and to 1 otherwise, so
 * the steps stop where the command-line flag would have; after V8 shrank it (idle periods, to any multiple of a
 * page) it grows back by doubling up to the size, never past it.
 *
 * 8 MB, not the 4 MB `serve`'s cluster workers get (each serves a share of the load): at c=32 chat 2 × 4 MB saved
 * ≈ 24 MB but copied the in-flight requests four times as often (≈ 6–8 KB more per request, +20–30 µs in a model of
 * the load), 2 × 8 MB saves ≈ 16 MB for about a quarter of that (bench/README.md, "Resident memory: the young
 * generation …"; the old generation is capped by `--heap-growing-percent`, so what is promoted more costs
 * collections, not memory). Not done when the operator named `--max-semi-space-size` or
 * `--semi-space-growth-factor` on the node command line or in NODE_OPTIONS (cluster workers get the former).
 */
import v8 from "node:v8";
import { PerformanceObserver } from "node:perf_hooks";
import { operatorNamesFlag } from "./heap-growth.js";

/** The semi-space size (MB) a single `serve` process keeps. */
export const SINGLE_PROCESS_SEMI_SPACE_MB = 8;

const GROWTH = "--semi-space-growth-factor";

export interface YoungGenerationCap {
  /** Applies the rule once more (the observer calls it after collections); returns the factor in force. */
  check(): number;
  stop(): void;
}

export interface YoungGenerationOptions {
  execArgv?: readonly string[];
  nodeOptions?: string;
  semiSpaceMb?: number;
  /** The young generation's size in bytes as V8 reports it (both semi-spaces). */
  newSpaceBytes?: () => number;
  set?: (flags: string) => void;
  /** Calls `onCollection` after garbage collections; returns a stop function. */
  observe?: (onCollection: () => void) => () => void;
}

function newSpaceBytes(): number {
  return v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space")?.space_size ?? 0;
}

function observeCollections(onCollection: () => void): () => void {
  const observer = new PerformanceObserver(onCollection);
  observer.observe({ entryTypes: ["gc"] });
  return () => observer.disconnect();
}

/** Starts keeping the young generation at the size; undefined (nothing done) when the operator chose. */
export function capYoungGeneration(o: YoungGenerationOptions = {}): YoungGenerationCap | undefined {
  const chosen = (flag: string) => operatorNamesFlag(flag, o.execArgv, o.nodeOptions);
  if (chosen("--max-semi-space-size") || chosen(GROWTH)) return undefined;
  const target = 2 * (o.semiSpaceMb ?? SINGLE_PROCESS_SEMI_SPACE_MB) * 1024 * 1024;
  const size = o.newSpaceBytes ?? newSpaceBytes;
  const set = o.set ?? v8.setFlagsFromString;
  let factor = 2;
  const check = () => {
    const want = 2 * size() <= target ? 2 : 1;
    if (want !== factor) set(`${GROWTH}=${(factor = want)}`);
    return factor;
  };
  check();
  const stop = (o.observe ?? observeCollections)(check);
  return { check, stop };
}
