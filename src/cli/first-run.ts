import type { Logger } from "pino";
import type { Config } from "../config.js";
import type { RunningProcess } from "../server.js";
import { bootstrap } from "../core/identity/bootstrap.js";
import { bootstrapExtensions } from "./bootstrap-extensions.js";

/**
 * On an empty database, `portico serve` bootstraps an organization and prints its keys once, on
 * stderr as a banner (never through the logger), so a newcomer can call the API at once.
 */
export async function firstRunBootstrap(proc: RunningProcess, cfg: Config, logger: Logger): Promise<void> {
  const db = proc.database!.db;
  const existing = await db.organization.count();
  if (existing > 0) return;
  const result = await bootstrap(db, bootstrapExtensions(cfg));
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
