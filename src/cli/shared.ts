import type { Config } from "../config.js";
import { openDatabase, type DatabaseHandle } from "../db/client.js";

/** Opens (and migrates) the configured database for one command, closing it afterwards. */
export async function withDatabase<T>(cfg: Config, fn: (handle: DatabaseHandle) => Promise<T>): Promise<T> {
  const handle = await openDatabase({ databaseUrl: cfg.databaseUrl, dataDir: cfg.dataDir, migrate: true });
  try {
    return await fn(handle);
  } finally {
    await handle.close();
  }
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export class CliError extends Error {}
