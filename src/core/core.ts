/**
 * Composition of the core: repositories, domain services and Connect handlers over one database.
 * `routes` and `interceptors` serve both the network listener and the gateway's in-memory transport.
 */
import type { ConnectRouter, Interceptor, Transport } from "@connectrpc/connect";
import { createDirectTransport } from "./direct-transport.js";
import type { Logger } from "pino";
import type { Config } from "../config.js";
import type { DatabaseHandle } from "../db/client.js";
import type { Metrics } from "../lib/metrics.js";
import { HealthService } from "../gen/portico/health/v1/health_service_pb.js";
import { IdentityService } from "../gen/portico/identity/v1/identity_service_pb.js";
import { InternLinkService } from "../gen/portico/internlink/v1/internlink_service_pb.js";
import { createAuthInterceptor, createErrorBoundaryInterceptor } from "./auth.js";
import { ALL_KEYS, AUTH_TOPIC, createKeyCache } from "./identity/key-cache.js";
import { createInvalidationBus, type InvalidationBus } from "../lib/invalidation.js";
import { createIpcInvalidationBus, createIpcSlots, isServeWorker } from "../cluster/ipc.js";
import { createMemoryConcurrencyLimiter, createRedisConcurrencyLimiter } from "../lib/concurrency-limiter.js";
import { createHealthHandler } from "./health/health-handler.js";
import { createIdentityHandler } from "./identity/identity-handler.js";
import { createIdentityRepository } from "./identity/identity-repository.js";
import { createMetricsInterceptor } from "./metrics-interceptor.js";
import { createTracingInterceptor } from "./tracing-interceptor.js";
import { withGenerationMetrics } from "./chat/generation-metrics.js";
import { InternsService } from "../gen/portico/interns/v1/interns_service_pb.js";
import { createInternsModule } from "./interns/interns-module.js";
import { InternAdminService } from "../gen/portico/internadmin/v1/internadmin_service_pb.js";
import { createInternAdmin } from "./interns/intern-admin.js";
import { createInternAdminHandler } from "./interns/intern-admin-handler.js";
import { ByokService } from "../gen/portico/byok/v1/byok_service_pb.js";
import { createByokDomain } from "./byok/byok-module.js";
import { PresetsService } from "../gen/portico/presets/v1/presets_service_pb.js";
import { createPresetsHandler } from "./presets/presets-handler.js";
import { createPresetsRepository } from "./presets/presets-repository.js";
import { createPresetManagement } from "./presets/preset-management.js";
import { AuditService } from "../gen/portico/audit/v1/audit_service_pb.js";
import { KeysService } from "../gen/portico/keys/v1/keys_service_pb.js";
import { ChatService } from "../gen/portico/chat/v1/chat_service_pb.js";
import { EmbeddingsService } from "../gen/portico/embeddings/v1/embeddings_service_pb.js";
import { ProvidersService } from "../gen/portico/providers/v1/providers_service_pb.js";
import { createProvidersHandler } from "./byok/providers-handler.js";
import { createChatHandler } from "./chat/chat-handler.js";
import { createDatabaseResponseCache, createRedisResponseCache } from "./chat/response-cache.js";
import { createEmbeddingsHandler } from "./chat/embeddings-handler.js";
import { createEndpointStats } from "./chat/routing/endpoint-stats.js";
import { createBusHealthMemory, createMemoryHealthMemory, createRedisHealthMemory } from "../lib/health-memory.js";
import { createMemorySessionAffinity, createRedisSessionAffinity } from "../lib/session-affinity.js";
import { createGenerationStore } from "./chat/generations.js";
import { CONTENT_SWEEP_INTERVAL_MS, createContentLog } from "./chat/content-log.js";
import { createGenerationsHandler } from "./chat/generations-handler.js";
import { GenerationsService } from "../gen/portico/generations/v1/generations_service_pb.js";
import { ActivityService } from "../gen/portico/activity/v1/activity_service_pb.js";
import { createActivityHandler } from "./activity/activity-handler.js";
import { createActivityRepository } from "./activity/activity-repository.js";
import { BYOK_TOPIC, createCredentialStore } from "./chat/credentials/load.js";
import { RoutingSettingsService } from "../gen/portico/routing/v1/routing_settings_pb.js";
import { createRoutingSettingsHandler } from "./routing-settings/routing-settings-handler.js";
import { createRoutingSettingsCache, createRoutingSettingsService, ROUTING_SETTINGS_TOPIC } from "./routing-settings/routing-settings.js";
import { createSharedCredentialStore, withKeylessProviders } from "./byok/provider-keys.js";
import { ProviderRegistry } from "./chat/providers/index.js";
import { loadCatalogFile } from "./catalog/catalog.js";
import { createLiveCatalog } from "./catalog/live-catalog.js";
import { createCatalogManagement } from "./catalog/catalog-management.js";
import { createCatalogHandler } from "./catalog/catalog-handler.js";
import { servedBy } from "./catalog/providers.js";
import { CatalogService } from "../gen/portico/catalog/v1/catalog_service_pb.js";
import { WorkspacesService } from "../gen/portico/workspaces/v1/workspaces_service_pb.js";
import { createAuditLog, createAuditRecorder } from "./audit/audit-log.js";
import { createAuditHandler } from "./audit/audit-handler.js";
import { createKeysHandler } from "./keys/keys-handler.js";
import { createKeysService } from "./keys/keys-service.js";
import { createWorkspacesHandler } from "./workspaces/workspaces-handler.js";
import { createWorkspacesService } from "./workspaces/workspaces-service.js";
import { createSpendStore } from "./spend/spend-store.js";
import { createKeySpendReader } from "./spend/key-spend.js";
import { createChatRateLimiter } from "../lib/chat-rate-limiter.js";

