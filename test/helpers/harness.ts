/**
 * Starts the real stack for a test: a fresh database (SQLite or PostgreSQL), the core on a loopback
 * h2c port, and the gateway on a loopback HTTP port reaching the core in-memory (as `portico serve`
 * does). Bootstraps an organization and offers helpers to create more tenants and keys.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import type { FastifyInstance } from "fastify";
import { loadConfig, type Config } from "../../src/config.js";
import { createCore, type Core } from "../../src/core/core.js";
import { startCoreServer, type CoreServer } from "../../src/core/server.js";
import { bootstrap, type BootstrapResult, type BootstrapExtension } from "../../src/core/identity/bootstrap.js";
import { createIdentityRepository } from "../../src/core/identity/identity-repository.js";
import { openDatabase, type DatabaseHandle, type DbProvider } from "../../src/db/client.js";
import { buildGateway } from "../../src/gateway/app.js";
import { createLogger } from "../../src/log.js";
import { createMetrics } from "../../src/lib/metrics.js";
import { freshPostgres, freshSqlite } from "./db.js";

export interface Tenant {
  organizationId: string;
  workspaceId: string;
  userId: string;
  managementKey: string;
  managementKeyHash: string;
  apiKey: string;
  apiKeyHash: string;
}

export interface Harness {
  provider: DbProvider;
  database: DatabaseHandle;
  config: Config;
  core: Core;
  coreServer: CoreServer;
  gateway: FastifyInstance;
  /** http://127.0.0.1:<port> of the gateway (append /api/v1). */
  baseUrl: string;
  /** http://127.0.0.1:<port> of the core (gRPC, Connect, gRPC-Web). */
  coreUrl: string;
  bootstrap: BootstrapResult;
  /** The bootstrapped tenant (interns programme member). */
  tenant: Tenant;
  /** Every log line written so far (JSON strings). */
  logs: string[];
  /** The environment overrides this instance was configured with (a second instance reuses them). */
  env: Record<string, string>;
  createTenant(opts?: { internsProgramme?: boolean }): Promise<Tenant>;
  identity: ReturnType<typeof createIdentityRepository>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  provider?: DbProvider;
  /** Environment overrides fed to loadConfig (e.g. PORTICO_INTERACTION_DEADLINE_MS). */
  env?: Record<string, string>;
  bootstrapExtensions?: BootstrapExtension[];
  /** SQLite busy timeout of the test database (default 5 s), e.g. short for outage tests. */
  busyTimeoutMs?: number;
  /**
   * A second instance: its own core and gateway on this harness's database (its tenant, no new bootstrap), configured
   * with the same `env` unless one is given.
   */
  sameDatabaseAs?: Harness;
}

export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const provider = opts.sameDatabaseAs?.provider ?? opts.provider ?? "sqlite";
  const dbOptions = opts.busyTimeoutMs !== undefined ? { busyTimeoutMs: opts.busyTimeoutMs } : {};
  const database = opts.sameDatabaseAs
    ? await openDatabase({ databaseUrl: opts.sameDatabaseAs.database.url, dataDir: tmpdir(), migrate: false, ...dbOptions })
    : provider === "sqlite"
      ? await freshSqlite(dbOptions)
      : await freshPostgres(dbOptions);
  const env = opts.env ?? opts.sameDatabaseAs?.env ?? {};
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logs.push(String(chunk));
      cb();
    },
  });
  const logger = createLogger({ level: "debug", destination: sink });
  const config = loadConfig({
    // A second instance shares the first's data folder too: its master key opens the BYOK credentials.
    PORTICO_DATA_DIR: opts.sameDatabaseAs
      ? opts.sameDatabaseAs.config.dataDir
      : database.url.startsWith("file:")
      ? database.url.slice(5).replace(/\/[^/]*$/, "")
      : mkdtempSync(join(tmpdir(), "portico-pg-test-")),
    HOST: "127.0.0.1",
    PORT: "0",
    PORTICO_GRPC_PORT: "0",
    PORTICO_EMBEDDED_HOST: "false",
    ...env,
  });
  const metrics = createMetrics();
  const core = await createCore({ database, config, logger, metrics });
  const coreServer = await startCoreServer(core, { host: "127.0.0.1", port: 0, logger });
  const gateway = await buildGateway({
    transport: core.createInMemoryTransport(),
    logger,
    metrics,
    bodyLimitBytes: config.bodyLimitBytes,
    brand: config.brand,
    requestTimeoutMs: config.requestTimeoutMs,
    heartbeatIntervalMs: config.interns.heartbeatIntervalMs,
  });
  await gateway.listen({ host: "127.0.0.1", port: 0 });
  const address = gateway.server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  // As `portico serve`: intern hosts reach this gateway for model calls (unless the env names another address).
  core.gatewayListening(`http://127.0.0.1:${port}`);
  const boot = opts.sameDatabaseAs?.bootstrap ?? (await bootstrap(database.db, opts.bootstrapExtensions ?? []));
  const identity = createIdentityRepository(database.db);

  const tenant: Tenant = opts.sameDatabaseAs?.tenant ?? {
    organizationId: boot.organization_id,
    workspaceId: boot.workspace_id,
    userId: boot.user_id,
    managementKey: boot.management_key!,
    managementKeyHash: boot.management_key_hash,
    apiKey: boot.api_key!,
    apiKeyHash: boot.api_key_hash,
  };

  let n = 0;
  return {
    provider,
    database,
    config,
    core,
    coreServer,
    gateway,
    baseUrl: `http://127.0.0.1:${port}`,
    coreUrl: coreServer.url,
    bootstrap: boot,
    tenant,
    logs,
    env,
    identity,
    async createTenant(o = {}) {
      n += 1;
      const org = await identity.createOrganization({ name: `tenant-${n}`, internsProgramme: o.internsProgramme ?? false });
      const user = await identity.findOrCreateUser({ email: `admin-${n}@${org.id}.invalid`, name: `admin ${n}` });
      await identity.addMember(org.id, user.id, "admin");
      const ws = await identity.createWorkspace({ organizationId: org.id, name: "Default", slug: "default", isDefault: true });
      const mgmt = await identity.createApiKey({
        organizationId: org.id,
        workspaceId: ws.id,
        creatorUserId: user.id,
        name: "management",
        isManagement: true,
      });
      const plain = await identity.createApiKey({
        organizationId: org.id,
        workspaceId: ws.id,
        creatorUserId: user.id,
        name: "ordinary",
        isManagement: false,
      });
      return {
        organizationId: org.id,
        workspaceId: ws.id,
        userId: user.id,
        managementKey: mgmt.plaintext,
        managementKeyHash: mgmt.record.hash,
        apiKey: plain.plaintext,
        apiKeyHash: plain.record.hash,
      };
    },
    async close() {
      await gateway.close();
      await coreServer.close();
      await core.close();
      await database.close();
    },
  };
}

/** fetch() against the gateway with a bearer key and a JSON body. */
export async function api(
  h: Harness,
  method: string,
  path: string,
  opts: { key?: string; body?: unknown; headers?: Record<string, string>; rawBody?: string } = {},
): Promise<{ status: number; headers: Headers; json: any; text: string }> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  let body: string | undefined;
  if (opts.rawBody !== undefined) body = opts.rawBody;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers["content-type"] ??= "application/json";
  }
  const res = await fetch(`${h.baseUrl}/api/v1${path}`, { method, headers, body });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text };
}
