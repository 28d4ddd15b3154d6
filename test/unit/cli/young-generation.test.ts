import v8 from "node:v8";
import { describe, expect, it } from "vitest";
import { capYoungGeneration, SINGLE_PROCESS_SEMI_SPACE_MB } from "../../../src/cli/young-generation.js";

const MB = 1024 * 1024;

/** A cap over a young generation of `sizes[i]` MB at its i-th check, recording the flags it sets. */
function capOver(sizes: number[], o: { execArgv?: string[]; nodeOptions?: string } = {}) {
  const set: string[] = [];
  let i = 0;
  let stopped = false;
  const cap = capYoungGeneration({
    execArgv: o.execArgv ?? [],
    nodeOptions: o.nodeOptions ?? "",
    newSpaceBytes: () => sizes[Math.min(i++, sizes.length - 1)]! * MB,
    set: (f) => set.push(f),
    observe: () => () => (stopped = true),
  });
  return { cap, set, stopped: () => stopped };
}

describe("capYoungGeneration", () => {
  const target = 2 * SINGLE_PROCESS_SEMI_SPACE_MB;

  it("stops V8's growth steps at the size, and lets it double back up to it, never past it, after a shrink", () => {
    const { cap, set } = capOver([1, 2, 4, target, target, target * 0.375, target * 0.75, target / 2, target]);
    expect(cap).toBeDefined();
    const factors = Array.from({ length: 8 }, () => cap!.check());
    expect(factors).toEqual([2, 2, 1, 1, 2, 1, 2, 1]);
    expect(set).toEqual(["--semi-space-growth-factor=1", "--semi-space-growth-factor=2", "--semi-space-growth-factor=1", "--semi-space-growth-factor=2", "--semi-space-growth-factor=1"]);
  });

  it("leaves the young generation alone when the operator named its size or growth, on the command line or in NODE_OPTIONS", () => {
    for (const o of [
      { execArgv: ["--max-semi-space-size=16"] },
      { execArgv: ["--max_semi_space_size", "8"] },
      { nodeOptions: "--enable-source-maps --max-semi-space-size=2" },
      { execArgv: ["--semi-space-growth-factor=2"] },
    ]) {
      const { cap, set } = capOver([1, target], o);
      expect(cap).toBeUndefined();
      expect(set).toEqual([]);
    }
  });

  it("stops observing collections when told", () => {
    const { cap, stopped } = capOver([1]);
    cap!.stop();
    expect(stopped()).toBe(true);
  });

  it("runs on this process's V8, whose flag accepts the values at run time", () => {
    const cap = capYoungGeneration({ execArgv: [], nodeOptions: "" });
    try {
      expect([1, 2]).toContain(cap!.check());
    } finally {
      cap!.stop();
      v8.setFlagsFromString("--semi-space-growth-factor=2");
    }
  });
});
