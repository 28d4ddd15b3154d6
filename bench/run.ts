/**
 * `npm run bench -- <name> [args…]`: runs bench/<name>.ts with the given arguments (the same as
 * `node bin/run-ts.mjs bench/<name>.ts [args…]`); without a name, or with an unknown one, lists the benches and exits
 * 2. Most benches serve from dist/: `npm run -s build` first. `npm run bench:quick` is the regression check.
 *
 *   npm run -s bench -- chat-hot-path --targets bare,serve1 --rounds 1
 */
import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { resolve } from "node:path";

const dir = import.meta.dirname;
const benches = readdirSync(dir)
  .filter((f) => f.endsWith(".ts") && f !== "run.ts")
  .map((f) => f.slice(0, -3))
  .sort();
const [name, ...args] = process.argv.slice(2);

if (name === undefined || !benches.includes(name.replace(/\.ts$/, ""))) {
  if (name !== undefined) console.error(`no bench named "${name}"`);
  console.error(`usage: npm run -s bench -- <name> [args…]   (runs bench/<name>.ts; each file's header documents its arguments)\n\nbenches:\n${benches.map((b) => `  ${b}`).join("\n")}`);
  process.exit(2);
}

const child = spawn(process.execPath, [resolve(dir, "..", "bin/run-ts.mjs"), resolve(dir, `${name.replace(/\.ts$/, "")}.ts`), ...args], { stdio: "inherit" });
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
