import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { compileOnLiftoff, namesWasmTierFlag } from "../../../src/lib/wasm-liftoff.js";

describe("compileOnLiftoff", () => {
  it("sets --liftoff-only around the compile and turns dynamic tiering back on after it, also when the compile throws", async () => {
    const set: string[] = [];
    expect(await compileOnLiftoff(async () => 7, ["--enable-source-maps"], "--max-semi-space-size=4", (f) => set.push(f))).toBe(7);
    await expect(compileOnLiftoff(() => Promise.reject(new Error("no client")), [], "", (f) => set.push(f))).rejects.toThrow("no client");
    expect(set).toEqual(["--liftoff-only", "--no-liftoff-only --wasm-dynamic-tiering", "--liftoff-only", "--no-liftoff-only --wasm-dynamic-tiering"]);
  });

  it("leaves the operator's choice: a tiering flag, negated or in either spelling, on the command line or in NODE_OPTIONS", async () => {
    const set: string[] = [];
    const choices: [string[], string][] = [
      [["--no-liftoff-only"], ""],
      [["--liftoff_only"], ""],
      [["--no-wasm-dynamic-tiering"], ""],
      [[], "--wasm-tier-up"],
      [[], "--inspect --no-liftoff"],
    ];
    for (const [argv, options] of choices) expect(await compileOnLiftoff(async () => 1, argv, options, (f) => set.push(f))).toBe(1);
    expect(set).toEqual([]);
    expect(namesWasmTierFlag(["--liftoff-onlyx", "--wasm-tier-up-x"])).toBe(false);
  });

  it("in a real process: the module compiled inside stays on Liftoff, one compiled after it tiers up to TurboFan", () => {
    // Two one-function modules (`f` returns k); both called alike until the second has tiered up, then the first
    // is checked. %IsLiftoffFunction needs --allow-natives-syntax.
    const script = `
      import("./src/lib/wasm-liftoff.ts").then(async ({ compileOnLiftoff }) => {
        const make = (k) => new WebAssembly.Instance(new WebAssembly.Module(new Uint8Array(
          [0,97,115,109,1,0,0,0,1,5,1,96,0,1,127,3,2,1,0,7,5,1,1,102,0,0,10,6,1,4,0,65,k,11]))).exports.f;
        const inside = await compileOnLiftoff(async () => make(42), [], "");
        const after = make(43);
        // Called before the check: a function not yet run is reported as not Liftoff.
        let rounds = 0;
        do {
          for (let i = 0; i < 10000; i++) { inside(); after(); }
          await new Promise((r) => setImmediate(r));
        } while (eval("%IsLiftoffFunction(after)") && ++rounds < 10000);
        console.log(inside() + after(), eval("%IsLiftoffFunction(inside)"), eval("%IsLiftoffFunction(after)"));
      });`;
    const r = spawnSync(process.execPath, ["--allow-natives-syntax", "--wasm-tiering-budget=1000", "--import", "tsx", "-e", script], { encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(r.stdout.trim()).toBe("85 true false");
  });
});
