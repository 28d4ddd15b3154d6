/**
 * Creating the folders Portico keeps its files in, safely.
 *
 * Node's `mkdirSync(…, {recursive: true})` never returns on some paths (under /proc it loops forever,
 * synchronously, so not even SIGTERM is handled). This walks up to the nearest existing ancestor and
 * creates each missing level with a plain mkdir, so every failure surfaces at once as an error that
 * names the folder and, when given, the setting it came from.
 */
import { accessSync, chmodSync, constants, mkdirSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";

export class FolderError extends Error {
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(message);
    this.name = "FolderError";
  }
}

function describe(setting: string | undefined, path: string): string {
  return setting ? `${setting} (${path})` : path;
}

/** Ensures `dir` exists as a writable folder; new levels get `mode`. */
export function ensureDir(dir: string, opts: { mode?: number; setting?: string } = {}): void {
  const target = resolve(dir);
  const missing: string[] = [];
  let cursor = target;
  for (;;) {
    try {
      const st = statSync(cursor);
      if (!st.isDirectory()) {
        throw new FolderError(`${describe(opts.setting, target)}: ${cursor} exists and is not a folder`, target);
      }
      break;
    } catch (err) {
      if (err instanceof FolderError) throw err;
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOTDIR") throw new FolderError(`${describe(opts.setting, target)}: a part of the path is not a folder`, target);
      if (code !== "ENOENT") throw new FolderError(`${describe(opts.setting, target)}: cannot use ${cursor} (${code})`, target);
      missing.push(cursor);
      const parent = dirname(cursor);
      if (parent === cursor) break;
      cursor = parent;
    }
  }
  for (const level of missing.reverse()) {
    try {
      mkdirSync(level, { mode: opts.mode ?? 0o700 });
      if (opts.mode !== undefined) chmodSync(level, opts.mode); // mkdir's mode is masked by the umask
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "EEXIST") continue; // another process made it meanwhile
      throw new FolderError(`${describe(opts.setting, target)}: cannot create folder ${level} (${code ?? (err as Error).message})`, target);
    }
  }
  try {
    accessSync(target, constants.W_OK | constants.X_OK);
  } catch (err) {
    throw new FolderError(`${describe(opts.setting, target)}: folder is not writable (${(err as NodeJS.ErrnoException).code})`, target);
  }
}
