#!/usr/bin/env node
// Entry point of the `portico` command: runs the compiled CLI (dist/, built by `npm run build`, which
// `npm ci` and `npm test` run for you). Production processes load plain JavaScript: no TypeScript loader.
import { existsSync } from "node:fs";

const main = new URL("../dist/cli/main.js", import.meta.url);
if (!existsSync(main)) {
  process.stderr.write("portico: dist/ is missing; run `npm run build` (npm ci does it) first\n");
  process.exit(1);
}
await import(main.href);
