import type { Logger } from "pino";
import type { Config } from "../config.js";
import type { Db } from "../db/client.js";
import type { RunningProcess } from "../server.js";
import { bootstrap } from "../core/identity/bootstrap.js";
import { bootstrapExtensions } from "./bootstrap-extensions.js";

/**
 * On an empty database, `portico serve` bootstraps an organization and prints its keys once, on
 * stderr as a banner (never through the logger), so a newcomer can call the API at once.
 */
export async function firstRunBootstrap(proc: RunningProcess, cfg: Config, logger: Logger): Promise<void> {
  const database = proc.database!;
  // One transaction (under an advisory lock on PostgreSQL; SQLite transactions begin IMMEDIATE) so
  // two processes starting together on one empty database bootstrap exactly once.
  const result = await database.db.$transaction(
    async (tx) => {
      if (database.provider === "postgresql") await tx.$queryRawUnsafe("SELECT pg_advisory_xact_lock(7274426)::text AS locked");
      if ((await tx.organization.count()) > 0) return null;
      return bootstrap(tx as unknown as Db, bootstrapExtensions(cfg));
    },
    { maxWait: 30_000, timeout: 30_000 },
  );
  if (!result) return;
  logger.info({ organization_id: result.organization_id }, "first run: bootstrapped an organization");
  const base = proc.gatewayUrl ? `${proc.gatewayUrl}/api/v1` : "(gateway not running)";
  process.stderr.write(
    [
      "",
      "Portico is ready. These keys are shown once; store them now.",
      `  API base URL:    ${base}`,
      `  management key:  ${result.management_key}`,
      `  api key:         ${result.api_key}`,
      ...(typeof result.intern_id === "string" ? [`  intern id:       ${result.intern_id}`] : []),
      "",
      `  curl -s ${base}/key -H "Authorization: Bearer <management key>"`,
      "",
    ].join("\n") + "\n",
  );
}
