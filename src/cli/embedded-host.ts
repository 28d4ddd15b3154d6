import { readFileSync } from "node:fs";
import type { Logger } from "pino";
import type { Config } from "../config.js";
import type { RunningProcess } from "../server.js";
import { BUILTIN_INTERN_NAME } from "../core/interns/builtin-intern.js";
import { createInternRepository } from "../core/interns/intern-repository.js";
import { startEmbeddedHost } from "../host/embedded.js";

/**
 * `portico serve` attaches an intern host with the built-in agent to the built-in intern, so the intern
 * endpoint works out of the box. Host tokens are stored only as hashes, so each start issues a fresh
 * token for the built-in intern and keeps it in memory; an outside host for that intern is detached.
 */
export async function attachEmbeddedHost(proc: RunningProcess, cfg: Config, logger: Logger): Promise<void> {
  if (!cfg.embeddedHost || !proc.database || !proc.coreServer) return;
  const db = proc.database.db;
  const intern = await db.intern.findFirst({ where: { name: BUILTIN_INTERN_NAME }, orderBy: { createdAt: "asc" } });
  if (!intern) {
    logger.info("no built-in intern in the database; embedded intern host not started");
    return;
  }
  const token = await createInternRepository(db).revokeHostToken(intern.id, true);
  if (!token) return;
  const host = startEmbeddedHost({
    coreUrl: proc.coreServer.url,
    token,
    ...(cfg.grpcTls ? { coreCert: readFileSync(cfg.grpcTls.certFile) } : {}),
    dataDir: cfg.dataDir,
    internId: intern.id,
    logger,
  });
  proc.onClose.push(() => host.close());
  logger.info({ intern_id: intern.id }, "embedded intern host started with the built-in agent");
}
