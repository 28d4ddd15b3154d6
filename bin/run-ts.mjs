#!/usr/bin/env node
// Runs a TypeScript file of this project (argv[2]) with tsx's loader; used by scripts and tests.
import { register } from "tsx/esm/api";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";

register();
const file = process.argv[2];
if (!file) {
  console.error("usage: run-ts <file.ts> [args…]");
  process.exit(2);
}
process.argv.splice(1, 2, resolve(file));
await import(pathToFileURL(resolve(file)).href);
