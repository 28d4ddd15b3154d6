// Child process for the concurrency tests: waits until a shared start time, runs the migration
// runner once and prints its result as JSON.
// Usage: node --import tsx migrate-child.ts <provider> <url> [startAtMs] [migrationsDir]
import { runMigrations } from "../../src/db/migrate.js";
import type { DbProvider } from "../../src/db/client.js";

const [provider, url, startAt, migrationsDir] = process.argv.slice(2);
if ((provider !== "sqlite" && provider !== "postgresql") || !url) {
  console.error("usage: migrate-child.ts <sqlite|postgresql> <url> [startAtMs] [migrationsDir]");
  process.exit(64);
}
const wait = Number(startAt ?? 0) - Date.now();
if (wait > 0) await new Promise((r) => setTimeout(r, wait));
const result = await runMigrations({
  provider: provider as DbProvider,
  url,
  ...(migrationsDir ? { migrationsDir } : {}),
});
process.stdout.write(JSON.stringify(result) + "\n");
