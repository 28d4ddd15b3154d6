/**
 * Vitest global setup: compiles src/ to dist/ (incremental `tsc -p tsconfig.build.json`) before any test
 * runs, because tests that start the `portico` command or the built-in agent run the compiled JavaScript,
 * as production does. A no-change build takes a couple of seconds.
 */
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { resolve } from "node:path";

export default function setup(): void {
  const root = resolve(import.meta.dirname, "..");
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { cwd: root, stdio: "inherit" });
}
