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
import { createLocalCluster, createRedisCluster, type InternCluster } from "./cluster.js";
import { createForwarder } from "./forwarder.js";
import { createIpcCluster, isServeWorker } from "../../cluster/ipc.js";
import { generateHostToken, hashSecret } from "../identity/keys.js";
import { createRunCredentials } from "./run-credentials.js";

export interface InternsModuleDeps {
  db: Db;
  config: Config;
  logger: Logger;
  /** Writes the process's queued generation records now (a run's usage is summed from them). */
  flushGenerations?: () => Promise<void>;
}

export function createInternsModule(deps: InternsModuleDeps) {
  const repo = createInternRepository(deps.db);
  const links = new LinkRegistry();
  const cfg = deps.config.interns;
  // Several core processes share interns through Redis; the workers of one `portico serve` through their
  // primary (src/cluster); one process keeps everything in memory.
  // A serve worker always tells its primary which links it holds: with Redis too, so that a Redis outage
  // does not hide the worker of the same serve that holds a link.
  const ipc = isServeWorker() ? createIpcCluster({ instanceId: deps.config.instanceId, advertiseUrl: undefined }) : undefined;
  const cluster: InternCluster = deps.config.redisUrl
    ? createRedisCluster({
        redisUrl: deps.config.redisUrl,
        prefix: cfg.redisPrefix,
        instanceId: deps.config.instanceId,
        // A serve worker advertises its own listener (server.ts derives it from the advertise URL's host).
        advertiseUrl: isServeWorker() ? undefined : cfg.advertiseUrl,
        leaseTtlMs: Math.max(3_000, 2 * cfg.linkLivenessTimeoutMs),
        logger: deps.logger,
        fallback: ipc,
      })
    : (ipc ?? createLocalCluster());
  const forwarder = createForwarder();
  const localTokens = new Map<string, string>();
  const background = createBackground((err) => deps.logger.error({ err }, "intern background work failed"));
  const credentials = createRunCredentials(deps.db, { ttlMs: cfg.runCredentialTtlMs });
  // The gateway address hosts reach: the operator's setting, else (`portico serve`) the gateway's own listener.
  let gatewayUrl = cfg.gatewayUrl;
  const manager = createRunManager({
    gatewayUrl: () => gatewayUrl,
    credentials,
    ...(deps.flushGenerations ? { flushGenerations: deps.flushGenerations } : {}),
    repo,
    background,
    links,
    cluster,
    config: deps.config.interns,
    instanceId: deps.config.instanceId,
    logger: deps.logger,
    brand: deps.config.brand,
  });
  const linkHandler = createInternLinkHandler({
    repo,
    background,
    links,
    manager: () => manager,
    cluster,
    localTokens,
    config: deps.config.interns,
    instanceId: deps.config.instanceId,
    logger: deps.logger,
  });
  const limiter = createTurnLimiter({
    points: deps.config.interns.rateLimitTurns,
    durationSeconds: deps.config.interns.rateLimitWindowSeconds,
    redisUrl: deps.config.redisUrl,
    shareWithServeWorkers: isServeWorker(),
    logger: deps.logger,
  });
  const internsHandler = createInternsHandler({
    repo,
    manager,
    cluster,
    forwarder,
    config: deps.config.interns,
    logger: deps.logger,
    limiter,
    instanceId: deps.config.instanceId,
  });
  return {
    repo,
    limiter,
    links,
    manager,
    linkHandler,
    internsHandler,
    cluster,
    /**
     * A host token valid only on this process, for the embedded host of `portico serve`: nothing is
     * written to the database, so the intern's stored token (and another serve's host) stay valid.
     */
    issueLocalHostToken(internId: string): string {
      const token = generateHostToken();
      localTokens.set(hashSecret(token), internId);
      return token;
    },
    /** Whether a prompt to the intern would find its host: the link is here, or another process holds it. */
    async reachable(internId: string): Promise<boolean> {
      return manager.holdsLink(internId) || (await cluster.ownerOf(internId)) !== undefined;
    },
    /** Checks an intern run's model credential (the auth interceptor). */
    checkRunCredential: (token: string) => credentials.check(token),
    /** The gateway of this process listens at `url`: hosts reach it there unless PORTICO_INTERN_GATEWAY_URL says otherwise. */
    gatewayListening(url: string): void {
      gatewayUrl ??= url.replace(/\/+$/, "");
    },
    /** The core listens at `url`: other processes may forward intern calls there. */
    listening(url: string): void {
      cluster.setUrl(url);
    },
    /** Stops timers and closes every host link (their streaming runs end as stream_severed). */
    async close(): Promise<void> {
      manager.close();
      const open = links.all();
      for (const link of open) link.close("core shutting down");
      await Promise.all(open.map((l) => repo.markDetached(l.internId, deps.config.instanceId).catch(() => undefined)));
      await background.drain();
      await limiter.close();
      await cluster.close();
      forwarder.close();
    },
  };
}

export type InternsModule = ReturnType<typeof createInternsModule>;
