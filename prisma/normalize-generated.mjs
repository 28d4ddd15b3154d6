#!/usr/bin/env node
// Makes the generated Prisma clients (src/generated/{sqlite,postgres}) byte-for-byte reproducible.
// Run after `prisma generate` (the `generate:prisma` npm script does).
//
// Prisma 6.19's `prisma-client` generator writes, into internal/class.ts, a config object that:
// - holds absolute paths (generator.output.value, generator.sourceFilePath): differs per checkout;
// - lists generator.config keys in a random order on every run (a hash map in the engine);
// - records the detected native platform in binaryTargets (differs between Linux distros / macOS).
// None of these are read at runtime with `engineType = "client"` + driver adapters (checked in
// @prisma/client/runtime/client.js), so we rewrite them to stable values: repo-relative paths,
// sorted config keys and a "native" binary target.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const START = "const config: runtime.GetPrismaClientConfig = ";

const toPosix = (p) => p.split("\\").join("/");
const sortKeys = (o) => Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

for (const dir of ["sqlite", "postgres"]) {
  const file = join(root, "src", "generated", dir, "internal", "class.ts");
  const text = readFileSync(file, "utf8");
  const start = text.indexOf(START);
  if (start < 0) throw new Error(`${file}: config object not found (Prisma generator output changed?)`);
  const bodyStart = start + START.length;
  const bodyEnd = text.indexOf("\n}\n", bodyStart);
  if (bodyEnd < 0) throw new Error(`${file}: end of config object not found`);
  const config = JSON.parse(text.slice(bodyStart, bodyEnd + 2));
  const gen = config.generator;
  const rel = (p) => (typeof p === "string" && p.startsWith("/") ? toPosix(relative(root, p)) : toPosix(p));
  if (gen.output && typeof gen.output.value === "string") gen.output.value = rel(gen.output.value);
  if (typeof gen.sourceFilePath === "string") gen.sourceFilePath = rel(gen.sourceFilePath);
  if (gen.config) gen.config = sortKeys(gen.config);
  gen.binaryTargets = [{ fromEnvVar: null, value: "native", native: true }];
  const out = loadWasmFromFile(text.slice(0, bodyStart) + JSON.stringify(config, null, 2) + text.slice(bodyEnd + 2), file);
  if (out !== text) writeFileSync(file, out);
}

// The generator loads the query compiler's wasm by importing a module whose only export is a 2.5 MB
// base64 string, which every process then kept for its whole life. Point the generated loader at
// src/db/prisma-wasm.ts, which reads the same file as text (measured with bench/memory-parts.mjs).
function loadWasmFromFile(text, file) {
  const importLine = /\n(\s*)const \{ wasm \} = await import\("(@prisma\/client\/runtime\/query_compiler_bg\.\w+\.wasm-base64\.mjs)"\)\n\s*return await decodeBase64AsWasm\(wasm\)\n/;
  const m = importLine.exec(text);
  if (!m) {
    if (text.includes("readWasmBase64(")) return text; // already rewritten
    throw new Error(`${file}: query compiler wasm import not found (Prisma generator output changed?)`);
  }
  const [, indent, specifier] = m;
  const out = text.replace(importLine, `\n${indent}return await decodeBase64AsWasm(await readWasmBase64("${specifier}"))\n`);
  const anchor = 'import type * as Prisma from "./prismaNamespace.js"\n';
  if (!out.includes(anchor)) throw new Error(`${file}: Prisma namespace import not found (Prisma generator output changed?)`);
  return out.replace(anchor, `${anchor}import { readWasmBase64 } from "../../../db/prisma-wasm.js" // Portico: prisma/normalize-generated.mjs\n`);
}
