/**
 * The query compiler's wasm for both generated Prisma clients (src/generated/{sqlite,postgres}), read as
 * text instead of imported: Prisma's generator imports a module whose only export is a 2.5 MB base64
 * string, and an ES module is never unloaded, so every process kept that string and the module's source
 * for its whole life. prisma/normalize-generated.mjs points the generated loaders here.
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";

/** The base64 literal exported by Prisma's `query_compiler_bg.<provider>.wasm-base64.mjs` module `specifier`. */
export async function readWasmBase64(specifier: string): Promise<string> {
  const source = await readFile(createRequire(import.meta.url).resolve(specifier), "latin1");
  const literal = /"([A-Za-z0-9+/=]+)"/.exec(source);
  if (!literal) throw new Error(`no base64 wasm literal in ${specifier}`);
  return literal[1]!;
}