export interface CoreOptions {
  database: DatabaseHandle;
  config: Config;
  logger: Logger;
  metrics: Metrics;
  /** Where caches hear of changes made by any process; default: Redis with REDIS_URL, else this process only. */
  bus?: InvalidationBus;
}

export interface Core {
  routes: (router: ConnectRouter) => void;
  interceptors: Interceptor[];
  /** A transport that calls this core in-process, without encoding messages (the one-process gateway, tests). */
  createInMemoryTransport(): Transport;
  /** The core's listener is up at `url` (other core processes may forward intern calls there). */
  listening(url: string): void;
  /** The HTTP gateway in front of this core listens at `url` (the default gateway address handed to intern hosts). */
  gatewayListening(url: string): void;
  /** A host token for an intern valid only on this process (the embedded host of `portico serve`). */
  issueLocalHostToken(internId: string): string;
  /** Whether a prompt to the intern would find its host now (its link is here or another process holds it). */
  internReachable(internId: string): Promise<boolean>;
  /** Stops background work (timers, links). The database is closed by its owner. */
  close(): Promise<void>;
}

/** Services that authenticate on their own and so bypass the API-key interceptor. */
export const PUBLIC_SERVICES: ReadonlySet<string> = new Set([HealthService.typeName, InternLinkService.typeName]);

