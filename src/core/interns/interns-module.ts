/**
 * Composition of the interns domain: repository, live link registry, run state machine and the two
 * Connect services (public InternsService, host-facing InternLinkService). core.ts wires it.
 */
import type { Logger } from "pino";
import type { Config } from "../../config.js";
import type { Db } from "../../db/client.js";
import { createInternRepository } from "./intern-repository.js";
import { createInternsHandler } from "./interns-handler.js";
import { createInternLinkHandler } from "./link-handler.js";
import { LinkRegistry } from "./link-registry.js";
import { createRunManager } from "./run-manager.js";
import { createBackground } from "./background.js";
import { createTurnLimiter } from "../../lib/turn-limiter.js";

export interface InternsModuleDeps {
  db: Db;
  config: Config;
  logger: Logger;
}

export function createInternsModule(deps: InternsModuleDeps) {
  const repo = createInternRepository(deps.db);
  const links = new LinkRegistry();
  const background = createBackground((err) => deps.logger.error({ err }, "intern background work failed"));
  const manager = createRunManager({
    repo,
    background,
    links,
    config: deps.config.interns,
    instanceId: deps.config.instanceId,
    logger: deps.logger,
  });
  const linkHandler = createInternLinkHandler({
    repo,
    background,
    links,
    manager: () => manager,
    config: deps.config.interns,
    instanceId: deps.config.instanceId,
    logger: deps.logger,
  });
  const limiter = createTurnLimiter({
    points: deps.config.interns.rateLimitTurns,
    durationSeconds: deps.config.interns.rateLimitWindowSeconds,
    redisUrl: deps.config.redisUrl,
    logger: deps.logger,
  });
  const internsHandler = createInternsHandler({
    repo,
    manager,
    config: deps.config.interns,
    logger: deps.logger,
    limiter,
  });
  return {
    repo,
    limiter,
    links,
    manager,
    linkHandler,
    internsHandler,
    /** Stops timers and closes every host link (their streaming runs end as stream_severed). */
    async close(): Promise<void> {
      manager.close();
      const open = links.all();
      for (const link of open) link.close("core shutting down");
      await Promise.all(open.map((l) => repo.markDetached(l.internId, deps.config.instanceId).catch(() => undefined)));
      await background.drain();
      await limiter.close();
    },
  };
}

export type InternsModule = ReturnType<typeof createInternsModule>;
