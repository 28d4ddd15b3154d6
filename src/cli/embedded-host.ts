import { readFileSync } from "node:fs";
import type { Logger } from "pino";
import type { Config } from "../config.js";
import type { RunningProcess } from "../server.js";
import { BUILTIN_INTERN_NAME } from "../core/interns/builtin-intern.js";
import { startEmbeddedHost } from "../host/embedded.js";

/**
 * `portico serve` attaches an intern host with the built-in agent to the built-in intern, so the intern
 * endpoint works out of the box. The host gets a token that only this process's core accepts (kept in
 * memory, never written): the intern's stored token is left alone, so another `serve` on the same
 * database, or an outside host given that token, is not locked out.
 */
export async function attachEmbeddedHost(proc: RunningProcess, cfg: Config, logger: Logger): Promise<void> {
  if (!cfg.embeddedHost || !proc.database || !proc.coreServer || !proc.core) return;
  const db = proc.database.db;
  const intern = await db.intern.findFirst({ where: { name: BUILTIN_INTERN_NAME }, orderBy: { createdAt: "asc" } });
  if (!intern) {
    logger.info("no built-in intern in the database; embedded intern host not started");
    return;
  }
  const token = proc.core.issueLocalHostToken(intern.id);
  const host = startEmbeddedHost({
    coreUrl: (proc.internalCoreServer ?? proc.coreServer).url,
    token,
    ...(cfg.grpcTls ? { coreCert: readFileSync(cfg.grpcTls.certFile) } : {}),
    dataDir: cfg.dataDir,
    internId: intern.id,
    logger,
  });
  proc.onClose.push(() => host.close());
  logger.info({ intern_id: intern.id }, "embedded intern host started with the built-in agent");
}
