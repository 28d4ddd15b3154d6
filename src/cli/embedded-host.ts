import { readFileSync } from "node:fs";
import type { Logger } from "pino";
import type { Config } from "../config.js";
import type { RunningProcess } from "../server.js";
import { BUILTIN_INTERN_NAME } from "../core/interns/builtin-intern.js";
import { startEmbeddedHost, type EmbeddedHostOptions } from "../host/embedded.js";

/**
 * `portico serve` attaches an intern host with the built-in agent to the built-in intern, so the intern
 * endpoint works out of the box. The host gets a token that only this process's core accepts (kept in
 * memory, never written): the intern's stored token is left alone, so another `serve` on the same
 * database, or an outside host given that token, is not locked out.
 */
export async function attachEmbeddedHost(proc: RunningProcess, cfg: Config, logger: Logger): Promise<void> {
  if (!cfg.embeddedHost || !proc.database || !proc.coreServer || !proc.core) return;
  const intern = await builtinIntern(proc);
  if (!intern) {
    logger.info("no built-in intern in the database; embedded intern host not started");
    return;
  }
  const token = proc.core.issueLocalHostToken(intern.id);
  const settings = cfg.embeddedHostSettings;
  if (settings.ignored.length > 0) {
    logger.info(
      { variables: settings.ignored },
      "these PORTICO_HOST_* variables apply to `portico intern-host`, not to the embedded host (it dials this process's core, keeps its folders under PORTICO_DATA_DIR and runs the built-in agent)",
    );
  }
  const host = startEmbeddedHost({
    coreUrl: (proc.internalCoreServer ?? proc.coreServer).url,
    token,
    ...(cfg.grpcTls ? { coreCert: readFileSync(cfg.grpcTls.certFile) } : {}),
    dataDir: cfg.dataDir,
    internId: intern.id,
    logger,
    ...embeddedHostOptions(cfg),
  });
  proc.onClose.push(() => host.close());
  logger.info({ intern_id: intern.id }, "embedded intern host started with the built-in agent");
}

/** The options `serve` gives its embedded host from the PORTICO_HOST_* settings: limits, bubblewrap, run-as user. */
export function embeddedHostOptions(cfg: Config): Pick<EmbeddedHostOptions, "limits" | "bwrapPath" | "runAs"> {
  const s = cfg.embeddedHostSettings;
  return {
    limits: { ...s.limits },
    ...(s.bwrapPath !== undefined ? { bwrapPath: s.bwrapPath } : {}),
    ...(s.runAs !== undefined ? { runAs: s.runAs } : {}),
  };
}

function builtinIntern(proc: RunningProcess): Promise<{ id: string } | null> {
  return proc.database!.db.intern.findFirst({ where: { name: BUILTIN_INTERN_NAME }, orderBy: { createdAt: "asc" }, select: { id: true } });
}

/** How long start-up waits for the embedded host's link before serving without it. */
export const EMBEDDED_HOST_WAIT_MS = 20_000;

/**
 * Holds a `serve` process (every worker of one) until a prompt to the built-in intern would find the
 * embedded host: its link is attached here or, with several workers, the worker holding it is known.
 * Until then /readyz answers 503, so "ready" never means "intern prompts fail with 502". A host that
 * does not attach within {@link EMBEDDED_HOST_WAIT_MS} is logged and the process serves anyway (the
 * rest of the API does not depend on it).
 */
export async function waitForEmbeddedHost(proc: RunningProcess, cfg: Config, logger: Logger, timeoutMs = EMBEDDED_HOST_WAIT_MS): Promise<void> {
  if (!cfg.embeddedHost || !proc.database || !proc.core) return;
  const intern = await builtinIntern(proc);
  if (!intern) return;
  const deadline = Date.now() + timeoutMs;
  while (!(await proc.core.internReachable(intern.id))) {
    if (Date.now() >= deadline) {
      logger.warn({ intern_id: intern.id, waited_ms: timeoutMs }, "the embedded intern host has not attached; serving without it for now");
      return;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}