export async function createCore(opts: CoreOptions): Promise<Core> {
  const { database, config, logger, metrics } = opts;
  // First: a broken operator catalog file stops the start before anything is opened.
  const catalogBase = loadCatalogFile(config.catalogFile);
  const db = database.db;
  const identity = createIdentityRepository(db);
  const closers: Array<() => Promise<void>> = [];
  // A run's usage is summed from its generations (docs/interns.md): this process's queued records are written first.
  const interns = createInternsModule({ db, config, logger, flushGenerations: () => generations.flush() });
  closers.push(() => interns.close());
  // Worker processes of `portico serve` without Redis share invalidations through their primary.
  const bus = opts.bus ?? (!config.redisUrl && isServeWorker() ? createIpcInvalidationBus() : createInvalidationBus(config, logger));
  if (!opts.bus) closers.push(() => bus.close());
  const providers = new ProviderRegistry(config.providers);
  const byok = await createByokDomain({ database, config, logger, servesProvider: servedBy(providers), onChanged: () => bus.publish(BYOK_TOPIC, "*") }).catch(async (err: unknown) => {
    if (!opts.bus) await bus.close();
    throw err;
  });
  // The catalog served: built-in < operator file < management changes (database), swapped live.
  const catalog = createLiveCatalog({ base: catalogBase, db, bus, refreshMs: config.catalogRefreshMs, logger: logger.child({ component: "catalog" }) });
  closers.push(async () => catalog.close());
  await catalog.refresh().catch(async (err: unknown) => {
    catalog.close();
    if (!opts.bus) await bus.close();
    throw err;
  });
  const catalogManagement = createCatalogManagement({ db, catalog, serves: servedBy(providers), bus });
  const keyCache = createKeyCache({ lookup: (hash) => identity.findKeyByHash(hash), ttlMs: config.authCacheTtlMs, bus });
  closers.push(async () => keyCache.close());
  // Spend limits live in the database every instance shares (docs/limits.md).
  // A limit change recounts spend from the generation records: this process's queued ones are written first.
  const spend = createSpendStore({ db, reservationTtlMs: config.chat.spendReservationTtlMs, writeQueuedRecords: () => generations.flush() });
  const workspaces = createWorkspacesService(db, {
    onMembershipChanged: () => bus.publish(AUTH_TOPIC, ALL_KEYS),
    onWorkspaceDeleted: () => bus.publish(AUTH_TOPIC, ALL_KEYS),
    onLimitsChanged: () => bus.publish(AUTH_TOPIC, ALL_KEYS),
    spend,
  });
  const keys = createKeysService({ db, workspaces, spend, onKeyChanged: (hash) => bus.publish(AUTH_TOPIC, hash) });

  const presetsRepository = createPresetsRepository(db, { provider: database.provider });
  const generations = createGenerationStore({
    db, provider: database.provider, logger, registry: metrics.registry,
    execute: database.executeRaw, writeSqlite: database.writeSqlite, executePrepared: database.executePrepared,
  });
  closers.push(() => generations.close());
  // Content logging (docs/operations.md, "Content logging"): sealed with the BYOK keyring, swept by retention.
  const contentLog = createContentLog({ db, keyring: byok.keyring, logger });
  const contentSweep = setInterval(() => {
    contentLog.sweep().catch((err: unknown) => logger.warn({ err }, "content log sweep failed"));
  }, CONTENT_SWEEP_INTERVAL_MS);
  contentSweep.unref();
  closers.push(async () => {
    clearInterval(contentSweep);
    await contentLog.close();
  });
  const credentials = createCredentialStore({
    db,
    keyring: byok.keyring,
    bus,
    onUnusable: (id) => logger.warn({ credential_id: id }, "a BYOK credential's key cannot be opened; it is skipped"),
  });
  const shared = withKeylessProviders(
    createSharedCredentialStore({
      db,
      keyring: byok.keyring,
      bus,
      onUnusable: (id) => logger.warn({ provider_key_id: id }, "a shared provider key cannot be opened; it is skipped"),
    }),
    config.providers.keyless,
  );
  // Per-key chat concurrency slots: Redis when several processes share it, else the serve primary, else memory.
  const slots = config.redisUrl
    ? createRedisConcurrencyLimiter({ redisUrl: config.redisUrl, prefix: config.interns.redisPrefix, logger })
    : isServeWorker()
      ? createIpcSlots({ instanceId: config.instanceId })
      : createMemoryConcurrencyLimiter();
  closers.push(() => slots.close());
  // Rates per key and workspace, shared as the intern turn limiter's (docs/limits.md).
  // The response cache (docs/operations.md): in Redis when configured, else in the database.
  const responseCache = config.redisUrl
    ? createRedisResponseCache({ redisUrl: config.redisUrl, prefix: config.interns.redisPrefix })
    : createDatabaseResponseCache({ db, logger });
  closers.push(() => responseCache.close());
  const rates = createChatRateLimiter({ redisUrl: config.redisUrl, redisPrefix: config.interns.redisPrefix, shareWithServeWorkers: isServeWorker() });
  closers.push(() => rates.close());
  // The health memory (cool-downs of credentials and endpoints), always read locally: shared through Redis with
  // REDIS_URL, else between the workers of one `portico serve` through their primary, else this process's.
  const healthOptions = { baseMs: config.chat.cooldownBaseMs, maxMs: config.chat.cooldownMaxMs };
  const health = config.redisUrl
    ? createRedisHealthMemory({ ...healthOptions, redisUrl: config.redisUrl, prefix: config.interns.redisPrefix, logger })
    : isServeWorker()
      ? createBusHealthMemory({ ...healthOptions, bus })
      : createMemoryHealthMemory(healthOptions);
  closers.push(() => health.close());
  // Sticky sessions (docs/routing.md): pins in Redis when configured (every instance sees them), else in memory.
  const stickyOptions = { ttlMs: config.chat.stickyTtlMs, maxEntries: config.chat.stickyMaxSessions };
  const affinity =
    config.chat.stickyTtlMs <= 0
      ? undefined
      : config.redisUrl
        ? createRedisSessionAffinity({ ...stickyOptions, redisUrl: config.redisUrl, prefix: config.interns.redisPrefix })
        : createMemorySessionAffinity(stickyOptions);
  if (affinity) closers.push(() => affinity.close());
  // One memory of the endpoints' live figures: routing reads and feeds it, the endpoints list shows it.
  const endpointStats = createEndpointStats();
  // Account-wide routing settings: written audited, read by the plan stage through a bounded cache (docs/routing.md).
  const providerNames = new Map<string, string>();
  for (const p of providers.list()) {
    providerNames.set(p.slug.toLowerCase(), p.slug);
    providerNames.set(p.name.toLowerCase(), p.slug);
  }
  const routingSettings = createRoutingSettingsService({
    db,
    providerSlug: (name) => providerNames.get(name),
    onChanged: (org) => bus.publish(ROUTING_SETTINGS_TOPIC, org),
  });
  const routingSettingsCache = createRoutingSettingsCache({ db, ttlMs: config.authCacheTtlMs, bus });
  const chatDeps = {
    accountRouting: routingSettingsCache.filtersFor,
    presets: presetsRepository,
    generations: withGenerationMetrics(
      {
        // A model call of an intern run (docs/interns.md) is written at once, not at the next flush: the run's
        // usage is summed from the database at its end, perhaps by another instance.
        record(rec) {
          generations.record(rec);
          if (rec.internRunId) void generations.flush().catch(() => undefined);
        },
      },
      metrics,
    ),
    tracing: config.tracing !== undefined,
    credentials,
    shared,
    providers,
    catalog,
    endpointStats,
    brand: config.brand,
    limits: config.chat,
    slots,
    spend,
    rates,
    logger,
    timeouts: {
      firstByteMs: config.chat.firstByteTimeoutMs,
      answerMs: config.chat.answerTimeoutMs,
      budgetMs: config.chat.budgetMs,
      retries: config.chat.retries,
      retryBaseMs: config.chat.retryBaseMs,
      retryMaxMs: config.chat.retryMaxMs,
      streamFloorBytesPerSecond: config.chat.streamFloorBytesPerSecond,
      streamProbeMs: config.chat.streamProbeMs,
    },
    health,
    credentialOrder: config.chat.credentialOrder,
    ...(affinity ? { affinity } : {}),
    keepaliveMs: config.interns.heartbeatIntervalMs,
    plugins: config.plugins,
    responseCache,
    serverTools: config.serverTools,
    contentLog,
  };
  const chat = createChatHandler(chatDeps);
  // Embeddings share the chat pipeline's stages and dependencies (one health memory, one spend store).
  const embeddings = createEmbeddingsHandler(chatDeps);

  const interceptors: Interceptor[] = [
    // Tracing on (docs/operations.md, "Tracing"): a span per RPC, continuing the caller's traceparent.
    ...(config.tracing ? [createTracingInterceptor(config.tracing.sampler)] : []),
    createMetricsInterceptor(metrics),
    createErrorBoundaryInterceptor((err, procedure, requestId) =>
      logger.error({ err, procedure, reqId: requestId }, "unexpected error in core handler"),
    ),
    createAuthInterceptor({ lookup: keyCache.lookup, publicServices: PUBLIC_SERVICES, runCredentials: interns.checkRunCredential }),
  ];

  const routes = (router: ConnectRouter) => {
    router.service(
      HealthService,
      createHealthHandler({
        instanceId: config.instanceId,
        ping: async () => {
          await db.$queryRawUnsafe("SELECT 1");
          return true;
        },
        ...(config.redisUrl ? { dependencies: { redis: () => interns.limiter.healthy() } } : {}),
      }),
    );
    router.service(
      IdentityService,
      createIdentityHandler({
        rateLimitRequests: config.interns.rateLimitTurns,
        rateLimitIntervalSeconds: config.interns.rateLimitWindowSeconds,
        keySpend: createKeySpendReader({ query: database.queryRaw, provider: database.provider, store: spend }),
      }),
    );
    router.service(InternsService, interns.internsHandler);
    router.service(InternLinkService, interns.linkHandler);
    router.service(InternAdminService, createInternAdminHandler({ admin: createInternAdmin({ db, links: interns.links, flushGenerations: () => generations.flush() }), brand: config.brand }));
    router.service(ByokService, byok.handler);
    router.service(KeysService, createKeysHandler({ service: keys }));
    router.service(WorkspacesService, createWorkspacesHandler({ service: workspaces }));
    router.service(RoutingSettingsService, createRoutingSettingsHandler({ service: routingSettings }));
    router.service(AuditService, createAuditHandler({ log: createAuditLog(db) }));
    router.service(ChatService, chat);
    router.service(EmbeddingsService, embeddings);
    router.service(CatalogService, createCatalogHandler({ catalog, management: catalogManagement, endpointStats, providerName: (slug) => providers.get(slug)?.name ?? slug }));
    router.service(ProvidersService, createProvidersHandler({ providers, credentials, shared }));
    router.service(GenerationsService, createGenerationsHandler({ db, store: generations, contentLog }));
    router.service(ActivityService, createActivityHandler({
      db,
      activity: createActivityRepository({ db, provider: database.provider }),
      canonicalSlug: (provider, id) => catalog.endpointFor(provider, id)?.model.slug,
      flush: () => generations.flush(),
    }));
    router.service(PresetsService, createPresetsHandler({
        repository: presetsRepository,
        workspaceExists: async (organizationId, id) =>
          (await db.workspace.findFirst({ where: { id, organizationId, deletedAt: null }, select: { id: true } })) !== null,
        management: createPresetManagement(db),
        audit: createAuditRecorder(db),
        brand: config.brand,
      }));
  };

  return {
    routes,
    interceptors,
    createInMemoryTransport: () => createDirectTransport(routes, interceptors),
    listening: (url) => interns.listening(url),
    gatewayListening: (url) => interns.gatewayListening(url),
    issueLocalHostToken: (internId) => interns.issueLocalHostToken(internId),
    internReachable: (internId) => interns.reachable(internId),
    async close() {
      for (const close of closers.reverse()) await close();
    },
  };
}
